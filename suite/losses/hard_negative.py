"""Hard-negative contrastive loss (Robinson et al. 2021, HCL Eq. 4 and its estimator, Sec. 4).

Negatives are importance-weighted by q_beta(x^-) proportional to exp(beta * s(x, x^-) / tau):
with M negatives,

    Ng_i = M * sum_j exp((1 + beta) s_ij / tau) / sum_j exp(beta s_ij / tau)
    l_i  = -log( exp(s_i+/tau) / (exp(s_i+/tau) + Ng_i) )

Debiasing (Chuang et al. 2020) with class prior ``tau_plus`` > 0 replaces Ng_i by
max((Ng_i - tau_plus M exp(s_i+/tau)) / (1 - tau_plus), M exp(-1/tau)); off by default
(tau_plus = 0). beta = 0 and tau_plus = 0 give InfoNCE. Defaults tau = 0.5, beta = 1 (the paper's
CIFAR setting). All in log space. Inputs are L2-normalised inside.

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional (pair weights, see infonce) -> ().
Example: >>> HardNegative(temperature=0.5, beta=1.0)(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from suite.losses.checks import check_finite, check_positive
from suite.losses.core import pair_outer_scales, pair_rows, row_logsumexp
from suite.losses.pair import PairLoss
from suite.losses.registry import register_loss


@register_loss("hard_negative", "hcl", "hn_cl")
class HardNegative(PairLoss):
    fused_tiles = "yes"
    def __init__(
        self, temperature: float = 0.5, beta: float = 1.0, tau_plus: float = 0.0, negatives: str = "all", symmetric: bool = True
    ) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.beta = check_finite(beta, "beta", 0.0)
        self.tau_plus = check_finite(tau_plus, "tau_plus", 0.0)
        if not self.tau_plus < 1.0:
            raise ValueError(f"tau_plus must be in [0, 1), got {tau_plus}")
        self._arrangement(negatives, symmetric)

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        z_a, z_b, queue, weights = self.pair_inputs(z_a, z_b, queue, weights)
        t = self.temperature
        ps = self.setup(z_a, z_b, queue, 1.0 / t)
        pos = self.per_anchor((z_a * z_b).sum(-1)) / t  # (A,)
        n_masked = int(ps.self_col is not None) + 1
        m_count = ps.n_cols - n_masked  # negatives per anchor
        if m_count < 1:
            raise ValueError("hard_negative needs at least one negative per anchor")
        log_m = math.log(m_count)

        chunk = self._tile(ps.n_rows, ps.n_cols)
        # log Ng = log M + logsumexp((1+beta) s/t) - logsumexp(beta s/t) over the negatives; beta = 0: the last term
        # is log M. Both from one (A, C) matrix (dense) or one pass of tiles: their gradients meet in it
        scales = (self.beta, 1.0 + self.beta) if self.beta > 0 else (1.0,)

        def rows(lses: list[Tensor], pos: Tensor) -> Tensor:  # row-wise: the tiles evaluate it tile by tile
            log_ng = log_m + lses[-1] - (lses[0] if self.beta > 0 else log_m)
            if self.tau_plus > 0:
                log_sub = math.log(self.tau_plus) + log_m + pos
                # log(Ng - tau+ M e^pos), -inf where the difference is not positive
                diff = log_ng + torch.log1p(-torch.exp((log_sub - log_ng).clamp_max(0.0)))
                diff = torch.where(log_sub < log_ng, diff, torch.full_like(diff, float("-inf")))
                log_ng = torch.clamp_min(diff - math.log1p(-self.tau_plus), log_m - 1.0 / t)
            return torch.logaddexp(pos, log_ng) - pos

        if chunk is None:
            sims = pair_rows(ps, 0, ps.n_rows, exclude_positive=True)
            per = rows([row_logsumexp(k * sims) for k in scales], pos)
        else:  # no scaled copy of the anchors; the tiles form the gradient while they have each row's statistics
            per = pair_outer_scales(ps, chunk, scales, rows, pos, uniform=weights is None)
        return self.mean(per, weights)
