"""The MLM model (transformers' ``BertForMaskedLM``) and its loss at the masked positions."""
from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor

from text.mlm.config import MLMConfig


def mlm_loss(model: Any, inputs: Tensor, attn: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Cross-entropy at the masked positions only (logits for those rows alone); (loss, correct count)."""
    h = model.bert(input_ids=inputs, attention_mask=attn).last_hidden_state  # (B, T, d)
    sel = labels >= 0
    logits = model.cls(h[sel]).float()  # (M, V)
    target = labels[sel]
    return F.cross_entropy(logits, target), (logits.argmax(-1) == target).sum()

def build_model(cfg: MLMConfig, vocab_size: int) -> Any:
    from transformers import BertConfig, BertForMaskedLM

    bc = BertConfig(vocab_size=vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                    hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
                    max_position_embeddings=max(512, cfg.max_length), type_vocab_size=2)
    return BertForMaskedLM(bc)

class MLMObjective:
    """BERT's masked-token cross-entropy as the run's loss: its hyper-parameters are recorded with the registry row and
    the export (no state, no diagnostics; the loss itself is :func:`mlm_loss`)."""

    name = "mlm"

    def __init__(self, mask_prob: float) -> None:
        self.mask_prob = mask_prob

    def hparams(self) -> dict[str, Any]:
        return {"mask_prob": self.mask_prob}

    def diagnostics(self) -> dict[str, float]:
        return {}
