"""The model card of a built MLM start model."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.model_card import card_info
from suite.model_card import write_card as save_card
from text.mlm.config import MLMConfig


def write_card(out: Path, cfg: MLMConfig, summary: dict[str, Any], run: Any) -> None:
    info = card_info(
        title=f"BERT ({cfg.layers} x {cfg.hidden}) pretrained with masked-language modelling on plain English",
        what=("A small BERT trained from scratch by contrastive-suite (`suite text mlm`): the start model for SimCSE "
              "that is not already trained contrastively."),
        modality="text", loss="mlm", loss_hparams={"mask_prob": cfg.mask_prob}, data="+".join(cfg.corpus),
        n_train=summary["n_sentences"], steps=summary["steps"], seed=cfg.seed, run=run,
        extra={"vocab_size": cfg.vocab_size, "batch_size": cfg.batch_size, "lr": cfg.lr, "max_length": cfg.max_length},
        load=("from transformers import AutoModel, AutoTokenizer\n"
              f"model = AutoModel.from_pretrained({str(out)!r})\n"
              f"tokenizer = AutoTokenizer.from_pretrained({str(out)!r})\n"
              f"# SimCSE from it: suite text train --backbone {str(out)!r}"))
    save_card(out, info)
