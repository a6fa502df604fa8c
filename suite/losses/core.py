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

from typing import Any, Callable, NamedTuple

import torch
from torch import Tensor

from suite import distributed as sd

NEGATIVES = ("all", "cross", "none")
NEG_INF = float("-inf")


def normalize(x: Tensor, what: str = "embeddings") -> Tensor:
    """Rows of ``x`` as unit vectors at any finite scale; a zero row is a ``ValueError`` naming ``what``
    (:func:`suite.losses.base.normalize_rows`)."""
    from suite.losses.checks import normalize_rows

    return normalize_rows(x, what)


def normalize_pair(z_a: Tensor, z_b: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`normalize` of both views in one pass (row by row the same values; fewer small ops, which bind a GPU at
    2N = 8,192); a zero row is named by its view and its row there."""
    from suite.losses.checks import normalize_rows

    n = z_a.shape[0]
    both = normalize_rows(torch.cat([z_a, z_b]), parts=(("z_a", n), ("z_b", z_b.shape[0])))
    return both[:n], both[n:]


def row_logsumexp(x: Tensor) -> Tensor:
    """``torch.logsumexp(x, -1)`` of the rows of a dense logit matrix, through log-softmax's fused kernel (one pass that
    reads the rows and writes log p) instead of logsumexp's max, broadcast subtraction, exp and sum; the backward is
    g exp(log p) from the saved log p. lse_i = m_i - max_j log p_ij with m_i the row's maximum (where log p is 0 -
    log sum exp(x - m), exactly), -inf for a row of -inf. CPU, 4,096^2, forward and backward: 191 ms -> 126 ms."""
    return _RowLSE.apply(x)


class _RowLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        log_p = torch.log_softmax(x, -1)
        m = x.amax(-1)
        ctx.save_for_backward(log_p)
        return torch.where(m == NEG_INF, m, m - log_p.amax(-1))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: Tensor) -> Tensor:  # type: ignore[override]
        (log_p,) = ctx.saved_tensors
        return log_p.exp().mul_(g.unsqueeze(-1))


def cat_rows(z_a: Tensor, z_b: Tensor) -> Tensor:
    """``torch.cat([z_a, z_b])``, without a copy where the two are the consecutive halves of one tensor (what
    :func:`normalize_pair` returns): then that tensor, and the gradient reaches it directly. At 2N = 2^20, d = 128,
    each copy is 512 MB of the loss's memory on a GPU. Under ``torch.compile`` the concatenation is traced as it is
    (whether two views are a tensor's consecutive halves is a comparison of storage offsets, which the compiler cannot
    trace: a graph break in every loss; the compiler plans the buffers of the graph itself)."""
    if torch.compiler.is_compiling():
        return torch.cat([z_a, z_b])
    base = z_a._base
    if (base is not None and z_b._base is base and base.dim() == 2 and base.is_contiguous()
            and z_a.is_contiguous() and z_b.is_contiguous() and z_a.shape[0] + z_b.shape[0] == base.shape[0]
            and z_a.storage_offset() == base.storage_offset()
            and z_b.storage_offset() == base.storage_offset() + z_a.numel()):
        return base
    return torch.cat([z_a, z_b])


class PairSims(NamedTuple):
    sim: Tensor  # (A, C) scaled similarities; -inf where neither positive nor negative
    pos: Tensor  # (A,) column of each anchor's positive
    n_local: int  # N: anchors are rows [0, N) (z_a) and, if symmetric, [N, 2N) (z_b)
    n_masked: int  # entries per row set to the mask value (self and/or positive)
    cand: Tensor | None  # negatives="all": the (2M, d) candidates [z_a of all ranks; z_b of all ranks], else None


class PairSetup(NamedTuple):
    """What the rows of the anchors x candidates matrix are computed from (no (A, C) tensor)."""

    anchors: Tensor  # (A, d), scaled by 1/tau
    cands: tuple[Tensor, ...]  # candidates (C0, d): one (all, none) or, for "cross" + symmetric, one per half
    queue: Tensor | None  # (Q, d) normalised queue
    pos: Tensor  # (A,) column of each anchor's positive
    self_col: Tensor | None  # (A,) column of each anchor's own embedding (negatives="all")
    pos_sim: Tensor | None  # (A,) scaled positive similarity (negatives="none": the only in-batch column)
    n_local: int
    negatives: str
    cand: Tensor | None  # negatives="all": the (2M, d) candidates
    # symmetric, one rank, no gradient to it: anchors = self_scale * cands[0] ("all"), self_scale * [cands[1];
    # cands[0]] ("cross": z_a, z_b)
    self_scale: float | Tensor | None = None

    @property
    def n_rows(self) -> int:
        return self.anchors.shape[0]

    @property
    def n_cols(self) -> int:
        c = 1 if self.negatives == "none" else self.cands[0].shape[0]
        return c + (0 if self.queue is None else self.queue.shape[0])


def pair_setup(z_a: Tensor, z_b: Tensor, *, negatives: str = "all", symmetric: bool = True,
               queue: Tensor | None = None, scale: float | Tensor = 1.0) -> PairSetup:
    """Anchors, candidates and the positive / self columns for normalised ``z_a, z_b`` (N, d)."""
    n = z_a.shape[0]
    dev = z_a.device
    off = sd.rank() * n
    ar = torch.arange(n, device=dev)
    rows = cat_rows(z_a, z_b) if symmetric else z_a
    anchors = rows if isinstance(scale, float) and scale == 1.0 else rows * scale  # (A, d)
    qn = normalize(queue, "queue") if queue is not None else None
    if negatives == "all":
        cand = rows if symmetric and not sd.is_distributed() else cat_rows(sd.gather(z_a), sd.gather(z_b))  # (2M, d)
        m = cand.shape[0] // 2
        if cand is rows:  # one rank: anchor i is candidate i, its positive i + N (mod 2N)
            self_col = torch.arange(2 * n, device=dev)
            pos = self_col.roll(n)
        else:
            self_col, pos = off + ar, m + off + ar
            if symmetric:
                self_col, pos = torch.cat([self_col, pos]), torch.cat([pos, self_col])
        # one rank, symmetric: the anchors are scale x the candidates (the fused kernels' symmetric path)
        mine = symmetric and cand is rows and not (isinstance(scale, Tensor) and scale.requires_grad)
        return PairSetup(anchors, (cand,), qn, pos, self_col, None, n, negatives, cand, scale if mine else None)
    if negatives == "cross":
        cands = (sd.gather(z_b), sd.gather(z_a)) if symmetric else (sd.gather(z_b),)
        pos = off + ar
        # one rank, symmetric: the anchors are scale x [z_a; z_b] (the fused kernels' pair path)
        mine = symmetric and not sd.is_distributed() and not (isinstance(scale, Tensor) and scale.requires_grad)
        return PairSetup(anchors, cands, qn, torch.cat([pos, pos]) if symmetric else pos, None, None, n, negatives,
                         None, scale if mine else None)
    if negatives == "none":
        if queue is None:
            raise ValueError('negatives="none" needs a queue of negatives (queue=(Q, d))')
        p = (z_a * z_b).sum(-1)  # (N,)
        pos_sim = (torch.cat([p, p]) if symmetric else p) * scale
        return PairSetup(anchors, (), qn, torch.zeros(anchors.shape[0], dtype=torch.long, device=dev), None,
                         pos_sim, n, negatives, None)
    raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")


def pair_rows(ps: PairSetup, start: int, stop: int, *, exclude_positive: bool = False,
              mask_value: float = NEG_INF) -> Tensor:
    """Rows [start, stop) of the scaled similarity matrix (stop - start, C [+ Q]), -inf (``mask_value``)
    at each anchor's own column and, with ``exclude_positive``, at its positive."""
    a = ps.anchors[start:stop]
    if ps.negatives == "none":
        sim = ps.pos_sim[start:stop, None]
    elif len(ps.cands) == 1:
        sim = a @ ps.cands[0].T
    else:  # "cross", symmetric: rows [0, N) against z_b, rows [N, 2N) against z_a
        n = ps.n_local
        parts = []
        if start < n:
            parts.append(a[: max(0, min(stop, n) - start)] @ ps.cands[0].T)
        if stop > n:
            parts.append(a[max(0, n - start):] @ ps.cands[1].T)
        sim = torch.cat(parts) if len(parts) > 1 else parts[0]
    excluded = []
    if ps.self_col is not None:
        excluded.append(ps.self_col[start:stop])
    if exclude_positive:
        excluded.append(ps.pos[start:stop])
    if excluded:
        rows = torch.arange(stop - start, device=a.device)
        # in place on the product's output (not saved by its backward): no extra (rows, C) buffer
        sim.index_put_((rows.repeat(len(excluded)), torch.cat(excluded)),
                       torch.full((), mask_value, dtype=sim.dtype, device=sim.device))
    if ps.queue is not None:
        sim = torch.cat([sim, a @ ps.queue.T], dim=1)  # (rows, C + Q)
    return sim


def pair_row_lse(ps: PairSetup, *, exclude_positive: bool = False) -> Tensor:
    """(A,) log-sum-exp of every row of the scaled similarity matrix (the self column and, with ``exclude_positive``,
    the positive left out): the dense form of :func:`pair_lse`, the same values as ``row_logsumexp(pair_rows(ps, 0,
    A, exclude_positive=...))`` from one autograd Function (:class:`_SimLSE`) that makes the product, masks it in
    place and keeps log p for a backward of one (A, C) matrix. ``pair_rows``' in-place mask (``index_put_``) made
    autograd clone the whole (A, C) gradient in the backward to zero the masked entries, where p is 0 already."""
    if ps.negatives == "none":  # [positive | queue]: nothing masked but the positive, the only in-batch column
        lse_q = row_logsumexp(ps.anchors @ ps.queue.T)  # type: ignore[union-attr]
        return lse_q if exclude_positive else torch.logaddexp(ps.pos_sim, lse_q)  # type: ignore[arg-type]
    if len(ps.cands) == 1:
        excl = [c for c in (ps.self_col, ps.pos if exclude_positive else None) if c is not None]
        return _SimLSE.apply(ps.anchors, ps.cands[0], ps.queue, torch.stack(excl) if excl else None)
    n = ps.n_local  # "cross", symmetric: rows [0, N) against z_b, rows [N, 2N) against z_a (no self column)
    return torch.cat([_SimLSE.apply(ps.anchors[h * n:(h + 1) * n], cand, ps.queue,
                                    ps.pos[h * n:(h + 1) * n][None] if exclude_positive else None)
                      for h, cand in enumerate(ps.cands)])


class _SimLSE(torch.autograd.Function):
    """lse_i = log sum_j exp S_ij over the rows of S = [anchors @ cands.T, -inf at the ``excl`` (k, A) columns of
    each row | anchors @ queue.T] (A, C + Q); the queue gets no gradient. The forward keeps log p = log_softmax(S)
    (the product is this Function's own, so it is masked in place); the backward is G = g p (0 at the masked
    entries, exp(-inf) = 0), d anchors = G [cands; queue], d cands = G_c^T anchors: one (A, C + Q) matrix, where
    autograd's graph of the product, the mask and the log-sum-exp made two (its ``index_put_`` cloned the gradient).
    Values: lse_i = m_i - max_j log p_ij (:func:`row_logsumexp`); -inf for a row with every entry masked."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None) -> Tensor:
        sim = anchors @ cands.T  # (A, C)
        if queue is not None:
            sim = torch.cat([sim, anchors @ queue.T], dim=1)  # (A, C + Q)
        if excl is not None:
            rows = torch.arange(anchors.shape[0], device=anchors.device).repeat(excl.shape[0])
            sim.index_put_((rows, excl.reshape(-1)), torch.full((), NEG_INF, dtype=sim.dtype, device=sim.device))
        log_p = torch.log_softmax(sim, -1)
        m = sim.amax(-1)
        ctx.save_for_backward(anchors, cands, queue, log_p)
        return torch.where(m == NEG_INF, m, m - log_p.amax(-1))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:  # type: ignore[override]
        anchors, cands, queue, log_p = ctx.saved_tensors
        need_a, need_c = ctx.needs_input_grad[:2]
        gs = log_p.exp().mul_(g.unsqueeze(-1))  # (A, C + Q)
        c = cands.shape[0]
        da = dc = None
        if need_a:
            da = gs[:, :c] @ cands
            if queue is not None:
                da = da.addmm_(gs[:, c:], queue)
        if need_c:
            dc = gs[:, :c].T @ anchors
        return da, dc, None, None


def pair_lse(ps: PairSetup, chunk: int, *, exclude_positive: bool = False, uniform: bool = False,
             scale: float = 1.0) -> Tensor:
    """(A,) log-sum-exp of every row of the scaled similarity matrix (the self column and, with
    ``exclude_positive``, the positive excluded), computed in row tiles of ``chunk`` with the fused
    recomputing backward of :func:`suite.losses.tiling.row_lse`: the (A, C) matrix never exists.
    ``uniform``: the caller averages the rows with equal weights (the gradient is then formed in the
    forward, ``row_lse(uniform=True)``; exact either way). ``scale``: of the similarities (hard negatives' (1 + beta)),
    applied by the row reduction without a scaled copy of the anchors."""
    from suite.losses.tiling import row_lse, row_lse_pair

    if ps.negatives == "none":
        lse_q = row_lse(ps.anchors, ps.queue, None, None, chunk, uniform=uniform and exclude_positive, scale=scale)
        return lse_q if exclude_positive else torch.logaddexp(scale * ps.pos_sim, lse_q)
    return _arranged(ps, exclude_positive,
                     lambda a, c, ex, k: [row_lse(a, c, ps.queue, ex, chunk, uniform=uniform, scale=scale,
                                                  self_scale=k)],
                     lambda z_a, z_b, ex, k: _both(row_lse_pair(z_a, z_b, ex, scale=scale, self_scale=k)))[0]


def pair_lse_scales(ps: PairSetup, chunk: int, scales: tuple[float, ...]) -> list[Tensor]:
    """For each k of ``scales`` (> 0), the (A,) log-sum-exp over each anchor's negatives (self and positive left out)
    of k times the scaled similarities, all from one pass of row tiles (:func:`suite.losses.tiling.row_lse_scales`;
    hard negatives' beta s / t and (1 + beta) s / t): the (A, C) matrix never exists."""
    from suite.losses.tiling import row_lse_pair, row_lse_scales

    if ps.negatives == "none":
        return row_lse_scales(ps.anchors, ps.queue, None, None, chunk, scales)

    def pair(z_a: Tensor, z_b: Tensor, ex: Tensor | None, k: Any) -> list[Tensor] | None:
        outs = [_both(row_lse_pair(z_a, z_b, ex, scale=c, self_scale=k)) for c in scales]  # one pair path per scale
        return None if outs[0] is None else [o[0] for o in outs if o is not None]

    return _arranged(ps, True, lambda a, c, ex, k: row_lse_scales(a, c, ps.queue, ex, chunk, scales, k), pair)


def pair_outer_scales(ps: PairSetup, chunk: int, scales: tuple[float, ...], outer: Callable[..., Tensor],
                      extra: Tensor, uniform: bool = False) -> Tensor:
    """(A,) ``outer(pair_lse_scales(ps, chunk, scales), extra)``, a row-wise function of the rows' log-sum-exps over
    their negatives (hard negatives' per-row loss, ``extra`` its positive logits): with one candidate set (or the
    queue alone) by :func:`suite.losses.tiling.row_outer_scales`, whose PyTorch tiles form the gradient in the
    forward (``uniform``: the caller averages the rows with equal weights); "cross"'s halves as
    :func:`pair_lse_scales`, then ``outer``."""
    from suite.losses.tiling import row_outer_scales

    if ps.negatives == "none":
        return row_outer_scales(ps.anchors, ps.queue, None, None, chunk, scales, outer, extra, uniform)  # type: ignore[arg-type]
    if len(ps.cands) == 1:
        excl = torch.stack([c for c in (ps.self_col, ps.pos) if c is not None])
        return row_outer_scales(ps.anchors, ps.cands[0], ps.queue, excl, chunk, scales, outer, extra, uniform,
                                ps.self_scale)
    return outer(pair_lse_scales(ps, chunk, scales), extra)


def _both(sides: tuple[Tensor, Tensor] | None) -> list[Tensor] | None:
    """(lse of the rows of z_a, of z_b) -> [the (2N,) rows in the arrangement's order], or None."""
    return None if sides is None else [torch.cat(sides)]


def _arranged(ps: PairSetup, exclude_positive: bool,
              rows: Callable[[Tensor, Tensor, Tensor | None, Any], list[Tensor]],
              pair: Callable[[Tensor, Tensor, Tensor | None, Any], list[Tensor] | None] | None = None) -> list[Tensor]:
    """``rows(anchors, cands, excl, self_scale)`` (row statistics, each (rows,)) over the candidate sets of a pair
    arrangement with candidates (the self column and, with ``exclude_positive``, the positive left out): one set, or
    "cross"'s two halves, concatenated. On one rank without a queue ("cross"'s ``self_scale`` set) the halves are
    first offered to ``pair(z_a, z_b, excl, self_scale)``, both at once (the fused kernels' pair path; None: the
    halves as before)."""
    if len(ps.cands) == 1:
        excl = [c for c in (ps.self_col, ps.pos if exclude_positive else None) if c is not None]
        return rows(ps.anchors, ps.cands[0], torch.stack(excl) if excl else None, ps.self_scale)
    n = ps.n_local  # "cross", symmetric: two halves with their own candidates
    if pair is not None and ps.self_scale is not None and ps.queue is None:
        out = pair(ps.cands[1], ps.cands[0], ps.pos[:n][None] if exclude_positive else None, ps.self_scale)
        if out is not None:
            return out
    halves = [rows(ps.anchors[h * n:(h + 1) * n], cand, ps.pos[h * n:(h + 1) * n][None] if exclude_positive else None,
                   None) for h, cand in enumerate(ps.cands)]
    return [torch.cat(parts) for parts in zip(*halves)]


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
    The dense form of :func:`pair_setup` + :func:`pair_rows` (which the tiled path uses row block by row block).
    """
    ps = pair_setup(z_a, z_b, negatives=negatives, symmetric=symmetric, queue=queue, scale=scale)
    sim = pair_rows(ps, 0, ps.n_rows, exclude_positive=exclude_positive, mask_value=mask_value)
    n_masked = int(ps.self_col is not None) + int(exclude_positive)
    return PairSims(sim, ps.pos, ps.n_local, n_masked, ps.cand)


def gather_views(views: Tensor) -> Tensor:
    """(V, N, d) local views -> (V, W*N, d) views of all ranks (gradient kept, see suite.distributed)."""
    if not sd.is_distributed():
        return views
    v, n, d = views.shape
    g = sd.gather(views.transpose(0, 1).reshape(n, v * d))  # (W*N, V*d)
    return g.reshape(-1, v, d).transpose(0, 1)


class _ViewGram(torch.autograd.Function):
    """G[n, a, b] = x_a,n . x_b,n of views (V, N, d). Its backward makes one (V, N, d) gradient, (dG + dG^T) x, where
    autograd's through the same product of ``views`` with itself makes one per operand and their sum."""

    @staticmethod
    def forward(ctx: Any, views: Tensor) -> Tensor:
        ctx.save_for_backward(views)
        return torch.einsum("and,bnd->nab", views, views)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:  # type: ignore[override]
        (views,) = ctx.saved_tensors
        return torch.einsum("nab,bnd->and", g + g.transpose(1, 2), views)


def view_gram(views: Tensor, other: Tensor | None = None) -> Tensor:
    """(N, V, V) inner products of each sample's views, G[n, a, b] = views_a,n . other_b,n (``other``: the views)."""
    if other is None:
        return _ViewGram.apply(views)
    return torch.einsum("and,bnd->nab", views, other)


def sq_dists_normalized(a: Tensor, b: Tensor) -> Tensor:
    """Squared Euclidean distances of unit vectors from their inner products: 2 - 2 a.b, clamped >= 0."""
    return (2.0 - 2.0 * (a @ b.transpose(-1, -2))).clamp_min(0.0)
