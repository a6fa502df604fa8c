"""Decoupled contrastive loss (Yeh et al. 2022, DCL Eq. 6): InfoNCE with the positive removed
from the denominator,

    l_i = -s_i,p(i) / tau + log sum_{k in N(i)} exp(s_ik / tau).

This is what GraphCL's released code optimises (MACL paper, App. B.5): ``DCL(temperature=0.2,
negatives="cross", symmetric=False)`` is the ``graphcl`` preset of the graph front-end.
Inputs are L2-normalised inside.

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional (pair weights, see infonce) -> ().
Example: >>> DCL(temperature=0.2, negatives="cross", symmetric=False)(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

from torch import Tensor

from suite.losses.pair import PairLoss
from suite.losses.registry import register_loss


@register_loss("dcl")
class DCL(PairLoss):
    fused_tiles = "yes"
    def __init__(self, temperature: float = 0.1, negatives: str = "all", symmetric: bool = True) -> None:
        super().__init__()
        self._arrangement(negatives, symmetric, temperature)

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        (z_a, z_b, queue, weights), ps = self.arrange(z_a, z_b, queue, weights, 1.0 / self.temperature)
        pos = self.per_anchor((z_a * z_b).sum(-1) / self.temperature)  # (A,)
        lse = self.negatives_lse(ps, uniform=weights is None)  # (A,) over the negatives
        return self.mean(lse - pos, weights)
