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
    sim: Tensor  # (A, C) scaled similarities; -inf where neither positive nor negative
    pos: Tensor  # (A,) column of each anchor's positive
    n_local: int  # N: anchors are rows [0, N) (z_a) and, if symmetric, [N, 2N) (z_b)
    n_masked: int  # entries per row set to the mask value (self and/or positive)
    cand: Tensor | None  # negatives="all": the (2M, d) candidates [z_a of all ranks; z_b of all ranks], else None


def pair_similarities(
    z_a: Tensor,
    z_b: Tensor,
    *,
    negatives: str = "all",
    symmetric: bool = True,
    queue: Tensor | None = None,
    exclude_positive: bool = False,
    scale: float | Tensor = 1.0,
    mask_value: float = NEG_INF,
) -> PairSims:
    """``scale`` x cosine similarities of anchors to candidates for normalised ``z_a, z_b`` (N, d).

    Returns ``PairSims(sim (A, C), pos (A,), N)`` with A = 2N if symmetric else N. ``scale`` (1/tau)
    is applied to the (A, d) anchors before the product, not to the (A, C) result.
    ``exclude_positive=True`` also sets the positive's entry to ``-inf`` (negatives only);
    ``pos`` still names its column. ``mask_value`` replaces ``-inf`` where a finite stand-in is
    needed (weights x logits products); it must be low enough that exp underflows to 0.
    """
    n = z_a.shape[0]
    dev = z_a.device
    off = sd.rank() * n
    ar = torch.arange(n, device=dev)
    anchors = torch.cat([z_a, z_b]) if symmetric else z_a  # (A, d)
    scaled = anchors * scale
    excluded: list[Tensor] = []  # columns set to -inf, one (A,) index tensor each
    cand = None
    if negatives == "all":
        cand = torch.cat([sd.gather(z_a), sd.gather(z_b)])  # (2M, d)
        m = cand.shape[0] // 2
        sim = scaled @ cand.T  # (A, 2M)
        self_col, pos = off + ar, m + off + ar
        if symmetric:
            self_col, pos = torch.cat([self_col, pos]), torch.cat([pos, self_col])
        excluded.append(self_col)
    elif negatives == "cross":
        sim = scaled[:n] @ sd.gather(z_b).T  # (N, M)
        pos = off + ar
        if symmetric:
            sim = torch.cat([sim, scaled[n:] @ sd.gather(z_a).T])  # (2N, M)
            pos = torch.cat([pos, pos])
    elif negatives == "none":
        if queue is None:
            raise ValueError('negatives="none" needs a queue of negatives (queue=(Q, d))')
        p = (z_a * z_b).sum(-1, keepdim=True)  # (N, 1)
        sim = (torch.cat([p, p]) if symmetric else p) * scale
        pos = torch.zeros(sim.shape[0], dtype=torch.long, device=dev)
    else:
        raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
    if exclude_positive:
        excluded.append(pos)
    if excluded:
        rows = torch.arange(sim.shape[0], device=dev)
        # in place on the product's output (not saved by its backward): no extra (A, C) buffer
        sim.index_put_((rows.repeat(len(excluded)), torch.cat(excluded)), torch.tensor(mask_value, dtype=sim.dtype, device=dev))
    if queue is not None:
        sim = torch.cat([sim, scaled @ normalize(queue).T], dim=1)  # (A, C + Q)
    return PairSims(sim, pos, n, len(excluded), cand)


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
