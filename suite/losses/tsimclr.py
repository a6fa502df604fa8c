"""t-SimCLR (Hu et al. 2023, "Your contrastive learning is secretly doing stochastic neighbor
embedding", Eq. 4.1) and its weighted-positive-pair form (Sec. 4.1).

Features stay in Euclidean space (NOT normalised). Student-t kernel with t_df degrees of freedom

    q(a, b) = (1 + ||a - b||^2 / (tau * t_df)) ^ (-(t_df + 1) / 2)
    l_i     = -log q(x_i, x_i') + log sum_{1 <= j != k <= 2N} q(x~_j, x~_k)

(one normaliser over all ordered pairs of the 2N embeddings, as in SNE); loss = mean of l_i over the
2N anchors. ``weights`` (N,) gives the weighted variant (1/2N) sum_i p_ii' (l(x_i,x_i') + l(x_i',x_i)),
p normalised to mean 1 so uniform weights give the unweighted loss; t-SimCLR's IoU scheme is
``iou_weights(iou, tau_prime)``. A ``queue`` (Q, d) adds the pairs (embedding, queue entry) in both
orders to the normaliser. Defaults tau = 5, t_df = 5 (paper's recommendation).

The normaliser is computed in log space (log-sum-exp of log q), so float32 matches float64 for any
tau, t_df and feature scale. Features whose squared distances could overflow float32 (any entry above 2^40, e.g.
embeddings around 1e20, whose squares are inf in float32) are computed in float64, which holds the squares of
every float32 (the loss is returned in the input's dtype); float64 features above 2^500 are refused by name.
``temperature * t_df`` (the kernel's scale) must itself be a normal float32, like each of them.

Shapes: z_a, z_b (N, d); weights (N,) optional; queue (Q, d) optional -> ().
Example: >>> TSimCLR()(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import _fails, check_pair, check_positive, check_queue, check_weights, weighted_mean
from suite.losses.registry import register_loss
from suite.losses.tiling import pair_kernel_lse
from suite.losses.core import cat_rows


def iou_weights(iou: Tensor, tau_prime: float = 1.0) -> Tensor:
    """t-SimCLR Sec. 4.1: p_ii' proportional to exp(IoU / tau'), scaled to mean 1. (N,) -> (N,)."""
    return torch.softmax(iou.double() / tau_prime, dim=0).to(iou.dtype) * iou.shape[0]


_BIG32 = 2.0 ** 40  # above this, float32 squared distances (summed over d) near overflow
_BIG64 = 2.0 ** 500  # the same for float64


def _needs_float64(*xs: Tensor | None) -> bool:
    """Whether the inputs' largest entry (on any rank: every rank must take the same path) is too large for their
    squared distances in float32; float64 inputs too large for float64 are refused."""
    ts = [x for x in xs if x is not None and x.numel() and x.device.type != "meta"]
    if not ts:
        return False
    peak = torch.stack([x.detach().abs().max().double() for x in ts]).max()
    peak = sd.all_reduce_mean(peak) if sd.is_distributed() else peak  # one decision (any large rank lifts the mean)
    if torch.compiler.is_compiling():  # the path is chosen by a host read, which a compiled graph does not make: the
        # float32 path, with a check (deferred: read at the engine's sync) that refuses what it cannot square
        f64 = ts[0].dtype == torch.float64
        _fails(peak > (_BIG64 if f64 else _BIG32),
               f"tsimclr: embeddings of magnitude above 2^{500 if f64 else 40} are beyond what "
               f"{'float64' if f64 else 'float32'} can square under torch.compile (uncompiled, float32 inputs take a "
               f"float64 path); rescale them or call the loss uncompiled")
        return False
    if ts[0].dtype == torch.float64:
        if float(peak) > _BIG64:
            raise ValueError(f"tsimclr: embeddings of magnitude {float(peak):.3g} are beyond what float64 can square "
                             f"(above 2^500); rescale them")
        return False
    return float(peak) > _BIG32


@register_loss("tsimclr", "t_simclr")
class TSimCLR(ContrastiveLoss):
    fused_tiles = "yes"
    hypersphere = False

    def __init__(self, temperature: float = 5.0, t_df: float = 5.0) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.t_df = check_positive(t_df, "t_df")
        check_positive(self.temperature * self.t_df, "temperature * t_df")  # the kernel's scale: 1e-30 * 1e-30 underflows

    def _log_q(self, d2: Tensor) -> Tensor:
        return -(self.t_df + 1.0) / 2.0 * torch.log1p(d2 / (self.temperature * self.t_df))

    def forward(self, z_a: Tensor, z_b: Tensor, weights: Tensor | None = None, queue: Tensor | None = None) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        n = z_a.shape[0]
        weights = check_weights(weights, n, z_a.device)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype, z_a.device)
        out_dtype = z_a.dtype
        if _needs_float64(z_a, z_b, queue):  # squared distances beyond float32 (1e20 -> 1e40): exact in float64
            z_a, z_b = z_a.double(), z_b.double()
            queue = queue.double() if queue is not None else None
        pos = self._log_q(((z_a - z_b) ** 2).sum(-1))  # (N,) log q(x_i, x_i')
        e = cat_rows(sd.gather(z_a), sd.gather(z_b))  # (2M, d) all embeddings of all ranks
        # the normaliser in log space: log Z = log sum_{j != k} q(e_j, e_k) (+ the (embedding, queue) pairs in both
        # orders), each q taken against the largest (summing q itself underflows in float32 for spread-out features:
        # loss -inf at tau = 1, t_df = 100). Dense is the same function in one tile: the gradient formed in the
        # forward (a scalar output), fewer passes over the (2M, 2M) matrix than autograd's graph
        n_cols = e.shape[0] + (0 if queue is None else queue.shape[0])
        kind = ("cauchy", (self.t_df + 1.0) / 2.0, self.temperature * self.t_df)
        log_z = pair_kernel_lse(e, kind, queue, self._tile(e.shape[0], n_cols))
        per_pair = log_z - pos  # (N,) l(x_i, x_i') = l(x_i', x_i)
        self._record(log_normaliser=log_z, log_normaliser_per_pair=log_z - math.log(e.shape[0] * (e.shape[0] - 1)))
        return weighted_mean(per_pair, weights).to(out_dtype)  # mean over the 2N anchors (both orders: same term)
