"""Projection head (SimCLR): Linear -> BN -> ReLU -> Linear to ``out_dim`` (128 by default).

Shapes: (N, in_dim) -> (N, out_dim).
"""
from __future__ import annotations

from torch import Tensor, nn


class ProjectionHead(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int = 0, out_dim: int = 128) -> None:
        super().__init__()
        hidden = hidden_dim or min(in_dim, 2048)
        self.net = nn.Sequential(nn.Linear(in_dim, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                                 nn.Linear(hidden, out_dim))
        self.out_dim = out_dim

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h)
