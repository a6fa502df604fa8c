"""Projection heads: SimCLR's Linear -> BN -> ReLU -> Linear, or MoCo v2's Linear -> ReLU -> Linear, to ``out_dim``.

- ``"simclr"`` (the suite's head since its first version; SimCLR, Chen et al. 2020, Sec. 2 and App. B.9):
  Linear(in, hidden, no bias) -> BatchNorm1d -> ReLU -> Linear(hidden, out);
- ``"mocov2"`` (MoCo v2, Chen et al. 2020c, Sec. 2 "MLP head"; ``moco/builder.py``: ``nn.Sequential(nn.Linear(dim_mlp,
  dim_mlp), nn.ReLU(), fc)``): Linear(in, hidden, bias) -> ReLU -> Linear(hidden, out), no BatchNorm.

The hidden width is ``hidden_dim`` or min(in_dim, 2048) (MoCo v2's ``dim_mlp`` is the backbone's width: 2048 for a
ResNet-50).

Shapes: (N, in_dim) -> (N, out_dim).
Example: >>> ProjectionHead(512, head="mocov2")(torch.randn(4, 512)).shape  # torch.Size([4, 128])
"""
from __future__ import annotations

from torch import Tensor, nn

HEADS = ("simclr", "mocov2")


class ProjectionHead(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int = 0, out_dim: int = 128, head: str = "simclr") -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"projection head must be one of {HEADS}, got {head!r}")
        hidden = hidden_dim or min(in_dim, 2048)
        if head == "simclr":
            self.net = nn.Sequential(nn.Linear(in_dim, hidden, bias=False), nn.BatchNorm1d(hidden),
                                     nn.ReLU(inplace=True), nn.Linear(hidden, out_dim))
        else:
            self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, out_dim))
        self.out_dim, self.kind = out_dim, head

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h)
