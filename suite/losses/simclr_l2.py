"""SimCLR with the negative Euclidean distance as similarity (t-SimCLR paper, Hu et al. 2023, Sec. 3.1.4 and
Figure 1 c, e): InfoNCE on features that are NOT normalised, with s(a, b) = -||a - b||_2,

    l_i = -s(z_i, z_p(i)) / tau + log sum_{k in {p(i)} u N(i)} exp(s(z_i, z_k) / tau).

Anchors, positives and negatives as in :mod:`suite.losses.infonce` (``negatives="all"``: the 2N-embedding
SimCLR formulation; ``"cross"``; ``"none"``: the queue only; ``symmetric``); a ``queue`` (Q, d) adds raw
(un-normalised) extra negatives without gradient; ``weights`` (N,) weight the pairs as in InfoNCE. The
distance is sqrt(max(||a - b||^2, 1e-24)), so coincident points (a positive pair at distance 0) give a zero
gradient instead of NaN. The paper gives no temperature for this experiment; tau scales the features only.

float32: distances come from one matrix product (||a||^2 - 2 a.b + ||b||^2), which cancels badly for points
far from the origin, so the features are first centred on the batch mean (all ranks'; distances are
translation invariant) and each anchor's positive column takes the distance computed from the difference.
Features with an entry above 2^40 (e.g. around 1e20, whose squares overflow float32) are divided by the power of
two of their largest entry and tau with them: s(a, b) / tau = s(a / 2^k, b / 2^k) / (tau / 2^k) exactly, so the
loss stays finite and matches float64 (a stable formula, not a clamp).

Tiled path (``chunk_size``): :func:`suite.losses.tiling.row_kernel_lse`, row tiles of the (A, C) matrix
recomputed in a fused backward, so memory is O(tile x C); values and gradients equal the dense path.

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional -> ().
Example: >>> SimCLRL2(temperature=1.0)(torch.randn(8, 2), torch.randn(8, 2))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.core import NEG_INF, PairSetup, row_logsumexp
from suite.losses.pair import PairLoss
from suite.losses.registry import register_loss
from suite.losses.tiling import row_kernel_lse, sq_distances

_EPS2 = 1e-24  # squared-distance floor: sqrt has no gradient at 0
_BIG = 40  # features with an entry above 2^40 are rescaled (their squared distances near float32's overflow)


def _large_scale(*xs: Tensor | None) -> Tensor | None:
    """None (no features), or the 0-d float64 power of two 2^-k to multiply the features by: k the exponent of their
    largest entry (on any rank: one k for all) where it exceeds 2^40, else k = 0 (the scale 1). On the device: no host
    read, and ``torch.compile`` traces it (the exponent was read back to choose the path, issue 78)."""
    ts = [x for x in xs if x is not None and x.numel() and x.device.type != "meta"]
    if not ts:
        return None
    peak = torch.stack([x.detach().abs().max().double() for x in ts]).max()
    k = torch.frexp(peak)[1].double()
    if sd.is_distributed():
        k = sd.all_reduce_mean(k).round()
    return torch.exp2(-torch.where(k > _BIG, k, torch.zeros_like(k)))  # exact: a power of two


def neg_distances(a: Tensor, b: Tensor) -> Tensor:
    """-||a_i - b_j||_2 (r, C) through one matrix product."""
    return -sq_distances(a, b).clamp_min(_EPS2).sqrt()


@register_loss("simclr_l2", "l2_simclr")
class SimCLRL2(PairLoss):
    fused_tiles = "yes"
    hypersphere = False

    def __init__(self, temperature: float = 1.0, negatives: str = "all", symmetric: bool = True) -> None:
        super().__init__()
        self._arrangement(negatives, symmetric, temperature)

    def _rows(self, ps: PairSetup, queue: Tensor | None, pos: Tensor, start: int, stop: int,
              t: float | Tensor | None = None) -> Tensor:
        """Rows [start, stop) of s / t (t: the temperature at the features' scale, default tau): the candidates
        (own column -inf), then the queue."""
        t = self.temperature if t is None else t
        a = ps.anchors[start:stop]
        if ps.negatives == "none":
            sim = pos[start:stop, None]
        elif len(ps.cands) == 1:
            sim = neg_distances(a, ps.cands[0]) / t
        else:  # "cross", symmetric: rows [0, N) against z_b, rows [N, 2N) against z_a
            n = ps.n_local
            parts = []
            if start < n:
                parts.append(neg_distances(a[: max(0, min(stop, n) - start)], ps.cands[0]))
            if stop > n:
                parts.append(neg_distances(a[max(0, n - start):], ps.cands[1]))
            sim = (torch.cat(parts) if len(parts) > 1 else parts[0]) / t
        rows = torch.arange(stop - start, device=a.device)
        if ps.negatives != "none":  # the positive from the difference (exact), not from the product
            sim = sim.index_put((rows, ps.pos[start:stop]), pos[start:stop])
        if ps.self_col is not None:
            sim = sim.index_put((rows, ps.self_col[start:stop]), torch.full((), NEG_INF, dtype=sim.dtype, device=sim.device))
        if queue is not None:
            sim = torch.cat([sim, neg_distances(a, queue) / t], dim=1)
        return sim

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        z_a, z_b, queue, weights = self.pair_inputs(z_a, z_b, queue, weights)  # not normalised (hypersphere False)
        if self.negatives == "none" and queue is None:
            raise ValueError('negatives="none" needs a queue of negatives (queue=(Q, d))')
        t: float | Tensor = self.temperature
        inv = _large_scale(z_a, z_b, queue)
        if inv is not None:  # features beyond float32's squares: divided (and tau with them) by 2^k, exact; s / tau is
            # unchanged (k = 0, the scale 1, below 2^40: the same values)
            z_a, z_b = z_a * inv.to(z_a.dtype), z_b * inv.to(z_b.dtype)  # a power of two: exact
            queue = queue * inv.to(queue.dtype) if queue is not None else None
            t = (self.temperature * inv).to(z_a.dtype)  # (): the temperature at the features' scale
        mu = torch.cat([z_a, z_b]).mean(0).detach()  # (d,) the centre: float32 products cancel less
        if sd.is_distributed():
            import torch.distributed as dist

            dist.all_reduce(mu)
            mu = mu / sd.world_size()
        z_a, z_b = z_a - mu, z_b - mu
        q = queue.detach() - mu if queue is not None else None
        ps = self.setup(z_a, z_b, q, 1.0)  # ps.queue unused
        p = -((z_a - z_b) ** 2).sum(-1).clamp_min(_EPS2).sqrt() / t  # (N,) s(z_i, z_p(i)) / tau
        pos = self.per_anchor(p)  # (A,)
        n_cols = (1 if self.negatives == "none" else ps.cands[0].shape[0]) + (0 if q is None else q.shape[0])
        chunk = self._tile(ps.n_rows, n_cols)
        if chunk is None:
            lse = row_logsumexp(self._rows(ps, q, pos, 0, ps.n_rows, t))
        else:  # row tiles recomputed in the backward: no (A, C) tensor is kept (their kernel takes tau as a number:
            # one host read a call, beside the tiles' work)
            lse = self._tiled_lse(ps, q, pos, float(t), chunk, uniform=weights is None)
        return self.mean(lse - pos, weights)

    @staticmethod
    def _tiled_lse(ps: PairSetup, q: Tensor | None, pos: Tensor, t: float, chunk: int, uniform: bool) -> Tensor:
        """The rows' log-sum-exps as :meth:`_rows` builds them, by :func:`~suite.losses.tiling.row_kernel_lse`:
        every column but the positive (and the self column) from the distance kernel, the positive's exact
        value as each row's extra logit. ``uniform``: the rows are averaged with equal weights (no ``weights``)."""
        kind = ("negdist", 1.0 / t)  # -sqrt(max(u, eps)) / t, as neg_distances
        if ps.negatives == "none":
            return row_kernel_lse(ps.anchors, q, None, None, kind, chunk, extra=pos, uniform=uniform)
        excl = torch.stack([c for c in (ps.self_col, ps.pos) if c is not None])  # (k, A) columns left out
        if len(ps.cands) == 1:
            return row_kernel_lse(ps.anchors, ps.cands[0], q, excl, kind, chunk, ps.self_scale, extra=pos,
                                  uniform=uniform)
        n = ps.n_local  # "cross", symmetric: rows [0, N) against z_b, rows [N, 2N) against z_a
        rows = [slice(h * n, (h + 1) * n) for h in range(len(ps.cands))]
        return torch.cat([row_kernel_lse(ps.anchors[r], c, q, excl[:, r], kind, chunk, extra=pos[r], uniform=uniform)
                          for r, c in zip(rows, ps.cands)])
