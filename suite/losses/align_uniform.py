"""Alignment and uniformity on the hypersphere (Wang & Isola 2020, Eq. 4-5; AU-CL).

    L_align   = mean_i ||f(x_i) - f(x_i')||_2^alpha
    L_uniform = log mean_{i<j} exp(-t ||f(x_i) - f(x_j)||^2)        (per view, averaged)
    loss      = align_weight * L_align + uniform_weight * (L_uniform(z_a) + L_uniform(z_b)) / 2

Defaults alpha = 2, t = 2, weights 1 (the paper's CIFAR setting). Inputs are L2-normalised inside.
A ``queue`` (Q, d) adds the (embedding, queue entry) pairs to each view's uniformity term.

Shapes: z_a, z_b (N, d); queue (Q, d) optional -> ().
Example: >>> AlignUniform()(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import check_finite, check_pair, check_positive, check_queue
from suite.losses.core import normalize, normalize_pair, sq_dists_normalized
from suite.losses.registry import register_loss
from suite.losses.tiling import pair_kernel_lse


def uniformity(x: Tensor, t: float = 2.0, extra: Tensor | None = None, chunk: int | None = None) -> Tensor:
    """log mean over pairs i<j of exp(-t ||x_i - x_j||^2) for unit rows x (M, d) (+ pairs with ``extra``).
    ``chunk``: rows per tile (see suite.losses.tiling), None for one tile."""
    m = x.shape[0]
    count = m * (m - 1) / 2 + (0 if extra is None else m * extra.shape[0])
    # the (M, M) matrix is symmetric: pairs i<j are half the off-diagonal; pairs with extra counted once (+ log 2)
    if chunk is not None:
        return (pair_kernel_lse(x, ("linear", t), extra, chunk)
                - math.log(2.0 * count))
    d = -t * sq_dists_normalized(x, x)  # (M, M)
    k = torch.arange(m, device=x.device)
    d = d.index_put((k, k), torch.full((), float("-inf"), dtype=d.dtype, device=d.device))
    if extra is not None:
        d = torch.cat([d, -t * sq_dists_normalized(x, extra) + math.log(2.0)], dim=1)
    return torch.logsumexp(d.flatten(), dim=0) - math.log(2.0 * count)


def alignment(z_a: Tensor, z_b: Tensor, alpha: float = 2.0) -> Tensor:
    return (z_a - z_b).norm(dim=1).pow(alpha).mean()


@register_loss("align_uniform", "au", "aucl")
class AlignUniform(ContrastiveLoss):
    fused_tiles = "yes"
    def __init__(self, alpha: float = 2.0, t: float = 2.0, align_weight: float = 1.0, uniform_weight: float = 1.0) -> None:
        super().__init__()
        self.alpha = check_positive(alpha, "alpha")
        self.t = check_positive(t, "t")
        self.align_weight = check_finite(align_weight, "align_weight")
        self.uniform_weight = check_finite(uniform_weight, "uniform_weight")

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype, z_a.device)
        z_a, z_b = normalize_pair(z_a, z_b)
        q = normalize(queue, "queue") if queue is not None else None
        align = alignment(z_a, z_b, self.alpha)
        ga, gb = sd.gather(z_a), sd.gather(z_b)
        chunk = self._tile(ga.shape[0], ga.shape[0] + (0 if q is None else q.shape[0]))
        unif = (uniformity(ga, self.t, q, chunk) + uniformity(gb, self.t, q, chunk)) / 2
        self._record(alignment=align, uniformity=unif)
        return self.align_weight * align + self.uniform_weight * unif
