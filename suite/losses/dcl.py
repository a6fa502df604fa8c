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

import torch
from torch import Tensor

from suite.losses.base import (ContrastiveLoss, check_choice, check_pair, check_positive, check_queue, check_weights,
                               register_loss, weighted_rows)
from suite.losses.core import NEGATIVES, normalize, pair_lse, pair_rows, pair_setup


@register_loss("dcl")
class DCL(ContrastiveLoss):
    def __init__(self, temperature: float = 0.1, negatives: str = "all", symmetric: bool = True) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.negatives = check_choice(negatives, "negatives", NEGATIVES)
        self.symmetric = bool(symmetric)

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        weights = check_weights(weights, z_a.shape[0])
        queue = check_queue(queue, z_a.shape[1], z_a.dtype)
        z_a, z_b = normalize(z_a), normalize(z_b)
        ps = pair_setup(z_a, z_b, negatives=self.negatives, symmetric=self.symmetric, queue=queue,
                        scale=1.0 / self.temperature)
        pos = (z_a * z_b).sum(-1) / self.temperature  # (N,)
        pos = torch.cat([pos, pos]) if self.symmetric else pos  # (A,)

        chunk = self._tile(ps.n_rows, ps.n_cols)
        lse = (torch.logsumexp(pair_rows(ps, 0, ps.n_rows, exclude_positive=True), dim=1) if chunk is None
               else pair_lse(ps, chunk, exclude_positive=True, uniform=weights is None))
        return weighted_rows(lse - pos, weights, 0) / ps.n_rows
