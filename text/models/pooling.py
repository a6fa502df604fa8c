"""Sentence poolers over token states and SimCSE's MLP head.

Shapes: hidden (B, L, d), attention_mask (B, L) -> (B, d).
Example: >>> pool(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.long), "mean").shape  # (2, 8)
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

POOLINGS = ("cls", "mean", "max")


def pool(hidden: Tensor, attention_mask: Tensor, mode: str) -> Tensor:
    """``cls``: first token (SimCSE's ``cls_before_pooler`` when used without the head);
    ``mean``: average over non-padding tokens; ``max``: max over non-padding tokens."""
    if mode == "cls":
        return hidden[:, 0]
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, L, 1)
    if mode == "mean":
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)
    if mode == "max":
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).max(1).values
    raise ValueError(f"pooling must be one of {POOLINGS}, got {mode!r}")


class MLPHead(nn.Module):
    """SimCSE's ``MLPLayer``: Linear(d, d) + tanh over the pooled representation. (B, d) -> (B, d)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.activation = nn.Tanh()

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.dense(x))
