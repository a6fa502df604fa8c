"""Memory-bounded exact evaluation of the losses: row tiles, recomputed in a fused backward.

Every loss of the core is a sum of per-anchor terms that each depend on one row of the anchors x
candidates similarity matrix (plus, for t-SimCLR and the uniformity term, one global log-sum-exp over
all pairs). With ``chunk_size`` set, the rows are processed in tiles of ``chunk_size`` anchors by custom
autograd Functions that keep only per-row statistics between forward and backward and recompute each
tile from the embeddings in the backward:

- :func:`row_lse`: the row log-sum-exps (InfoNCE family, SupCon, CMC, hard negatives, X-CLR's logits);
- :func:`row_kernel_lse`: the same for a log-kernel of the squared distance (SimCLR with -l2 similarity);
- :func:`pair_kernel_lse`: log sum over pairs of exp f(||e_j - e_k||^2) (t-SimCLR's normaliser, uniformity);
- :func:`softmin_cost`: CACR's soft-min weighted cost, the weights keeping their gradient;
- :func:`weighted_cross`: a sum of anchors against target-weighted candidates (X-CLR's cross term).

Peak extra memory is O(chunk x C + (A + C) d) instead of O(A x C); values and gradients are those of the
dense path (the same operations, summed in another order; tested to 1e-10 in float64).

On a CUDA device with Triton, float32 inputs take the fused kernels of :mod:`suite.losses.fused` instead (the
same row statistics, the tiles never leaving registers): :func:`row_lse`, and :func:`row_kernel_lse` and
:func:`pair_kernel_lse` when their caller names the kernel (``kind``), and CACR's :func:`softmin_cost`. X-CLR's
:func:`weighted_cross` keeps these PyTorch tiles everywhere (its target term takes the kernels where the graph is
given as embeddings: :func:`suite.losses.fused.soft_mix`).

``chunk_size``: ``None`` (dense, one tile), an int >= 1 (rows per tile), or ``"auto"``: dense while
the matrix has at most :data:`AUTO_DENSE_ELEMENTS` entries (:data:`AUTO_DENSE_ELEMENTS_CUDA` on a CUDA device), else
tiles of about :data:`AUTO_TILE_ELEMENTS` entries (at least one row).
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable, Iterator

import torch
from torch import Tensor

from suite.losses import fused
from suite.memory import pin_malloc_threshold

Kind = tuple  # (mode, c1[, c2]) of suite.losses.fused: a log-kernel the fused kernels compute themselves

AUTO_DENSE_ELEMENTS = 1 << 24  # 2N = 4096 two-view: dense (64 MiB per float32 matrix)
# on a CUDA device: dense up to 2N = 8,192 (256 MiB per matrix), where the dense path was faster than the fused kernels
# for 8 of their 10 losses on an H200 (InfoNCE 2.9 against 4.3 ms); at 32,768 it needs 12-37 GB
AUTO_DENSE_ELEMENTS_CUDA = 1 << 26
AUTO_TILE_ELEMENTS = 1 << 22  # 16 MiB per float32 tile


# Whether the loss being called on this thread has its inputs on a CUDA device: an attribute of a plain
# ``threading.local`` (no class default: see ``suite.losses.checks._DEFERRED``), which ``torch.compile`` traces and
# guards (a ``ContextVar``'s ``get`` was a graph break).
_cuda = threading.local()
_cuda.flag = False


def _on_cuda() -> bool:
    try:
        return bool(_cuda.flag)
    except AttributeError:  # a thread that never entered on_cuda
        return False


@contextlib.contextmanager
def on_cuda(flag: bool) -> Iterator[None]:
    """Within the block the loss being called has its inputs on a CUDA device (set by ``ContrastiveLoss.__call__``):
    ``"auto"`` uses :data:`AUTO_DENSE_ELEMENTS_CUDA`."""
    before, _cuda.flag = _on_cuda(), flag
    try:
        yield
    finally:
        _cuda.flag = before


def check_chunk_size(chunk_size: Any) -> int | str | None:
    if chunk_size is None or chunk_size == "auto":
        return chunk_size
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be None, 'auto' or an int >= 1, got {chunk_size!r}")
    return int(chunk_size)


def auto_rows(n_cols: int) -> int:
    """Rows per tile that ``"auto"`` takes above its dense limit for ``n_cols`` columns (tiles of about
    :data:`AUTO_TILE_ELEMENTS` entries, at least one row)."""
    return max(1, AUTO_TILE_ELEMENTS // max(1, n_cols))


def resolve(chunk_size: int | str | None, n_rows: int, n_cols: int) -> int | None:
    """Rows per tile for an (n_rows x n_cols) matrix, or None for the dense path."""
    if chunk_size is None:
        return None
    if chunk_size == "auto":
        if n_rows * n_cols <= (AUTO_DENSE_ELEMENTS_CUDA if _on_cuda() else AUTO_DENSE_ELEMENTS):
            return None
        return auto_rows(n_cols)
    return None if chunk_size >= n_rows else int(chunk_size)


def _spans(n_rows: int, chunk: int) -> list[tuple[int, int]]:
    return [(s, min(s + chunk, n_rows)) for s in range(0, n_rows, chunk)]


def _uniform(g: Tensor) -> bool:
    """Whether every row's incoming gradient is the same (one host read: the PyTorch tiles run where a GPU takes the
    fused kernels): then the sums a forward formed for a gradient of 1 per row are the gradient, scaled by g[0]."""
    return bool((g == g[0]).all())


def _scaled(t: Tensor | None, k: Tensor) -> Tensor | None:
    return None if t is None else t * k


EXP_FLOOR = -60.0  # the arguments' floor of the tiles' exp passes where they can fall far below a row's maximum


def _exp_floor(anchors: Tensor, x: Tensor, scale: float = 1.0) -> float | None:
    """:data:`EXP_FLOOR` where the tiles' exp arguments, scale (a_i . x_j - max_j a_i . x_j, or - lse_i), can fall
    below it, else None: bounded by 2 scale max|a| max|x| + log(columns). The CPU's exp takes a slow path below
    about -87 in float32 (-inf included): 30x slower per entry (InfoNCE's tiles took 3.5x as long at tau = 0.001 as at
    0.1, MACL's text setting clamps tau there). exp(-60) = 9e-27 beside a row's largest term (1, or 1 / columns
    after the normaliser) changes no float32 or float64 sum and makes no denormals in the products after it. CPU
    tensors only (no host read on a GPU, whose exp has no such path)."""
    if anchors.device.type != "cpu" or not anchors.numel() or not x.numel():
        return None
    bound = 2.0 * scale * float(anchors.norm(dim=1).max() * x.norm(dim=1).max()) + math.log(x.shape[0] + 1)
    return EXP_FLOOR if bound > -EXP_FLOOR else None


def _exp_(t: Tensor, floor: float | None) -> Tensor:
    """exp in place, the arguments first clamped at ``floor`` (:func:`_exp_floor`) where one is given."""
    return (t if floor is None else t.clamp_min_(floor)).exp_()


class _RowLSE(torch.autograd.Function):
    """logsumexp over the columns of [anchors @ cands.T (excluded entries -inf) | anchors @ queue.T], by row
    tiles; only the (A,) row statistics and (A, d) / (C, d) sums are kept, never a tile.

    The forward has each tile's softmax P at hand (one exp pass over the row max gives both the row sums,
    hence the lse, and P), so it also forms d anchors = P @ [cands; queue] (row i of the gradient only
    scales by the incoming g_i, so this is exact for any incoming gradient) and, with ``uniform`` (the caller
    sums or averages the rows with equal weights, as InfoNCE does without weights), d cands = P_c^T @ anchors
    and d queue = P_q^T @ anchors. The backward scales them; d cands (d queue) under a non-uniform gradient
    recomputes only the candidate (queue) columns of each tile: exp(S - lse) * g. Products per tile: 3 with
    ``uniform`` (the dense path: 3), else 4 (2 when only the anchors need a gradient, e.g. a detached queue's
    columns: the MoCo shape)."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None,
                chunk: int, uniform: bool = False) -> Tensor:
        lse = torch.empty(anchors.shape[0], dtype=anchors.dtype, device=anchors.device)
        need_a, need_c, need_q = ctx.needs_input_grad[:3]
        need_q = need_q and queue is not None
        da = torch.zeros_like(anchors) if need_a else None
        dc = torch.zeros_like(cands) if uniform and need_c else None
        dq = torch.zeros_like(queue) if uniform and need_q else None
        c = cands.shape[0]
        x = _columns(cands, queue)
        work = _tile_buffers(1, chunk, anchors, x.shape[0])
        floor = _exp_floor(anchors, x)
        for s, e in _spans(anchors.shape[0], chunk):
            sim = _tile_logits(anchors, x, excl, s, e, work[0])
            if not (need_a or need_c or need_q):
                lse[s:e] = torch.logsumexp(sim, dim=1)
                continue
            mx = sim.amax(1, keepdim=True)
            p = _exp_(sim.sub_(mx), floor)
            tot = p.sum(1, keepdim=True)
            lse[s:e] = (mx + tot.log()).squeeze(1)
            p.div_(tot)
            _accumulate(p, anchors[s:e], cands, queue, da, dc, dq, s, e, c)
        ctx.save_for_backward(anchors, cands, queue, excl, lse, da, dc, dq)
        ctx.chunk, ctx.floor = chunk, floor
        return lse

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        anchors, cands, queue, excl, lse, da, dc, dq = ctx.saved_tensors
        need_a, need_c, need_q = ctx.needs_input_grad[:3]
        need_q = need_q and queue is not None
        da = da * g[:, None] if need_a else None
        done = (not need_c or dc is not None) and (not need_q or dq is not None)
        if done and _uniform(g):  # the forward's sums are the gradient, scaled
            return da, _scaled(dc, g[0]), _scaled(dq, g[0]), None, None, None
        dc = torch.zeros_like(cands) if need_c else None
        dq = torch.zeros_like(queue) if need_q else None
        work = _tile_buffers(1, ctx.chunk, anchors, cands.shape[0]) if dc is not None else [None]
        for s, e in _spans(anchors.shape[0], ctx.chunk):  # only the columns a gradient is wanted for
            a, w, gi = anchors[s:e], lse[s:e, None], g[s:e, None]
            if dc is not None:
                dc.addmm_(_exp_(_tile_logits(anchors, cands, excl, s, e, work[0]).sub_(w), ctx.floor).mul_(gi).T, a)
            if dq is not None:
                dq.addmm_(_exp_((a @ queue.T).sub_(w), ctx.floor).mul_(gi).T, a)
        return da, dc, dq, None, None, None


def _accumulate(p: Tensor, a: Tensor, cands: Tensor, queue: Tensor | None, da: Tensor | None, dc: Tensor | None,
                dq: Tensor | None, s: int, e: int, c: int) -> None:
    """Add one tile's softmax-weighted sums: da[s:e] = P @ [cands; queue], dc += P_c^T a, dq += P_q^T a."""
    pc = p[:, :c]
    if da is not None:
        da[s:e] = pc @ cands
        if queue is not None:
            da[s:e] += p[:, c:] @ queue
    if dc is not None:
        dc.addmm_(pc.T, a)
    if dq is not None:
        dq.addmm_(p[:, c:].T, a)


def _tile_logits(anchors: Tensor, x: Tensor, excl: Tensor | None, s: int, e: int, out: Tensor | None = None
                 ) -> Tensor:
    """Rows [s, e) of anchors @ x.T (x: the columns, [cands; queue] from :func:`_columns`), -inf at ``excl[:, s:e]``
    (k, A) candidate columns; into the first rows of ``out`` where given (a tile buffer of :func:`_tile_buffers`)."""
    a = anchors[s:e]
    return _exclude(a @ x.T if out is None else torch.mm(a, x.T, out=out[: e - s]), excl, s, e)


def _columns(cands: Tensor, queue: Tensor | None) -> Tensor:
    """The columns [cands; queue] of a pass over the tiles, made once for all of them."""
    return cands if queue is None else torch.cat([cands, queue])


def _tile_buffers(k: int, rows: int, like: Tensor, cols: int) -> list[Tensor]:
    """``k`` tile buffers (``rows`` x ``cols``, at most ``like``'s rows) for one pass over the tiles, reused tile
    after tile: under :func:`~suite.memory.pin_malloc_threshold` each new tile-sized tensor is fresh pages from the
    OS, about as costly as an elementwise pass over it (a third of InfoNCE's tiles' time, as a new tensor per tile)."""
    return [torch.empty(min(rows, like.shape[0]), cols, dtype=like.dtype, device=like.device) for _ in range(k)]


def _exclude(sim: Tensor, excl: Tensor | None, s: int, e: int) -> Tensor:
    """``sim`` (rows [s, e) of a tile) with -inf, in place, at the ``excl[:, s:e]`` (k, A) candidate columns."""
    if excl is not None:
        rows = torch.arange(e - s, device=sim.device)
        cols = excl[:, s:e]
        sim.index_put_((rows.repeat(cols.shape[0]), cols.reshape(-1)),
                       torch.full((), float("-inf"), dtype=sim.dtype, device=sim.device))
    return sim


def sq_distances(a: Tensor, x: Tensor) -> Tensor:
    """(r, C) ||a_i - x_j||^2 through one matrix product, ||a||^2 - 2 a.x + ||x||^2 (it cancels for points far from
    the origin, and may fall a little below 0: callers centre or clamp)."""
    return torch.addmm((a * a).sum(1, keepdim=True), a, x.T, alpha=-2.0).add_((x * x).sum(1)[None])


def row_lse(anchors: Tensor, cands: Tensor, queue: Tensor | None = None, excl: Tensor | None = None,
            chunk: int = 1024, uniform: bool = False, scale: float = 1.0,
            self_scale: float | Tensor | None = None) -> Tensor:
    """(A,) logsumexp_j of the rows of [anchors @ cands.T (entries ``excl`` (k, A) set to -inf) |
    anchors @ queue.T], in row tiles of ``chunk``, with the exact gradient (memory O((A + C) d + chunk x C));
    the fused path of the InfoNCE family. ``uniform``: the caller sums or averages the rows with equal
    weights, so the candidates' gradient is formed in the forward too (see :class:`_RowLSE`; exact either
    way, only faster when the hint holds). ``scale``: the rows of ``scale * anchors`` (the fused kernels apply it to the
    products: no scaled copy of the anchors is kept). ``self_scale``: the anchors are this multiple of ``cands`` (the
    fused kernels' symmetric path, :func:`suite.losses.fused.row_lse`; the PyTorch tiles do not use it)."""
    out = fused.attempt((anchors, cands, queue), fused.row_lse, anchors, cands, queue, excl, c1=scale,
                        self_scale=self_scale)
    if out is not None:
        return out
    pin_malloc_threshold()
    return _RowLSE.apply(anchors if scale == 1.0 else scale * anchors, cands, queue, excl, chunk, bool(uniform))


def row_lse_sum(anchors: Tensor, cands: list[Tensor], queue: Tensor | None = None, chunk: int = 1024,
                scale: float = 1.0) -> Tensor:
    """Scalar sum over b of the rows' sum of :func:`row_lse` (``anchors``, ``cands[b]``, ``queue``): CMC's ordered
    view pairs of one anchor view. The fused kernels keep one anchors' gradient accumulator for every b
    (:func:`suite.losses.fused.row_lse_sum`); the PyTorch tiles take each b in turn."""
    out = fused.attempt((anchors, *cands, queue), fused.row_lse_sum, anchors, cands, queue, c1=scale)
    if out is not None:
        return out
    return torch.stack([row_lse(anchors, c, queue, None, chunk, uniform=True, scale=scale).sum() for c in cands]).sum()


def row_lse_pair(z_a: Tensor, z_b: Tensor, excl: Tensor | None = None, *, scale: float = 1.0,
                 self_scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor] | None:
    """Both directions of two sets of rows, (:func:`row_lse` of k z_a against z_b, of k z_b against z_a), k =
    ``self_scale`` (the products scaled by ``scale`` too), on the fused kernels' pair path
    (:func:`suite.losses.fused.row_lse_pair`: the products a_i . b_j serve both sides) where they apply; None
    elsewhere (the general kernels included: ``use("general")``), where the caller's own path runs as before."""
    if not fused._pairwise(z_a, z_b, self_scale):
        return None
    return fused.attempt((z_a, z_b), fused.row_lse_pair, z_a, z_b, excl, c1=scale, scale=self_scale)


class _RowLSEScales(torch.autograd.Function):
    """The row log-sum-exps of k s for several scales k > 0 of the same tiles s = [anchors @ cands.T (excluded
    entries -inf) | anchors @ queue.T] (hard negatives' beta s / t and (1 + beta) s / t): the forward takes every
    scale from one product per tile and keeps only the (K, A) statistics; the backward recomputes the tile once and
    forms W = sum_k k g_k softmax(k s), then both gradients from it. Products per tile: 4, where K calls of
    :class:`_RowLSE` with a non-uniform gradient take 4 K."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, chunk: int,
                scales: tuple[float, ...]) -> Tensor:
        out = torch.empty(len(scales), anchors.shape[0], dtype=anchors.dtype, device=anchors.device)
        x = _columns(cands, queue)
        work = _tile_buffers(2, chunk, anchors, x.shape[0])
        floor = _exp_floor(anchors, x, max(scales))
        for s, e in _spans(anchors.shape[0], chunk):
            sim = _tile_logits(anchors, x, excl, s, e, work[0])
            mx = sim.amax(1, keepdim=True)
            d = sim.sub_(mx)  # max k s = k max s (k > 0)
            for j, k in enumerate(scales):
                out[j, s:e] = k * mx[:, 0] + _exp_(torch.mul(d, k, out=work[1][: e - s]), floor).sum(1).log_()
        ctx.save_for_backward(anchors, cands, queue, excl, out)
        ctx.chunk, ctx.scales, ctx.floor = chunk, scales, floor
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        anchors, cands, queue, excl, out = ctx.saved_tensors
        need_a, need_c, need_q = ctx.needs_input_grad[:3]
        da = torch.zeros_like(anchors) if need_a else None
        dc = torch.zeros_like(cands) if need_c else None
        dq = torch.zeros_like(queue) if need_q and queue is not None else None
        x = _columns(cands, queue)
        work = _tile_buffers(3, ctx.chunk, anchors, x.shape[0])
        for s, e in _spans(anchors.shape[0], ctx.chunk):
            w = _scales_weights(_tile_logits(anchors, x, excl, s, e, work[0]), ctx.scales, out[:, s:e], g[:, s:e],
                                work, ctx.floor)
            _accumulate(w, anchors[s:e], cands, queue, da, dc, dq, s, e, cands.shape[0])
        return da, dc, dq, None, None, None


def _scales_weights(sim: Tensor, scales: tuple[float, ...], lses: Tensor, gs: Tensor, work: list[Tensor],
                    floor: float | None) -> Tensor:
    """A tile's W = sum_k k g_k exp(k s - lse_k) for the scales' (K, rows) log-sum-exps and incoming gradients, the
    first scale's weights in buffer 1, the others' in 2, added (the backward of the rows' log-sum-exps at K scales)."""
    rows = sim.shape[0]
    w: Tensor | None = None
    for j, k in enumerate(scales):
        p = torch.mul(sim, k, out=work[1 if w is None else 2][:rows])
        _exp_(p.sub_(lses[j, :, None]), floor).mul_(k * gs[j, :, None])
        w = p if w is None else w.add_(p)
    assert w is not None
    return w


def row_lse_scales(anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, chunk: int,
                   scales: tuple[float, ...], self_scale: float | Tensor | None = None) -> list[Tensor]:
    """For each k of ``scales`` (> 0), the (A,) :func:`row_lse` of the rows of k [anchors @ cands.T | anchors @
    queue.T], with the exact gradients: on the fused kernels where they apply
    (:func:`suite.losses.fused.row_lse_scales`), else one pass of PyTorch tiles for all of them
    (:class:`_RowLSEScales`)."""
    out = fused.attempt((anchors, cands, queue), fused.row_lse_scales, anchors, cands, queue, excl, scales,
                        self_scale=self_scale)
    if out is not None:
        return out
    pin_malloc_threshold()
    return list(_RowLSEScales.apply(anchors, cands, queue, excl, chunk, tuple(float(k) for k in scales)).unbind(0))


class _RowOuterScales(torch.autograd.Function):
    """Per row i, r_i = outer([lse_1, ..., lse_K]_i, extra_i): a row-wise function of the row log-sum-exps of k s over
    the scales k of ``scales`` (as :class:`_RowLSEScales`) and one more value per row (``extra``, with its gradient;
    hard negatives' positive logit). A row's tile spans every column, so its statistics are known within the tile:
    the forward evaluates ``outer`` there (autograd on the tile's (rows,) statistics gives the per-row derivatives
    h_ki = d r_i / d lse_ki and d r_i / d extra_i) and forms W = sum_k k h_k softmax(k s) and from it the anchors'
    gradient (exact for any incoming gradient: row i only scales by g_i) and, with ``uniform`` (the caller averages
    the rows with equal weights), the candidates' and the queue's: 3 products per tile where the statistics, then a
    backward that recomputes the tile, take 4. A non-uniform incoming gradient recomputes the tiles for the
    candidates' (and queue's) share."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None,
                extra: Tensor | None, chunk: int, scales: tuple[float, ...], outer: Callable[..., Tensor],
                uniform: bool) -> Tensor:
        need_a, need_c, need_q, _, need_e = ctx.needs_input_grad[:5]
        need_q = need_q and queue is not None
        out = torch.empty(anchors.shape[0], dtype=anchors.dtype, device=anchors.device)
        lses = torch.empty(len(scales), anchors.shape[0], dtype=anchors.dtype, device=anchors.device)
        h = torch.empty_like(lses)  # d r_i / d lse_ki
        de = torch.empty_like(extra) if need_e and extra is not None else None
        da = torch.zeros_like(anchors) if need_a else None
        dc = torch.zeros_like(cands) if uniform and need_c else None
        dq = torch.zeros_like(queue) if uniform and need_q else None
        x = _columns(cands, queue)
        work = _tile_buffers(1 + len(scales), chunk, anchors, x.shape[0])
        floor = _exp_floor(anchors, x, max(scales))
        for s, e in _spans(anchors.shape[0], chunk):
            sim = _tile_logits(anchors, x, excl, s, e, work[0])
            mx = sim.amax(1, keepdim=True)
            d = sim.sub_(mx)  # max k s = k max s (k > 0)
            ps = [_exp_(torch.mul(d, k, out=work[1 + j][: e - s]), floor) for j, k in enumerate(scales)]
            for j, (k, p) in enumerate(zip(scales, ps)):
                lses[j, s:e] = k * mx[:, 0] + p.sum(1).log()
            if not (need_a or need_c or need_q or de is not None):  # no gradient wanted (no_grad, inference_mode)
                out[s:e] = outer([lses[j, s:e] for j in range(len(scales))], None if extra is None else extra[s:e])
                continue
            with torch.enable_grad():  # the row-wise outer function on this tile's rows: its per-row derivatives
                stats = [lses[j, s:e].detach().requires_grad_() for j in range(len(scales))]
                ex = None if extra is None else extra[s:e].detach().requires_grad_()
                r = outer(stats, ex)
                hs = torch.autograd.grad(r.sum(), stats + ([ex] if ex is not None else []), allow_unused=True)
            out[s:e] = r.detach()
            for j, hj in enumerate(hs[: len(scales)]):
                h[j, s:e] = 0.0 if hj is None else hj
            if de is not None:
                de[s:e] = 0.0 if hs[-1] is None else hs[-1]
            w = ps[0].mul_((scales[0] * h[0, s:e] * (scales[0] * mx[:, 0] - lses[0, s:e]).exp())[:, None])
            for j in range(1, len(scales)):  # the other scales' softmaxes, weighted, into the first's buffer
                k = scales[j]
                w.add_(ps[j].mul_((k * h[j, s:e] * (k * mx[:, 0] - lses[j, s:e]).exp())[:, None]))
            _accumulate(w, anchors[s:e], cands, queue, da, dc, dq, s, e, cands.shape[0])
        ctx.save_for_backward(anchors, cands, queue, excl, lses, h, da, dc, dq, de)
        ctx.chunk, ctx.scales, ctx.floor = chunk, scales, floor
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        anchors, cands, queue, excl, lses, h, da, dc, dq, de = ctx.saved_tensors
        need_c, need_q = ctx.needs_input_grad[1], ctx.needs_input_grad[2] and queue is not None
        da, de = _scaled(da, g[:, None]), _scaled(de, g)
        done = (not need_c or dc is not None) and (not need_q or dq is not None)
        if done and _uniform(g):  # the forward's sums are the gradient, scaled
            dc, dq = _scaled(dc, g[0]), _scaled(dq, g[0])
        else:
            dc = torch.zeros_like(cands) if need_c else None
            dq = torch.zeros_like(queue) if need_q else None
            x = _columns(cands, queue)
            work = _tile_buffers(3, ctx.chunk, anchors, x.shape[0])
            for s, e in _spans(anchors.shape[0], ctx.chunk):  # each scale's incoming gradient g_k = g h_k
                w = _scales_weights(_tile_logits(anchors, x, excl, s, e, work[0]), ctx.scales, lses[:, s:e],
                                    g[None, s:e] * h[:, s:e], work, ctx.floor)
                _accumulate(w, anchors[s:e], cands, queue, None, dc, dq, s, e, cands.shape[0])
        return da, dc, dq, None, de, None, None, None, None


def row_outer_scales(anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, chunk: int,
                     scales: tuple[float, ...], outer: Callable[..., Tensor], extra: Tensor | None = None,
                     uniform: bool = False, self_scale: float | Tensor | None = None) -> Tensor:
    """(A,) r_i = ``outer([lse_1, ..., lse_K], extra)`` row by row, lse_k the rows' log-sum-exps of k [anchors @
    cands.T | anchors @ queue.T] (:func:`row_lse_scales`; ``outer`` row-wise: r_i depends on row i's statistics and
    extra_i alone), with the exact gradients. On the fused kernels the statistics come from
    :func:`suite.losses.fused.row_lse_scales` and ``outer`` is applied to them; on the PyTorch tiles
    :class:`_RowOuterScales` forms the gradient in the forward (``uniform``: the caller averages the rows with equal
    weights; exact either way)."""
    out = fused.attempt((anchors, cands, queue), fused.row_lse_scales, anchors, cands, queue, excl, scales,
                        self_scale=self_scale)
    if out is not None:
        return outer(out, extra)
    pin_malloc_threshold()
    return _RowOuterScales.apply(anchors, cands, queue, excl, extra, chunk, tuple(float(k) for k in scales), outer,
                                 bool(uniform))


class _PairKernelLSE(torch.autograd.Function):
    """log Z = log( sum_{j != k} exp f(u_jk) + 2 sum_{j, m} exp f(u_jm) ), u the squared distances ||e_j - e_k||^2 and
    ||e_j - q_m||^2, f the log-kernel ``kind``: ``("linear", t)``, f(u) = -t u (uniformity), or ``("cauchy", c, a)``,
    f(u) = -c log(1 + u / a) (t-SimCLR), by row tiles. The output is one scalar, so the forward forms the whole
    gradient while it has each tile at hand. With the weights w = exp(f(u) - M) against the running maximum M of f
    (what was summed is rescaled by exp(M_old - M_new) when M grows), and since each pair (j, k) counts in both
    orders (and each (j, m) twice),

        d log Z / d e_j = 4 (e_j sum_k W_jk - (W @ [e; queue])_j) / sum w,   W = w f'(u)   (row j, columns e then queue)

    one product per tile: the rows' own sums give the columns' share too (the (e, e) block is symmetric). f' is
    -t (linear) or -c / (a + u) (Cauchy); the tiles hold W / (-t) or W / (-c) and the constant joins at the end. Per
    tile the Cauchy kernel is taken on v = a + u, w = (v_min / v)^c and W / (-c) = w / v: no logarithm or
    exponential of a tile. Entries whose computed distance is 0 or below (rounding, near duplicates) are clamped to
    0 and get no gradient, as the clamp's own."""

    @staticmethod
    def forward(ctx: Any, e: Tensor, queue: Tensor | None, kind: Kind, chunk: int) -> Tensor:
        m = e.shape[0]
        cauchy = kind[0] == "cauchy"
        x = e if queue is None else torch.cat([e, queue])
        sq = (x * x).sum(1)
        want = ctx.needs_input_grad[0]
        de = torch.empty_like(e) if want else None
        total = torch.zeros((), dtype=e.dtype, device=e.device)  # sum of w, against ``big``
        big = torch.full((), float("-inf"), dtype=e.dtype, device=e.device)  # running max of f (no host read)
        ref: Tensor | None = None  # Cauchy: the least v so far, where f is largest
        work = _tile_buffers(2, chunk, e, x.shape[0])
        for i, (s, t) in enumerate(_spans(m, chunk)):
            k = torch.arange(t - s, device=e.device)
            if cauchy:
                c, a = kind[1], kind[2]
                v = torch.addmm(sq[s:t, None] + a, e[s:t], x.T, alpha=-2.0, out=work[0][: t - s])
                v.add_(sq[None])  # a + u
                v.clamp_min_(a)[k, k + s] = float("inf")  # the own pair: w = 0
                ref = v.amin() if ref is None else torch.minimum(ref, v.amin())
                new = -c * torch.log1p((ref - a) / a)
                w = torch.div(ref, v, out=work[1][: t - s]).pow_(c)
            else:
                c = kind[1]
                lg = torch.addmm(sq[s:t, None] * -c, e[s:t], x.T, alpha=2.0 * c, out=work[0][: t - s])
                lg.sub_(sq[None], alpha=c)  # -t u
                lg.clamp_max_(0.0)[k, k + s] = float("-inf")
                new = torch.maximum(big, lg.amax())
                w = torch.sub(lg, new, out=work[1][: t - s]).exp_()
            if i:  # rescale what was summed against the old maximum
                scale = torch.where(new > big, torch.exp(big - new), torch.ones_like(big))
                total.mul_(scale)
                if de is not None:
                    de[:s].mul_(scale)
            big = new
            total += w[:, :m].sum() if queue is None else w[:, :m].sum() + 2.0 * w[:, m:].sum()
            if de is not None:
                # w f'(u) / (-c); the entries clamped to u = 0 get none (inf: v's, on a Python bound, no host read)
                g = w.div_(torch.nn.functional.threshold_(v, a, float("inf"))) if cauchy else w.masked_fill_(lg == 0, 0.0)
                de[s:t] = torch.addmm(g.sum(1, keepdim=True) * e[s:t], g, x, alpha=-1.0)
        log_z = big + total.log()
        if de is not None:
            de.mul_(-4.0 * c / total)
        ctx.save_for_backward(de)
        return log_z

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        (de,) = ctx.saved_tensors
        return _scaled(de, g), None, None, None


def pair_kernel_lse(e: Tensor, kind: Kind, queue: Tensor | None = None, chunk: int | None = 1024) -> Tensor:
    """Scalar log( sum_{j != k} exp f(||e_j - e_k||^2) + 2 sum_{j,m} exp f(||e_j - q_m||^2) ) with the exact
    gradient (t-SimCLR's normaliser, the uniformity term); ``queue`` gets no gradient. ``kind``: the log-kernel f,
    ``("linear", t)`` for -t u or ``("cauchy", c, a)`` for -c log(1 + u / a). In tiles of ``chunk`` rows, by the
    fused kernels (:mod:`suite.losses.fused`) where they apply, else by PyTorch tiles; ``chunk=None``: dense, one
    PyTorch tile."""
    if chunk is not None:
        out = fused.attempt((e, queue), fused.pair_lse, e, queue, mode=kind[0], c1=kind[1],
                            c2=kind[2] if len(kind) > 2 else 1.0)
        if out is not None:
            return out
        pin_malloc_threshold()
    return _PairKernelLSE.apply(e, None if queue is None else queue.detach(), kind, chunk or e.shape[0])


class _RowKernelLSE(torch.autograd.Function):
    """logsumexp over the columns of [extra | f(U_c) (excluded entries -inf) | f(U_q)], U the squared distances
    ||a_i - x_j||^2 of the anchors to the candidates and the queue, f(u) = -c1 sqrt(max(u, eps)) (the "negdist"
    kernel: SimCLR with -l2 similarity), ``extra`` (A,) an optional logit per row (-l2 SimCLR's exact positive, with
    its gradient), by row tiles: :class:`_RowLSE` for a log-kernel of the distance instead of the product. With
    W = exp(f(U) - lse) * g * f'(U), f'(u) = -c1 / (2 sqrt(u)) (0 below the floor, as the clamp's), d a_i = 2 (a_i
    sum_j W_ij - (W @ x)_i), d c_j = 2 (c_j sum_i W_ij - (W^T a)_j) and d extra_i = g_i exp(extra_i - lse_i); the
    queue gets none. A row's tile spans every column, so its lse is known within the tile: with ``uniform`` (the
    caller averages the rows with equal weights) the forward forms the whole gradient while it has the tile (3
    products per tile, one exp pass; the backward scales it), else it keeps only the (A,) row statistics and the
    backward recomputes each tile (1 product forward, 3 backward; also where the incoming gradient turns out not to
    be uniform). Each tile is worked in place, in tile buffers made once per pass (a new tile-sized tensor is fresh
    pages from the OS under :func:`~suite.memory.pin_malloc_threshold`, about as costly as an elementwise pass: with
    new tensors per tile and per step these tiles took 3.0x InfoNCE's time on the CPU at 2N = 4,096, 1.8x with the
    buffers)."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None,
                extra: Tensor | None, c1: float, chunk: int, uniform: bool) -> Tensor:
        lse = torch.empty(anchors.shape[0], dtype=anchors.dtype, device=anchors.device)
        x = _columns(cands, queue)
        need_a, need_c, _, _, need_e = ctx.needs_input_grad[:5]
        grads = uniform and (need_a or need_c or need_e)
        da = torch.zeros_like(anchors) if grads and need_a else None
        dc = torch.zeros_like(cands) if grads and need_c else None
        de = torch.empty_like(extra) if grads and need_e and extra is not None else None
        sq, work = (x * x).sum(1), _tile_buffers(2 if grads else 1, chunk, anchors, x.shape[0])
        for s, e in _spans(anchors.shape[0], chunk):
            if grads:  # the tile's weights at once: the roots kept (inf below the floor: no gradient there)
                lg, r = _distance_logits(anchors, x, sq, excl, c1, s, e, work, keep_root=True, floor_value=True)
            else:
                lg, r = _distance_logits(anchors, x, sq, excl, c1, s, e, work)
            mx = lg.amax(1)
            if extra is not None:
                mx = torch.maximum(mx, extra[s:e])
            mx = mx.nan_to_num_(0.0, 0.0, 0.0)  # a row with every column left out: -inf
            p = lg.sub_(mx[:, None]).exp_()
            tot = p.sum(1)
            if extra is not None:
                tot += (extra[s:e] - mx).exp()
            lse[s:e] = tot.log().add_(mx)
            if not grads:
                continue
            assert r is not None
            if de is not None:
                de[s:e] = (extra[s:e] - lse[s:e]).exp_()  # type: ignore[index]
            w = p.div_(r).mul_((tot.reciprocal().nan_to_num_(0.0, 0.0, 0.0) * (-0.5 * c1))[:, None])
            _distance_grads(w, anchors, cands, queue, da, dc, s, e)
        ctx.save_for_backward(anchors, cands, queue, excl, extra, lse, da, dc, de)
        ctx.c1, ctx.chunk, ctx.grads = c1, chunk, grads
        return lse

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        anchors, cands, queue, excl, extra, lse, da, dc, de = ctx.saved_tensors
        need_a, need_c, _, _, need_e = ctx.needs_input_grad[:5]
        need_e = need_e and extra is not None
        if ctx.grads and _uniform(g):  # the forward's sums are the gradient, scaled
            return _scaled(da, g[0]), _scaled(dc, g[0]), None, None, _scaled(de, g[0]), None, None, None
        da = torch.zeros_like(anchors) if need_a else None
        dc = torch.zeros_like(cands) if need_c else None
        # a row with every entry excluded (lse -inf) has no gradient: its weights exp(-inf - 0) are 0, not nan
        safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
        de = g * (extra - safe).exp() if need_e else None
        gs = g * (-0.5 * ctx.c1)  # f'(u) = -c1 / (2 r), r = sqrt(max(u, eps))
        x = _columns(cands, queue)
        sq, work = (x * x).sum(1), _tile_buffers(2, ctx.chunk, anchors, x.shape[0])
        if need_a or need_c:
            for s, e in _spans(anchors.shape[0], ctx.chunk):
                w, r = _distance_logits(anchors, x, sq, excl, ctx.c1, s, e, work, keep_root=True)
                w = w.sub_(safe[s:e, None]).exp_().div_(r).mul_(gs[s:e, None])
                _distance_grads(w, anchors, cands, queue, da, dc, s, e)
        return da, dc, None, None, de, None, None, None


def _distance_grads(w: Tensor, anchors: Tensor, cands: Tensor, queue: Tensor | None, da: Tensor | None,
                    dc: Tensor | None, s: int, e: int) -> None:
    """Add a tile's share of the gradients of the distance kernels' rows, W = the weights times f'(u) (rows [s, e)):
    d a_i = 2 (a_i sum_j W_ij - (W @ x)_i), d c_j += 2 (c_j sum_i W_ij - (W^T a)_j); the queue's columns none."""
    a, c = anchors[s:e], cands.shape[0]
    if da is not None:
        da[s:e] = 2.0 * (w.sum(1, keepdim=True) * a - w[:, :c] @ cands)
        if queue is not None:
            da[s:e].addmm_(w[:, c:], queue, alpha=-2.0)
    if dc is not None:
        wc = w[:, :c]
        dc.addmm_(wc.T, a, alpha=-2.0).add_(2.0 * wc.sum(0)[:, None] * cands)


def _distance_logits(anchors: Tensor, x: Tensor, sq: Tensor, excl: Tensor | None, c1: float, s: int, e: int,
                     work: list[Tensor], keep_root: bool = False,
                     floor_value: bool = False) -> tuple[Tensor, Tensor | None]:
    """Rows [s, e) of -c1 sqrt(max(||a_i - x_j||^2, eps)) against the columns x ([cands; queue], squared norms
    ``sq``), -inf at the ``excl[:, s:e]`` (k, A) candidate columns, in the tile buffers ``work`` (one, or two with
    ``keep_root``: made once per pass over the tiles, each new tile-sized tensor being fresh pages from the OS under
    the pinned mmap threshold). With ``keep_root`` (the backward), also the roots r (the distances), and the entries
    whose squared distance fell to the floor or below are taken at an infinite distance: they get no gradient (as
    the clamp's), their weight exp(-inf) and W = w / r both 0; with ``floor_value`` too (a forward that forms the
    gradient), their logits are the floor's, -c1 sqrt(eps), as without ``keep_root``, while r stays infinite."""
    a = anchors[s:e]
    u = torch.addmm((a * a).sum(1, keepdim=True), a, x.T, alpha=-2.0, out=work[0][: e - s]).add_(sq[None])
    if keep_root:  # as sq_distances, the columns' norms taken once
        r = torch.nn.functional.threshold_(u, fused._EPS2, float("inf")).sqrt_()
        lg = torch.mul(r, -c1, out=work[1][: e - s])
        if floor_value:
            lg.nan_to_num_(0.0, 0.0, -c1 * fused._EPS2 ** 0.5)
        return _exclude(lg, excl, s, e), r
    return _exclude(u.clamp_min_(fused._EPS2).sqrt_().mul_(-c1), excl, s, e), None


def row_kernel_lse(anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, kind: Kind,
                   chunk: int = 1024, self_scale: float | None = None, extra: Tensor | None = None,
                   uniform: bool = False) -> Tensor:
    """(A,) logsumexp_j of the rows of [extra | f(||a_i - c_j||^2) (entries ``excl`` (k, A) set to -inf) |
    f(||a_i - q_m||^2)] in row tiles of ``chunk``, with the exact gradient (memory O((A + C) d + chunk x C)).
    ``queue`` gets no gradient; ``extra`` (A,), optional, one more logit per row (with its gradient). ``kind``: the
    log-kernel f as a mode of the fused kernels, ``("negdist", c1)`` for -c1 sqrt(max(u, 1e-24)) (SimCLR with -l2
    similarity; the PyTorch tiles take this one); ``self_scale``: as :func:`row_lse`'s; ``uniform``: the caller
    averages the rows with equal weights, so the PyTorch tiles form the gradient in the forward (exact either way)."""
    if kind[0] != "negdist":
        raise ValueError(f"row_kernel_lse's PyTorch tiles take the 'negdist' kernel, got {kind[0]!r}")
    out = fused.attempt((anchors, cands, queue), fused.row_lse, anchors, cands,
                        None if queue is None else queue.detach(), excl, mode=kind[0], c1=kind[1],
                        c2=kind[2] if len(kind) > 2 else 1.0, self_scale=self_scale)
    if out is not None:
        return out if extra is None else torch.logaddexp(extra, out)
    pin_malloc_threshold()
    return _RowKernelLSE.apply(anchors, cands, None if queue is None else queue.detach(), excl, extra, float(kind[1]),
                               chunk, bool(uniform))


class _SoftminCost(torch.autograd.Function):
    """Per row i of unit-vector costs d_ij = ||q_i - x_j||^2 (x = [cands; queue], column ``excl[i]`` left
    out): R_i = -sum_j w_ij d_ij with w_i = softmax_j(-t d_ij) (CACR's repulsion), by row tiles. Saved: the
    row log-sum-exp of -t d and D_i = sum_j w_ij d_ij. Backward (weights keep their gradient):
    dR_i / dd_ik = w_ik (t (d_ik - D_i) - 1); with detached weights -w_ik; dd/dq = -2 x, dd/dx = -2 q."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, t: float,
                detach: bool, chunk: int) -> tuple[Tensor, Tensor]:
        lse = torch.empty(q.shape[0], dtype=q.dtype, device=q.device)
        dbar = torch.empty_like(lse)
        x = _columns(cands, queue)
        work = _tile_buffers(2, chunk, q, x.shape[0])
        for s, e in _spans(q.shape[0], chunk):
            d, logits, _ = _cost_tile(q, x, excl, t, s, e, work)
            mx = logits.amax(1, keepdim=True)
            p = logits.sub_(mx).exp_()  # in place: the softmax's numerators
            tot = p.sum(1)
            lse[s:e] = mx[:, 0] + tot.log()
            dbar[s:e] = p.mul_(d).sum(1).div_(tot)
        ctx.save_for_backward(q, cands, queue, excl, lse, dbar)
        ctx.t, ctx.detach, ctx.chunk = t, detach, chunk
        ent = ctx.t * dbar + lse  # H(w_i) = -sum w log w = t D_i + lse_i
        ctx.mark_non_differentiable(ent)
        return -dbar, ent

    @staticmethod
    def backward(ctx: Any, g: Tensor, _g_ent: Tensor | None) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        q, cands, queue, excl, lse, dbar = ctx.saved_tensors
        dq = torch.zeros_like(q) if ctx.needs_input_grad[0] else None
        dc = torch.zeros_like(cands) if ctx.needs_input_grad[1] else None
        c = cands.shape[0]
        x = _columns(cands, queue)
        work = _tile_buffers(2, ctx.chunk, q, x.shape[0])
        for s, e in _spans(q.shape[0], ctx.chunk):
            d, logits, dead = _cost_tile(q, x, excl, ctx.t, s, e, work, want_dead=True)
            w = logits.sub_(lse[s:e, None]).exp_()  # in place, as the tiles' buffers below
            coef = w.neg_() if ctx.detach else d.sub_(dbar[s:e, None]).mul_(ctx.t).sub_(1.0).mul_(w)
            gd = coef.mul_(g[s:e, None]).masked_fill_(dead, 0.0)  # d loss / d d_ij (clamped costs: none)
            if dq is not None:
                dq[s:e] = -2.0 * (gd[:, :c] @ cands)
                if queue is not None:
                    dq[s:e] -= 2.0 * (gd[:, c:] @ queue)
            if dc is not None:
                dc.addmm_(gd[:, :c].T, q[s:e], alpha=-2.0)
        return dq, dc, None, None, None, None, None


def _cost_tile(q: Tensor, x: Tensor, excl: Tensor | None, t: float, s: int, e: int, work: list[Tensor],
               want_dead: bool = False) -> tuple[Tensor, Tensor, Tensor | None]:
    """(costs with the excluded entry 0, logits -t d with it -inf, and with ``want_dead`` where the cost was clamped
    at 0) of rows [s, e) against the columns x ([cands; queue]), in the two tile buffers ``work``."""
    a = q[s:e]
    raw = torch.mm(a, x.T, out=work[0][: e - s]).mul_(-2.0).add_(2.0)
    dead = raw <= 0 if want_dead else None
    d = raw.clamp_min_(0.0)
    logits = torch.mul(d, -t, out=work[1][: e - s])
    if excl is not None:
        k = torch.arange(e - s, device=a.device)
        logits[k, excl[s:e]] = float("-inf")
        d[k, excl[s:e]] = 0.0
    return d, logits, dead


def softmin_cost(q: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, t: float, detach: bool,
                 chunk: int, self_scale: float | None = None) -> tuple[Tensor, Tensor]:
    """(A,) R_i = -sum_j softmax_j(-t d_ij) d_ij over unit-vector costs to [cands; queue] (column ``excl[i]``
    of cands left out) and (A,) the weights' entropy (no gradient), in row tiles with a recomputing
    backward (CACR's repulsion; weights keep their gradient unless ``detach``). The queue gets no gradient.
    ``self_scale`` 1.0: the caller's word that ``q`` is ``cands`` (:func:`suite.losses.fused.soft_cost`)."""
    out = fused.attempt((q, cands, queue), fused.soft_cost, q, cands, queue, None if excl is None else excl[None], t,
                        detach, self_scale=self_scale)
    if out is not None:
        return out
    pin_malloc_threshold()
    return _SoftminCost.apply(q, cands, None if queue is None else queue.detach(), excl, float(t), bool(detach), chunk)


class _WeightedCross(torch.autograd.Function):
    """sum_i a_i . sum_c W_c[i] @ cands_c (+ W_q[i] @ queue) with weights W (no gradient) produced tile by tile
    by ``wfn(start, stop)`` (X-CLR's target-weighted logits). The output is one scalar, so the forward forms the whole
    gradient while it has each tile's weights at hand: the anchors' W @ cands (the mixes) and the candidates'
    W^T @ a; the backward only scales them (the weights are made once, not again for the backward)."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, queue: Tensor | None, wfn: Callable[[int, int], list[Tensor]], chunk: int,
                *cands: Tensor) -> Tensor:
        mix = torch.zeros_like(anchors)
        dcs = [torch.zeros_like(c) if need else None for c, need in zip(cands, ctx.needs_input_grad[4:])]
        for s, e in _spans(anchors.shape[0], chunk):
            ws = wfn(s, e)
            for w, c, dc in zip(ws, cands, dcs):
                mix[s:e] += w @ c
                if dc is not None:
                    dc.addmm_(w.T, anchors[s:e])
            if queue is not None and len(ws) > len(cands):
                mix[s:e] += ws[-1] @ queue
        ctx.save_for_backward(mix, *[dc for dc in dcs if dc is not None])
        ctx.wanted = [dc is not None for dc in dcs]
        return (anchors * mix).sum()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        mix, *kept = ctx.saved_tensors
        dcs = iter(kept)
        return (g * mix if ctx.needs_input_grad[0] else None, None, None, None,
                *[g * next(dcs) if wanted else None for wanted in ctx.wanted])


def weighted_cross(anchors: Tensor, cands: list[Tensor], queue: Tensor | None,
                   wfn: Callable[[int, int], list[Tensor]], chunk: int) -> Tensor:
    """Scalar sum_i a_i . (sum_c W_c[i] @ cands[c] + W_q[i] @ queue), the weights (no gradient) from
    ``wfn(start, stop)`` per row tile (one (rows, len(cands[c])) tensor per candidate set, then the queue's)."""
    pin_malloc_threshold()
    return _WeightedCross.apply(anchors, queue, wfn, chunk, *cands)
