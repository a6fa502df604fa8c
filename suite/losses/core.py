"""The one shared computation of the InfoNCE family: anchors, candidates and the positive.

:func:`pair_similarities` builds, for a two-view batch, the cosine similarities of every anchor
to every candidate with entries that are neither the positive nor a negative set to ``-inf``;
each loss only turns that matrix into its own objective (log-sum-exp throughout).

Negatives sources (``negatives=``):

- ``"all"``: the 2N-embedding SimCLR formulation; anchor ``z_a[i]`` has positive ``z_b[i]`` and
  negatives the other 2N-2 embeddings (both views);
- ``"cross"``: negatives of ``z_a[i]`` are ``z_b[j]``, j != i (GraphCL's released objective);
- ``"none"``: no in-batch negatives; only the ``queue`` (MoCo v2).

With ``symmetric=False`` only the ``z_a`` rows are anchors. A ``queue`` ``(Q, d)`` adds Q columns of
extra negatives to every anchor (no gradient). Under ``torch.distributed`` the candidates are the
embeddings of all ranks (see :mod:`suite.distributed`); anchors stay local.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from suite import distributed as sd

NEGATIVES = ("all", "cross", "none")
NEG_INF = float("-inf")


def normalize(x: Tensor) -> Tensor:
    return F.normalize(x, dim=-1)


class PairSims(NamedTuple):
    sim: Tensor  # (A, C) similarities; -inf where neither positive nor negative
    pos: Tensor  # (A,) column of each anchor's positive
    n_local: int  # N: anchors are rows [0, N) (z_a) and, if symmetric, [N, 2N) (z_b)


def _mask_cols(sim: Tensor, cols: Tensor) -> Tensor:
    """Set sim[r, cols[r]] = -inf (out of place)."""
    mask = torch.zeros_like(sim, dtype=torch.bool).scatter_(1, cols[:, None], True)
    return sim.masked_fill(mask, NEG_INF)


def pair_similarities(
    z_a: Tensor,
    z_b: Tensor,
    *,
    negatives: str = "all",
    symmetric: bool = True,
    queue: Tensor | None = None,
    exclude_positive: bool = False,
) -> PairSims:
    """Cosine similarities of anchors to candidates for normalised ``z_a, z_b`` of shape (N, d).

    Returns ``PairSims(sim (A, C), pos (A,), N)`` with A = 2N if symmetric else N.
    ``exclude_positive=True`` also sets the positive's entry to ``-inf`` (negatives only);
    ``pos`` still names its column.
    """
    n = z_a.shape[0]
    dev = z_a.device
    off = sd.rank() * n
    ar = torch.arange(n, device=dev)
    anchors = torch.cat([z_a, z_b]) if symmetric else z_a  # (A, d)
    if negatives == "all":
        ga, gb = sd.gather(z_a), sd.gather(z_b)  # (M, d) each
        m = ga.shape[0]
        cand = torch.cat([ga, gb])  # (2M, d)
        sim = anchors @ cand.T  # (A, 2M)
        self_col = off + ar
        pos = m + off + ar
        if symmetric:
            self_col = torch.cat([self_col, m + off + ar])
            pos = torch.cat([pos, off + ar])
        sim = _mask_cols(sim, self_col)
    elif negatives == "cross":
        gb = sd.gather(z_b)
        sim = z_a @ gb.T  # (N, M)
        pos = off + ar
        if symmetric:
            ga = sd.gather(z_a)
            sim = torch.cat([sim, z_b @ ga.T])  # (2N, M)
            pos = torch.cat([pos, pos])
    elif negatives == "none":
        if queue is None:
            raise ValueError('negatives="none" needs a queue of negatives (queue=(Q, d))')
        p = (z_a * z_b).sum(-1, keepdim=True)  # (N, 1)
        sim = torch.cat([p, p]) if symmetric else p
        pos = torch.zeros(sim.shape[0], dtype=torch.long, device=dev)
    else:
        raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
    if exclude_positive:
        sim = _mask_cols(sim, pos)
    if queue is not None:
        sim = torch.cat([sim, anchors @ normalize(queue).T], dim=1)  # (A, C + Q)
    return PairSims(sim, pos, n)


def positive_sims(z_a: Tensor, z_b: Tensor) -> Tensor:
    """(N,) cosine similarity of each positive pair (inputs already normalised)."""
    return (z_a * z_b).sum(-1)


def gather_views(views: Tensor) -> Tensor:
    """(V, N, d) local views -> (V, W*N, d) views of all ranks (gradient kept, see suite.distributed)."""
    if not sd.is_distributed():
        return views
    v, n, d = views.shape
    g = sd.gather(views.transpose(0, 1).reshape(n, v * d))  # (W*N, V*d)
    return g.reshape(-1, v, d).transpose(0, 1)


def sq_dists_normalized(a: Tensor, b: Tensor) -> Tensor:
    """Squared Euclidean distances of unit vectors from their inner products: 2 - 2 a.b, clamped >= 0."""
    return (2.0 - 2.0 * (a @ b.transpose(-1, -2))).clamp_min(0.0)
