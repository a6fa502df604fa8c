"""Saving a trained encoder: one folder that is BOTH a sentence-transformers model
(``SentenceTransformer(path)``, offline, pooling as in training, plus a Dense+tanh module when the
MLP head is used at test time) and a plain transformers checkpoint (``AutoModel.from_pretrained(path)``).
The MLP head is also kept in ``simcse_head.pt`` with ``simcse.json`` (pooling, head flags)."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from suite.safeio import load_tensors
from torch import nn

from text.models.encoder import SentenceEncoder, build_encoder

META = "simcse.json"
HEAD = "simcse_head.pt"


def save_encoder(encoder: SentenceEncoder, out: str | Path, max_seq_length: int = 256) -> Path:
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
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    if encoder.head is not None:
        torch.save(encoder.head.state_dict(), out / HEAD)
    (out / META).write_text(json.dumps({"pooling": encoder.pooling, "mlp_head": encoder.head is not None,
                                        "head_at_test": encoder.head_at_test}, indent=1))
    return out


def load_encoder(path: str | Path, pooling: str = "auto") -> SentenceEncoder:
    """A folder written by :func:`save_encoder` (head restored), or any backbone (``default``, a path)."""
    p = Path(path)
    meta = json.loads((p / META).read_text()) if (p / META).exists() else None
    if meta is None:
        return build_encoder(str(path), pooling=pooling, mlp_head=False)
    enc = build_encoder(str(p), pooling=meta["pooling"] if pooling == "auto" else pooling, mlp_head=meta["mlp_head"],
                        head_at_test=meta["head_at_test"])
    if enc.head is not None and (p / HEAD).exists():
        enc.head.load_state_dict(load_tensors(p / HEAD, what="MLP head weights"))
    return enc
