"""Saving a trained encoder: one folder that is BOTH a sentence-transformers model
(``SentenceTransformer(path)``, offline, pooling as in training, plus a Dense+tanh module when the
MLP head is used at test time) and a plain transformers checkpoint (``AutoModel.from_pretrained(path)``).
The MLP head is also kept in ``simcse_head.safetensors`` with ``simcse.json`` (pooling, head flags); where a model
saved before keeps it is declared in :data:`EARLIER` and read by :func:`suite.pretrained.load_weights`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from suite.pretrained import load_weights
from suite.train.legacy import Earlier
from suite.model_card import append_to_card, apply_to_sentence_transformer, card_info
from text.models.encoder import SentenceEncoder, build_encoder

META = "simcse.json"
HEAD = "simcse_head.safetensors"
EARLIER = Earlier(files={HEAD: "simcse_head.pt"})  # a model saved before: the head as a torch file of tensors


def save_encoder(encoder: SentenceEncoder, out: str | Path, max_seq_length: int = 256,
                 card: dict[str, Any] | None = None) -> Path:
    """``card`` (:func:`suite.model_card.card_info`, e.g. from :func:`simcse_card`) goes into the
    sentence-transformers model card (its README) plus the suite's evaluation and loading sections."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    encoder.backbone.save_pretrained(out)
    encoder.tokenizer.save_pretrained(out)
    modules: list[nn.Module] = [Transformer(str(out), max_seq_length=max_seq_length), Pooling(encoder.dim, pooling_mode=encoder.pooling)]
    if encoder.head is not None and encoder.head_at_test:
        dense = Dense(encoder.dim, encoder.dim, activation_function=nn.Tanh())
        dense.linear.load_state_dict(encoder.head.dense.state_dict())
        modules.append(dense)
    st = SentenceTransformer(modules=modules, device="cpu")
    if card is not None:
        apply_to_sentence_transformer(st, card)
    st.save(str(out))
    if card is not None:
        append_to_card(out, card)
    if encoder.head is not None:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().contiguous() for k, v in encoder.head.state_dict().items()}, str(out / HEAD))
    (out / META).write_text(json.dumps({"pooling": encoder.pooling, "mlp_head": encoder.head is not None,
                                        "head_at_test": encoder.head_at_test}, indent=1))
    return out


def _read_meta(path: Path) -> dict[str, Any]:
    """The suite's ``simcse.json`` of a saved encoder; not JSON or a key missing: ``ValueError`` naming the file."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); re-save the model or remove the file") from None
    lacking = sorted({"pooling", "mlp_head", "head_at_test"} - set(meta if isinstance(meta, dict) else {}))
    if lacking:
        raise ValueError(f"{path}: saved-encoder metadata lacks {lacking} (expected pooling, mlp_head, head_at_test)")
    return meta


def load_encoder(path: str | Path, pooling: str = "auto") -> SentenceEncoder:
    """A folder written by :func:`save_encoder` (head restored), a SimCSE run folder (its ``export/``), or any backbone
    (``default``, a path)."""
    p = Path(path)
    if (p / "export" / META).is_file():  # a run folder: the trained model is its export
        p = path = p / "export"
    meta = _read_meta(p / META) if (p / META).exists() else None
    if meta is None:
        return build_encoder(str(path), pooling=pooling, mlp_head=False)
    enc = build_encoder(str(p), pooling=meta["pooling"] if pooling == "auto" else pooling, mlp_head=meta["mlp_head"],
                        head_at_test=meta["head_at_test"])
    head = load_weights(p, HEAD, EARLIER, what="MLP head weights") if enc.head is not None else None
    if head is not None:
        enc.head.load_state_dict(head)
    return enc


def simcse_card(cfg: Any, loss: Any, data_name: str, n_train: int, steps: int, run: Any = None,
                path: str | Path | None = None) -> dict[str, Any]:
    """The model card of a SimCSE run (``cfg`` a ``SimCSEConfig``, ``loss`` the core loss object, ``run``
    its registry run for the metrics, ``path`` the saved model's folder)."""
    from suite.integrations.sentence_transformers import CITATIONS, SIMCSE_CITATION
    from suite.presets import text_dropout

    name = type(loss).name or type(loss).__name__
    dropout = text_dropout(name, cfg.dropout)
    return card_info(
        title=f"SimCSE ({cfg.mode}) with the {name} loss on {cfg.backbone}",
        what=(f"A sentence encoder trained by contrastive-suite's SimCSE front-end ({cfg.mode}ervised, "
              f"pooling {cfg.pooling}, MLP head {'kept' if cfg.head_at_test else 'dropped'} at test time)."),
        modality="text", loss=name, loss_hparams=loss.hparams(), data=data_name, n_train=n_train, steps=steps,
        seed=cfg.seed, run=run, citation=CITATIONS.get(name, SIMCSE_CITATION),
        extra={"batch_size": cfg.batch_size, "lr": cfg.lr, "max_length": cfg.max_length, "dropout": dropout,
               "bf16": cfg.bf16},
        load=("from sentence_transformers import SentenceTransformer\n"
              f"model = SentenceTransformer({str(path if path is not None else cfg.out)!r})\n"
              "embeddings = model.encode([\"a sentence\", \"another one\"])\n"
              "# or: from text.models.save import load_encoder; encoder = load_encoder(path)  (SimCSE head too)"))
