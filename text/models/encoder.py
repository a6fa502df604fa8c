"""Sentence encoder = backbone + pooler (+ SimCSE's MLP head during training).

Unsupervised SimCSE uses the head only in training (``head_at_test=False``: SimCSE's
``mlp_only_train`` / ``cls_before_pooler``); supervised SimCSE keeps it at test time.

Shapes: input_ids, attention_mask (B, L) -> (B, d).
"""
from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from text.models.backbone import load_backbone, resolve_backbone, st_pooling_mode
from text.models.pooling import POOLINGS, MLPHead, pool


class SentenceEncoder(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer: Any, pooling: str = "cls", mlp_head: bool = True,
                 head_at_test: bool = False) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.head_at_test = bool(head_at_test) and mlp_head
        dim = int(backbone.config.hidden_size)
        self.head: MLPHead | None = MLPHead(dim) if mlp_head else None

    @property
    def dim(self) -> int:
        return int(self.backbone.config.hidden_size)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, use_head: bool | None = None) -> Tensor:
        """``use_head=None``: the head in training mode, and at test time only if ``head_at_test``."""
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask)
        z = pool(out.last_hidden_state, attention_mask, self.pooling)  # (B, d)
        if use_head is None:
            use_head = self.training or self.head_at_test
        if use_head and self.head is not None:
            z = self.head(z)
        return z

    def tokenize(self, texts: list[str], max_length: int) -> dict[str, Tensor]:
        cap = min(max_length, int(getattr(self.backbone.config, "max_position_embeddings", max_length)),
                  int(min(getattr(self.tokenizer, "model_max_length", max_length), 10**6)))
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=cap, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def views(self, input_ids: Tensor, attention_mask: Tensor, n_views: int) -> Tensor:
        """SimCSE's dropout views: each sentence ``n_views`` times in ONE forward pass (train mode:
        a different dropout mask per copy). (B, L) -> (V, B, d)."""
        b = input_ids.shape[0]
        z = self(input_ids.repeat(n_views, 1), attention_mask.repeat(n_views, 1))  # (V*B, d)
        return z.view(n_views, b, -1)


def build_encoder(backbone: str, pooling: str = "auto", mlp_head: bool = True, head_at_test: bool = False,
                  dropout: float | None = None) -> SentenceEncoder:
    """``pooling="auto"``: the pooling of a sentence-transformers backbone (mean for the packaged
    all-MiniLM-L6-v2), else ``cls`` (SimCSE)."""
    model, tok = load_backbone(backbone, dropout)
    if pooling == "auto":
        pooling = st_pooling_mode(resolve_backbone(backbone)) or "cls"
    return SentenceEncoder(model, tok, pooling=pooling, mlp_head=mlp_head, head_at_test=head_at_test)

