"""Barlow Twins, Eq. (1)-(2) of Zbontar et al. 2021 ("Barlow Twins: Self-Supervised Learning via Redundancy
Reduction", ICML): make the cross-correlation matrix of the two views' embeddings, taken along the batch, close to
the identity.

    L = sum_i (1 - C_ii)^2 + lambda * sum_i sum_{j != i} C_ij^2,
    C_ij = sum_b za_bi zb_bj / (sqrt(sum_b za_bi^2) sqrt(sum_b zb_bj^2)),

with za, zb the embeddings centred along the batch (Sec. 2: "normalized along the batch dimension"), so that C is
the (N-divisor) correlation matrix and its entries lie in [-1, 1]; lambda = 5e-3 (Sec. 4). The paper's
Algorithm 1 divides by the unbiased (N - 1) std and then by N, which scales C by (N - 1) / N:
``variant="algorithm1"``. No negatives, no temperature; not on the hypersphere (invariant to each dimension's
scale instead).

Shapes: z_a, z_b (N, d) -> ().
Example: >>> BarlowTwins()(torch.randn(32, 16), torch.randn(32, 16))
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["BarlowTwins"]


class BarlowTwins(nn.Module):
    """Barlow Twins' redundancy-reduction loss (Zbontar et al. 2021, Eq. 1-2)."""

    # what the loss takes, declared as the suite's own losses do (suite.losses.ContrastiveLoss)
    multi_view = False
    requires: tuple[str, ...] = ()
    has_negatives = False
    hypersphere = False

    def __init__(self, lambd: float = 5e-3, variant: str = "paper", eps: float = 1e-12) -> None:
        super().__init__()
        if not (isinstance(lambd, (int, float)) and math.isfinite(lambd) and lambd >= 0):
            raise ValueError(f"lambd must be a finite number >= 0, got {lambd!r}")
        if variant not in ("paper", "algorithm1"):
            raise ValueError(f"variant must be 'paper' (Eq. 2) or 'algorithm1' (the pseudocode's scaling), got {variant!r}")
        if not (isinstance(eps, (int, float)) and eps > 0):
            raise ValueError(f"eps must be > 0, got {eps!r}")
        self.lambd, self.variant, self.eps = float(lambd), variant, float(eps)

    def forward(self, z_a: Tensor, z_b: Tensor) -> Tensor:
        if z_a.dim() != 2 or z_a.shape != z_b.shape or z_a.shape[0] < 2:
            raise ValueError(f"z_a and z_b must both be (N, d) with N >= 2; got {tuple(z_a.shape)} and {tuple(z_b.shape)}")
        dt = torch.promote_types(torch.promote_types(z_a.dtype, z_b.dtype), torch.float32)
        a = z_a.to(dt) - z_a.to(dt).mean(0)  # (N, d), centred along the batch
        b = z_b.to(dt) - z_b.to(dt).mean(0)
        a = a / (a.pow(2).sum(0) + self.eps).sqrt()  # unit norm along the batch, per dimension
        b = b / (b.pow(2).sum(0) + self.eps).sqrt()
        c = a.T @ b  # (d, d): C_ij of Eq. 2
        if self.variant == "algorithm1":
            n = z_a.shape[0]
            c = c * (n - 1) / n
        on = (1 - c.diagonal()).pow(2).sum()
        off = c.pow(2).sum() - c.diagonal().pow(2).sum()
        return on + self.lambd * off
