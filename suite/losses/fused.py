"""Fused Triton kernels for the tiled path: each tile's similarities stay in registers, never in memory.

Every fused primitive is a row log-sum-exp of a kernel of the pairs. For anchors A (M, d) and columns
X = [candidates (C, d); queue (Q, d)], with s_ij = a_i . x_j and u_ij = ||a_i - x_j||^2 = |a_i|^2 - 2 s_ij + |x_j|^2:

    lse_i = log sum_{j not excluded} exp l_ij,   l_ij = f(s_ij or u_ij) (+ ``qoff`` on the queue's columns)

with the kernels (``mode``)

    "dot":     l = c1 s                           (the InfoNCE family: InfoNCE, MoCo, DCL, MACL, SupCon, X-CLR, CMC,
                                                   hard negatives; c1 a scale, or the anchors carry 1/tau)
    "negdist": l = -c1 sqrt(max(u, 1e-24))        (SimCLR with -l2 similarity, c1 = 1/tau)
    "cauchy":  l = -c1 log(1 + u / c2)            (t-SimCLR's normaliser, c1 = (nu + 1) / 2, c2 = tau nu)
    "linear":  l = -c1 u                          (the uniformity term, c1 = t)

and up to two excluded candidate columns per row (``excl`` (k, M): the anchor's own column, its positive).

Forward: one program per ``BLOCK_M`` rows runs over the columns in ``BLOCK_N`` tiles with a running maximum (the
online log-sum-exp of FlashAttention and Inf-CL). While it has each tile's softmax p at hand it also folds the
anchors' gradient into the same pass: O_i = sum_j p_ij w_ij x_j and r_i = sum_j p_ij w_ij with w = dl/d(s or u)
(1 for "dot"), rescaled as the maximum grows. Then d lse_i / d a_i = O_i ("dot") or 2 (r_i a_i - O_i) (distance
kernels), so the anchors' gradient costs no second pass. Backward: one program per ``BLOCK_N`` columns recomputes
its tiles against every row and sums dX_j = sum_i g_i p_ij w_ij a_i ("dot") or 2 (x_j R_j - that sum), R_j = sum_i
g_i p_ij w_ij. Four products per tile in all (the dense path: three, and an (M, C) matrix), no atomics: the result
is the same bit for bit from run to run.

Values (:func:`soft_mix`): the forward's accumulator sums p_ij v_j over values V (C, dv) given beside the columns,
and the backward's column sums take rows U (M, dv) in place of the anchors: an attention of the anchors on the
candidates' values (X-CLR's soft targets from its graph as embeddings), the weights constants, the values' gradient
one backward pass.

Costs (:func:`soft_cost`): the forward also sums p_ij s_ij, so each row's mean product sbar_i under its softmax comes
with its log-sum-exp (CACR's soft-min weighted cost 2 - 2 sbar_i). Its gradient weights p_ij (1 + c1 (s_ij - sbar_i))
need sbar_i, known only at a row's end, so the forward keeps no accumulator: the backward kernel takes the columns'
sums and a pass over rows (:func:`_self_bwd_kernel` without its column side) the anchors'.

The SimCLR arrangement (``self_scale``): where the anchors are a scalar multiple of the candidates themselves, A = k Z
(the views [z_a; z_b] / tau against [z_a; z_b]; t-SimCLR's and the uniformity's rows against their own points, k = 1)
and there is no queue, l_ij = l_ji up to the excluded columns, so both gradients come from one symmetric matrix:
dL/dz_k = k c1 sum_j W_kj z_j ("dot") or 2 (z_k R_k - sum_j W_kj z_j), W_kj = g_k p_kj w_kj + g_j p_jk w_jk, R_k =
sum_j W_kj. The forward then keeps only the row statistics (no O), and the backward is one program per ``BLOCK_M``
rows that recomputes its tiles and forms its rows' W: three products per tile where the general path takes four,
and no (M, d) accumulator kept from the forward. Still no atomics. The products are the candidates' own, z_i . z_j,
and k is applied in the kernels (``c1 k``), so l_ij and l_ji are the same number, as W needs.

Precision (``precision``): ``"fp32"`` (the default) computes every product as three TF32 tensor-core products
("3xTF32": each operand split into its TF32 part and the TF32 part of the remainder; the remainders' product, below
float32's rounding, left out), equal to the float64 reference within the suite's float32 tolerances. Triton's IEEE
float32 products (no tensor cores) were measured 40x slower on an H200 (120 ms against 2.7 ms at 2N = 8,192), so they
are not used. ``"tf32"`` and ``"bf16"`` are opt-in: the products' inputs rounded once to TF32 (10-bit mantissa) or
bfloat16 (7-bit), accumulated in float32, as Inf-CL computes. The log-sum-exp, the exponentials and all sums stay
float32 in every precision. Their error against float64 is measured in docs/design/losses.md. (Under Triton's
interpreter every product is a float32 one: the CPU tests check the kernels' logic, the GPU check their precision.)

Where it runs: float32 inputs with d <= :data:`MAX_DIM` on a CUDA device with Triton installed. Elsewhere (the CPU,
float64, wider embeddings) the tiled path of :mod:`suite.losses.tiling` runs as before. :func:`interpret` runs the
kernels on CPU tensors under Triton's interpreter (the tests); ``SUITE_FUSED=off`` (or :func:`use` ``"off"``)
keeps today's tiled path on a GPU too (the benchmarks' baseline); ``SUITE_FUSED=general`` the kernels without the
symmetric path.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import statistics
import sys
import warnings
from typing import Any, Iterator

import torch
from torch import Tensor

MODES = {"dot": 0, "negdist": 1, "cauchy": 2, "linear": 3}
PRECISIONS = ("fp32", "tf32", "bf16")
MAX_DIM = 256  # the widest embedding held in registers (a row block of the anchors, the output accumulator)
_EPS2 = 1e-24  # -l2 kernel's squared-distance floor, as suite.losses.simclr_l2

MODES_OF_USE = ("auto", "off", "interpret", "general")
_use: contextvars.ContextVar[str] = contextvars.ContextVar("suite_fused", default="")
_general: contextvars.ContextVar[bool] = contextvars.ContextVar("suite_fused_general", default=False)
_precision: contextvars.ContextVar[str] = contextvars.ContextVar("suite_fused_precision", default="fp32")


def check_precision(value: Any) -> str:
    if value not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return str(value)


@contextlib.contextmanager
def use(mode: str) -> Iterator[None]:
    """Within the block, the fused kernels run ``"auto"`` (CUDA with Triton: the default), ``"off"`` (never),
    ``"interpret"`` (on CPU tensors too, under Triton's interpreter) or ``"general"`` (as auto, without the symmetric
    path: the benchmarks' comparison)."""
    if mode not in MODES_OF_USE:
        raise ValueError(f"fused mode must be one of {', '.join(MODES_OF_USE)}, got {mode!r}")
    var, value = (_general, True) if mode == "general" else (_use, mode)  # general: within any other mode
    token = var.set(value)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        var.reset(token)  # type: ignore[attr-defined]


def interpret() -> contextlib.AbstractContextManager[None]:
    """The kernels on CPU tensors under Triton's interpreter (slow: small sizes only)."""
    return use("interpret")


@contextlib.contextmanager
def precision(value: str) -> Iterator[None]:
    """Products of the fused kernels in ``value`` within the block (a loss's ``precision`` setting)."""
    token = _precision.set(check_precision(value))
    try:
        yield
    finally:
        _precision.reset(token)


def _mode() -> str:
    mode = _use.get() or os.environ.get("SUITE_FUSED", "auto")
    return "auto" if mode == "general" else mode


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # an absent or broken Triton: the tiled path
        return False
    return True


_broken: list[str] = []  # why the kernels could not be built in this process (then the PyTorch tiles run)


def applies(*xs: Tensor | None) -> bool:
    """Whether the fused kernels take these inputs (float32, d <= MAX_DIM; CUDA with Triton, or the interpreter)."""
    mode = _mode()
    ts = [x for x in xs if x is not None]
    if mode == "off" or not ts or _broken:
        return False
    if not all(x.device.type == "cpu" if mode == "interpret" else x.is_cuda for x in ts):
        return False  # checked first: the CPU's tiled path never imports Triton
    if any(x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] > MAX_DIM for x in ts):
        return False
    return triton_available()


def _from_triton(exc: BaseException) -> bool:
    """Whether Triton raised ``exc``: an error of Triton's own (a compilation error, ptxas's) or one its driver raised
    as a plain ``RuntimeError`` (an old driver: "Triton Error [CUDA]: the provided PTX was compiled with an unsupported
    toolchain", "0 active drivers"), whose innermost frame is Triton's. A CUDA out-of-memory error is not (the tiles
    would meet it too), nor another built-in error (a bug of a kernel, under the interpreter)."""
    if type(exc).__module__.startswith("triton"):
        return True
    if not isinstance(exc, RuntimeError) or isinstance(exc, torch.cuda.OutOfMemoryError):
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("triton")


def attempt(inputs: tuple[Tensor | None, ...], fn: Any, *args: Any, **kwargs: Any) -> Tensor | None:
    """``fn(*args, **kwargs)`` where the kernels take ``inputs`` (:func:`applies`); None where they do not, or where
    Triton could not build or launch them on this device (an older GPU without TF32, a Triton that does not match the
    driver): then one warning naming Triton's error, and the PyTorch tiles for the rest of the process. The suite's own
    errors and the user's pass through."""
    if not applies(*inputs):
        return None
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if not _from_triton(exc):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        _broken.append(f"{type(exc).__name__}: {first}")
        warnings.warn(f"the fused loss kernels failed on this device ({_broken[-1]}); the PyTorch tiles run instead "
                      f"(SUITE_FUSED=off chooses them without trying)", RuntimeWarning, stacklevel=3)
        return None


def row_lse(anchors: Tensor, cands: Tensor, queue: Tensor | None = None, excl: Tensor | None = None, *,
            mode: str = "dot", c1: float = 1.0, c2: float = 1.0, qoff: float = 0.0,
            self_scale: float | Tensor | None = None) -> Tensor:
    """(M,) lse_i of the module docstring, with the exact gradient to the anchors, the candidates and the queue (each
    where it requires one). ``excl`` (k <= 2, M): candidate columns left out of row i. ``self_scale``: the caller's
    word that ``anchors`` is this multiple of ``cands`` (a float, or a tensor without gradient), computed from them in
    the autograd graph: then, without a queue, the symmetric path of the module docstring, whose backward gives the
    whole gradient to ``cands`` (the anchors' share included) and none to ``anchors``."""
    excl = _exclusions(excl)
    if self_scale is not None and not isinstance(self_scale, Tensor):
        self_scale = float(self_scale)  # an int too
    if _symmetric(anchors, cands, queue, mode, self_scale):
        return _FusedSelf.apply(anchors, cands, excl, MODES[mode], float(c1), float(c2), _precision.get(), self_scale)
    return _FusedRows.apply(anchors, cands, queue, excl, MODES[mode], float(c1), float(c2), float(qoff),
                            _precision.get())


def row_lse_scales(anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, scales: tuple[float, ...],
                   *, self_scale: float | Tensor | None = None) -> list[Tensor]:
    """For each k of ``scales``, :func:`row_lse` of the "dot" kernel at c1 = k (hard negatives' beta and 1 + beta).
    Two scales on the symmetric path share their kernels: the forward forms both rows' log-sum-exps from one product
    per tile, and the backward one W = k_1 W_1 + k_2 W_2, three products per tile where two calls take six."""
    excl = _exclusions(excl)
    if self_scale is not None and not isinstance(self_scale, Tensor):
        self_scale = float(self_scale)
    if len(scales) == 2 and _symmetric(anchors, cands, queue, "dot", self_scale):
        return list(_FusedSelfTwo.apply(anchors, cands, excl, float(scales[0]), float(scales[1]), _precision.get(),
                                        self_scale))
    return [row_lse(anchors, cands, queue, excl, c1=k, self_scale=self_scale) for k in scales]


class _FusedSelfTwo(torch.autograd.Function):
    """:class:`_FusedSelf` at two scales of the same products ("dot"): (lse at c1, lse at c2)."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, ex: Tensor | None, c1: float, c2: float, prec: str,
                k: float | Tensor) -> tuple[Tensor, Tensor]:
        x = cands.contiguous()
        ks = None if isinstance(k, float) else k.detach().reshape(1).to(torch.float32)
        ca, cb = (c1 * k, c2 * k) if ks is None else (c1, c2)
        lse, _, lse2 = _forward(x, x, x.shape[0], ex, 0, ca, cb, 0.0, prec, False, ks, two=True)
        ctx.save_for_backward(x, ex, lse, lse2, ks)
        ctx.args = (ca, cb, prec)
        return lse, lse2

    @staticmethod
    def backward(ctx: Any, g: Tensor, g2: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, ex, lse, lse2, ks = ctx.saved_tensors
        ca, cb, prec = ctx.args
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return (None,) * 7
        dz = _row_backward(x, x, x.shape[0], ex, lse, g.contiguous(), 0, ca, cb, prec, ks, sym=True,
                           second=(lse2, g2.contiguous()))  # the scales applied in the kernel
        return None, dz, None, None, None, None, None


def row_lse_pair(z_a: Tensor, z_b: Tensor, excl: Tensor | None = None, *, c1: float = 1.0,
                 scale: float | Tensor = 1.0) -> tuple[Tensor, Tensor]:
    """Both directions of two sets of rows ("dot", no queue; CMC's view pairs, InfoNCE's "cross" arrangement on one
    rank): ((N_a,) lse^a, (N_b,) lse^b) with lse^a_i = log sum_j exp(c1 k a_i . b_j) and lse^b_j = log sum_i exp(c1 k
    b_j . a_i), row i of either side leaving out the columns ``excl[:, i]`` (k <= 2), k = ``scale`` (a float, or a
    tensor without gradient read on the device). The pair path: a forward per side keeps only its rows' statistics
    (one product per tile), and each side's gradient is one pass over its rows with W_ij = g^a_i p^a_ij + g^b_j
    p^b_ji from one recomputed tile (the products a_i . b_j serve both sides): six products per tile pair where two
    calls of :func:`row_lse` take eight, and no (N, d) accumulator kept from the forward. A scale that wants a
    gradient, or ``use("general")``: two calls of :func:`row_lse`."""
    excl = _exclusions(excl)
    if _pairwise(z_a, z_b, scale):
        return _FusedPair.apply(z_a, z_b, excl, float(c1), _precision.get(),
                                scale if isinstance(scale, Tensor) else float(scale))
    if isinstance(scale, Tensor):
        return row_lse(z_a * scale, z_b, None, excl, c1=c1), row_lse(z_b * scale, z_a, None, excl, c1=c1)
    c = float(c1) * float(scale)
    return row_lse(z_a, z_b, None, excl, c1=c), row_lse(z_b, z_a, None, excl, c1=c)


def _pairwise(z_a: Tensor, z_b: Tensor, k: float | Tensor) -> bool:
    """Whether :func:`row_lse_pair` takes the pair path: the same shapes, ``k`` without a gradient (a tensor on the
    rows' device), not ``use("general")``."""
    if z_a.shape != z_b.shape or _general.get() or os.environ.get("SUITE_FUSED") == "general":
        return False
    return not isinstance(k, Tensor) or not (k.requires_grad or k.numel() != 1 or k.device != z_b.device)


class _FusedPair(torch.autograd.Function):
    """:func:`row_lse_pair`'s pair path."""

    @staticmethod
    def forward(ctx: Any, z_a: Tensor, z_b: Tensor, ex: Tensor | None, c1: float, prec: str,
                k: float | Tensor) -> tuple[Tensor, Tensor]:
        a, b = z_a.contiguous(), z_b.contiguous()
        c, ks = (c1 * k, None) if isinstance(k, float) else (c1, k.detach().reshape(1).to(torch.float32))
        lse_a = _forward(a, b, b.shape[0], ex, 0, c, 1.0, 0.0, prec, False, ks)[0]
        lse_b = _forward(b, a, a.shape[0], ex, 0, c, 1.0, 0.0, prec, False, ks)[0]
        ctx.save_for_backward(a, b, ex, lse_a, lse_b, ks)
        ctx.args = (c, prec)
        return lse_a, lse_b

    @staticmethod
    def backward(ctx: Any, g_a: Tensor, g_b: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        a, b, ex, lse_a, lse_b, ks = ctx.saved_tensors
        c, prec = ctx.args
        g_a, g_b = g_a.contiguous(), g_b.contiguous()
        grads: list[Tensor | None] = []
        for need, (x, y, lx, ly, gx, gy) in zip(ctx.needs_input_grad[:2], ((a, b, lse_a, lse_b, g_a, g_b),
                                                                          (b, a, lse_b, lse_a, g_b, g_a))):
            dx = None
            if need:  # this side's rows: their own softmax, and the other side's columns through the same tile
                dx = _row_backward(x, y, y.shape[0], ex, lx, gx, 0, c, 1.0, prec, ks, sym=True, other=(ex, ly, gy))
                dx.mul_(c)
                if ks is not None:
                    dx.mul_(ks)
            grads.append(dx)
        return (*grads, None, None, None, None)


def pair_lse(e: Tensor, queue: Tensor | None, *, mode: str, c1: float, c2: float = 1.0) -> Tensor:
    """Scalar log( sum_{j != k} exp l(e_j, e_k) + 2 sum_{j, m} exp l(e_j, q_m) ): the log-sum-exp over the rows of
    :func:`row_lse` of ``e`` against itself (own column left out) and the queue (log 2 added, no gradient)."""
    self_col = torch.arange(e.shape[0], device=e.device)[None]
    rows = row_lse(e, e, None if queue is None else queue.detach(), self_col, mode=mode, c1=c1, c2=c2,
                   qoff=math.log(2.0), self_scale=1.0)
    return torch.logsumexp(rows, 0)


def row_lse_sum(anchors: Tensor, cands: list[Tensor], queue: Tensor | None = None, *, mode: str = "dot",
                c1: float = 1.0, c2: float = 1.0) -> Tensor:
    """Scalar sum_b sum_i lse_i of :func:`row_lse` of ``anchors`` against each ``cands[b]`` (and the queue), with the
    exact gradient. The rows are summed with equal weights, so one accumulator O = sum_b O_b carries the anchors'
    gradient for every b: memory (M + sum_b C_b) d where B calls of :func:`row_lse` keep B (M, d) accumulators
    (CMC's V (V - 1) ordered view pairs keep V of them, not V (V - 1))."""
    return _FusedRowSums.apply(anchors, queue, MODES[mode], float(c1), float(c2), _precision.get(), *cands)


def soft_cost(anchors: Tensor, cands: Tensor, queue: Tensor | None, excl: Tensor | None, t: float, detach: bool, *,
              self_scale: float | None = None) -> tuple[Tensor, Tensor]:
    """CACR's repulsion rows over unit vectors: ((M,) -D_i, (M,) the weights' entropy H_i, no gradient), with costs
    d_ij = 2 - 2 s_ij to the columns j = [cands; queue] not excluded (``excl`` (k <= 2, M)), weights w_ij =
    softmax_j(-t d_ij) = softmax_j(2 t s_ij) and D_i = sum_j w_ij d_ij = 2 - 2 sbar_i. The forward keeps the rows'
    log-sum-exp of 2 t s and sbar (its accumulator: the rows' mean products); H_i = lse_i - 2 t sbar_i. The gradient
    (to the anchors and the candidates; the queue gets none): d(-D_i)/d s_ij = 2 w_ij (1 + 2 t (s_ij - sbar_i)), the
    weights keeping theirs, or 2 w_ij with ``detach``. The columns' sums by the backward kernel, the anchors' by a
    pass over rows; ``self_scale`` 1.0 (anchors that are the candidates, no queue): one symmetric pass for both."""
    excl = _exclusions(excl)
    if queue is not None:
        queue = queue.detach()
    sym = self_scale == 1.0 and _symmetric(anchors, cands, queue, "dot", 1.0)
    return _FusedCost.apply(anchors, cands, queue, excl, 2.0 * float(t), bool(detach), _precision.get(), sym)


class _FusedCost(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, ex: Tensor | None, c1: float,
                detach: bool, prec: str, sym: bool) -> tuple[Tensor, Tensor]:
        a = cands.contiguous() if sym else anchors.contiguous()
        x = cands.contiguous() if queue is None else torch.cat([cands, queue]).contiguous()
        lse, _, sbar = _forward(a, x, cands.shape[0], ex, 0, c1, 1.0, 0.0, prec, False, cost=True)
        ctx.save_for_backward(a, x, ex, lse, sbar)
        ctx.args = (cands.shape[0], c1, 2 if detach else 1, prec, sym)
        ent = lse - c1 * sbar
        ctx.mark_non_differentiable(ent)
        return 2.0 * sbar - 2.0, ent

    @staticmethod
    def backward(ctx: Any, g: Tensor, _: Tensor | None) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        a, x, ex, lse, sbar = ctx.saved_tensors
        n_c, c1, cost, prec, sym = ctx.args
        g2 = (2.0 * g).contiguous()  # d(-D_i) / d sbar_i
        da = dc = None
        if sym:  # the whole gradient to the candidates (the anchors are they)
            if ctx.needs_input_grad[1]:
                dc = _row_backward(x, x, n_c, ex, lse, g2, 0, c1, 1.0, prec, sb=sbar, cost=cost, sym=True)
        else:
            if ctx.needs_input_grad[0]:
                da = _row_backward(a, x, n_c, ex, lse, g2, 0, c1, 1.0, prec, sb=sbar, cost=cost)
            if ctx.needs_input_grad[1]:
                dc = _backward(a, x, n_c, n_c, ex, lse, g2, 0, c1, 1.0, 0.0, prec, sb=sbar, cost=cost)[:n_c]
        return da, dc, None, None, None, None, None, None


def _exclusions(excl: Tensor | None) -> Tensor | None:
    """The (k <= 2, M) excluded columns as the kernels read them (int64, contiguous); more than two refused."""
    if excl is None:
        return None
    if excl.shape[0] > 2:
        raise ValueError(f"at most 2 excluded columns per row, got {excl.shape[0]}")
    return excl.to(torch.int64).contiguous()


def soft_mix(anchors: Tensor, cands: Tensor, values: Tensor, excl: Tensor | None = None, *,
             c1: float = 1.0) -> tuple[Tensor, Tensor]:
    """Attention of the anchors on the candidates' values: (lse (M,), O (M, dv)) with lse_i = log sum_j exp(c1 a_i .
    x_j) and O_i = sum_j softmax_j(c1 a_i . x_j) v_j over the columns j not excluded (``excl`` (k <= 2, M)), the
    (M, C) weights never in memory. The gradient reaches ``values`` only: dV_j = sum_i p_ij dO_i, one pass of the
    backward kernel with dO in place of the anchors (the weights are targets: X-CLR's soft targets from its graph
    as embeddings). ``anchors`` and ``cands`` are taken as constants; ``lse`` has no gradient."""
    excl = _exclusions(excl)
    if values.shape[0] != cands.shape[0]:
        raise ValueError(f"values must have one row per candidate ({cands.shape[0]}), got {values.shape[0]}")
    return _FusedMix.apply(anchors.detach(), cands.detach(), values, excl, float(c1), _precision.get())


class _FusedMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, values: Tensor, ex: Tensor | None, c1: float,
                prec: str) -> tuple[Tensor, Tensor]:
        a, x, v = anchors.contiguous(), cands.contiguous(), values.contiguous()
        lse, o, _ = _forward(a, x, x.shape[0], ex, 0, c1, 1.0, 0.0, prec, True, v=v)
        ctx.save_for_backward(a, x, ex, lse)
        ctx.args = (c1, prec)
        ctx.mark_non_differentiable(lse)
        return lse, o

    @staticmethod
    def backward(ctx: Any, _: Tensor, g_o: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        a, x, ex, lse = ctx.saved_tensors
        c1, prec = ctx.args
        dv = None
        if ctx.needs_input_grad[2]:
            rows = torch.ones_like(lse)  # each row's weight: dO_i carries it
            dv = _backward(a, x, x.shape[0], x.shape[0], ex, lse, rows, 0, c1, 1.0, 0.0, prec, u=g_o.contiguous())
        return None, None, dv, None, None, None


def _symmetric(anchors: Tensor, cands: Tensor, queue: Tensor | None, mode: str, k: float | Tensor | None) -> bool:
    """Whether ``anchors = k cands`` takes the symmetric path: no queue, the same shape, ``k`` without a gradient, and
    for the distance kernels k = 1 (the distances of k z to z are not symmetric); the gradient then reaches the
    anchors through the candidates, so ``cands`` must want one wherever ``anchors`` does."""
    if k is None or queue is not None or anchors.shape != cands.shape:
        return False
    if _general.get() or os.environ.get("SUITE_FUSED") == "general":  # the benchmarks' comparison
        return False
    if isinstance(k, Tensor) and (k.requires_grad or k.numel() != 1 or k.device != cands.device):
        return False  # a tensor k is read by the kernels on the candidates' device
    if mode != "dot" and not (isinstance(k, float) and k == 1.0):
        return False
    return cands.requires_grad or not anchors.requires_grad


class _FusedSelf(torch.autograd.Function):
    """:func:`row_lse` of anchors ``k`` cands against cands: the symmetric path of the module docstring."""

    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, ex: Tensor | None, mode: int, c1: float, c2: float,
                prec: str, k: float | Tensor) -> Tensor:
        # The products are the candidates' own, z_i . z_j, scaled in the kernels by c = c1 k: the same value for
        # (i, j) and (j, i), as W needs (with the anchors' rounded copy k z, l_ij and l_ji differ by k c1 eps: 1e-4
        # at tau = 0.001). k a tensor: read by the kernels from the device (``ks``), no host read.
        x = cands.contiguous()
        c, ks = (c1 * k, None) if isinstance(k, float) else (c1, k.detach().reshape(1).to(torch.float32))
        lse, _, _ = _forward(x, x, x.shape[0], ex, mode, c, c2, 0.0, prec, False, ks)
        ctx.save_for_backward(x, ex, lse, ks)
        ctx.args = (mode, c, c2, prec)
        return lse

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, ex, lse, ks = ctx.saved_tensors
        mode, c, c2, prec = ctx.args
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return (None,) * 8
        dz = _row_backward(x, x, x.shape[0], ex, lse, g.contiguous(), mode, c, c2, prec, ks, sym=True)
        if mode == 0:
            dz.mul_(c)
            if ks is not None:
                dz.mul_(ks)
        return None, dz, None, None, None, None, None, None


class _FusedRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchors: Tensor, cands: Tensor, queue: Tensor | None, ex: Tensor | None, mode: int,
                c1: float, c2: float, qoff: float, prec: str) -> Tensor:
        a = anchors.contiguous()
        x = cands.contiguous() if queue is None else torch.cat([cands, queue]).contiguous()
        want_o = ctx.needs_input_grad[0]
        lse, o, r = _forward(a, x, cands.shape[0], ex, mode, c1, c2, qoff, prec, want_o)
        ctx.save_for_backward(a, x, ex, lse, o, r)
        ctx.args = (cands.shape[0], mode, c1, c2, qoff, prec, queue is not None)
        return lse

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        a, x, ex, lse, o, r = ctx.saved_tensors
        n_c, mode, c1, c2, qoff, prec, has_q = ctx.args
        need_a, need_c, need_q = ctx.needs_input_grad[:3]
        need_q = need_q and has_q
        g = g.contiguous()
        da = None
        if need_a:
            da = (c1 * g)[:, None] * o if mode == 0 else 2.0 * g[:, None] * (r[:, None] * a - o)
        dc = dq = None
        if need_c or need_q:
            n_grad = x.shape[0] if need_q else n_c  # the queue's columns only where it wants a gradient
            dx = _backward(a, x, n_c, n_grad, ex, lse, g, mode, c1, c2, qoff, prec)
            if mode == 0 and c1 != 1.0:
                dx.mul_(c1)
            dc = dx[:n_c] if need_c else None
            dq = dx[n_c:] if need_q else None
        return da, dc, dq, None, None, None, None, None, None


class _FusedRowSums(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, anchors: Tensor, queue: Tensor | None, mode: int, c1: float, c2: float, prec: str,
                *cands: Tensor) -> Tensor:
        a = anchors.contiguous()
        want_o = ctx.needs_input_grad[0]
        o_sum = r_sum = None
        lses = []
        for c in cands:  # the columns of each b in turn: its (C_b + Q, d) copy only while it is used
            x = c.contiguous() if queue is None else torch.cat([c, queue]).contiguous()
            lse, o, r = _forward(a, x, c.shape[0], None, mode, c1, c2, 0.0, prec, want_o)
            lses.append(lse)
            o_sum, r_sum = (o, r) if o_sum is None or not want_o else (o_sum.add_(o), r_sum.add_(r))
        ctx.save_for_backward(a, queue, o_sum, r_sum, *lses, *cands)
        ctx.args = (mode, c1, c2, prec, len(cands))
        return torch.stack([lse.sum() for lse in lses]).sum()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        a, queue, o, r, *rest = ctx.saved_tensors
        mode, c1, c2, prec, n_b = ctx.args
        lses, cands = rest[:n_b], rest[n_b:]
        need_q = ctx.needs_input_grad[1] and queue is not None
        da = None
        if ctx.needs_input_grad[0]:
            da = (c1 * g) * o if mode == 0 else 2.0 * g * (r[:, None] * a - o)
        rows = g.reshape(1).expand(a.shape[0]).contiguous()  # every row's incoming gradient: the scalar's
        dq = torch.zeros_like(queue) if need_q else None
        dcs: list[Tensor | None] = []
        for c, lse, need_c in zip(cands, lses, ctx.needs_input_grad[6:]):
            if not (need_c or need_q):
                dcs.append(None)
                continue
            x = c.contiguous() if queue is None else torch.cat([c, queue]).contiguous()
            n_c = c.shape[0]
            dx = _backward(a, x, n_c, x.shape[0] if need_q else n_c, None, lse, rows, mode, c1, c2, 0.0, prec)
            if mode == 0 and c1 != 1.0:
                dx.mul_(c1)
            dcs.append(dx[:n_c] if need_c else None)
            if dq is not None:
                dq += dx[n_c:]
        return (da, dq, None, None, None, None, *dcs)


def _norms(mode: int, *xs: Tensor) -> list[Tensor]:
    return [(x * x).sum(1) if mode else x[:, 0] for x in xs]  # unused by "dot" (any float32 pointer)


def _launch_args(prec: str, d: int, interpreted: bool) -> dict[str, Any]:
    import triton

    return {"BD": max(16, triton.next_power_of_2(d)),
            "PREC": "tf32x3" if prec == "fp32" else "tf32",  # (not used by bf16 operands)
            "BF16": 0 if prec != "bf16" else 2 if interpreted else 1}


def _forward(a: Tensor, x: Tensor, n_c: int, ex: Tensor | None, mode: int, c1: float, c2: float, qoff: float,
             prec: str, want_o: bool, ks: Tensor | None = None, v: Tensor | None = None, cost: bool = False,
             two: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    import triton

    m, d = a.shape
    lse = torch.empty(m, dtype=torch.float32, device=a.device)
    dv = d if v is None else v.shape[1]
    o = torch.empty((m, dv) if want_o else (1, 1), dtype=torch.float32, device=a.device)
    r = torch.empty(m if want_o and mode or cost or two else 1, dtype=torch.float32, device=a.device)
    na, nx = _norms(mode, a, x)
    fwd = _kernels(a.device.type == "cpu")[0]
    grid = lambda meta: (triton.cdiv(m, meta["BM"]),)  # noqa: E731
    fwd[grid](a, x, na, nx, lse if ex is None else ex, lse, o, r, lse if ks is None else ks, lse if v is None else v,
              m, x.shape[0], n_c, d, dv, c1, c2, qoff, _size_class(m), MODE=mode,
              K_EXCL=0 if ex is None else ex.shape[0],
              WANT_O=want_o, HAS_Q=x.shape[0] > n_c, HAS_KS=ks is not None, HAS_V=v is not None, COST=cost,
              TWO=two, **_value_width(dv),
              **_launch_args(prec, d, a.device.type == "cpu"), **_fixed(a))
    return lse, o, r


def _backward(a: Tensor, x: Tensor, n_c: int, n_grad: int, ex: Tensor | None, lse: Tensor, g: Tensor, mode: int,
              c1: float, c2: float, qoff: float, prec: str, u: Tensor | None = None, sb: Tensor | None = None,
              cost: int = 0) -> Tensor:
    import triton

    m, d = a.shape
    dv = d if u is None else u.shape[1]
    dx = torch.zeros((x.shape[0], dv), dtype=x.dtype, device=x.device)  # columns past n_grad (a queue without
    # gradient) stay 0
    na, nx = _norms(mode, a, x)
    bwd = _kernels(a.device.type == "cpu")[1]
    grid = lambda meta: (triton.cdiv(n_grad, meta["BN"]),)  # noqa: E731
    bwd[grid](a, x, na, nx, lse if ex is None else ex, lse, g, lse if sb is None else sb, dx, lse if u is None else u,
              m, n_grad, n_c, d, dv, c1, c2, qoff, _size_class(n_grad), MODE=mode,
              K_EXCL=0 if ex is None else ex.shape[0],
              HAS_Q=x.shape[0] > n_c, HAS_U=u is not None, COST=cost, **_value_width(dv),
              **_launch_args(prec, d, a.device.type == "cpu"), **_fixed(a))
    return dx


def _row_backward(a: Tensor, x: Tensor, n_c: int, ex: Tensor | None, lse: Tensor, g: Tensor, mode: int, c1: float,
                  c2: float, prec: str, ks: Tensor | None = None, sb: Tensor | None = None, cost: int = 0,
                  sym: bool = False, second: tuple[Tensor, Tensor] | None = None,
                  other: tuple[Tensor | None, Tensor, Tensor] | None = None) -> Tensor:
    """A gradient by rows (:func:`_self_bwd_kernel`): the symmetric path's (``sym``: ``a`` is ``x``; with ``other``,
    the columns' own (exclusions, lse, g) against ``a``, the pair path's), or the anchors' of :func:`soft_cost`'s
    general path ("dot" only: the kernel reads the rows' norms from the columns')."""
    import triton

    if (not sym or other is not None) and mode != 0:
        raise ValueError("a gradient by rows of anchors that are not the columns takes the 'dot' kernel only")
    if other is not None and (sb is not None or second is not None):
        raise ValueError("the pair path takes no costs and one scale")
    m, d = a.shape
    da = torch.empty_like(a)
    nx = _norms(mode, x)[0]
    kernel = _kernels(a.device.type == "cpu")[2]
    grid = lambda meta: (triton.cdiv(m, meta["BM"]),)  # noqa: E731
    l2, g2 = second if second is not None else (lse, lse)
    ex_c, lse_c, g_c = other if other is not None else (ex, lse, g)
    kernel[grid](a, x, nx, lse if ex is None else ex, lse, g, lse if ex_c is None else ex_c, lse_c, g_c,
                 lse if ks is None else ks, lse if sb is None else sb, l2, g2, da, m, x.shape[0], n_c, d, c1, c2, 0.0,
                 _size_class(m), MODE=mode, K_EXCL=0 if ex is None else ex.shape[0],
                 HAS_KS=ks is not None, SYM=sym, HAS_Q=x.shape[0] > n_c, COST=cost, TWO=second is not None,
                 **_launch_args(prec, d, a.device.type == "cpu"), **_fixed(a))
    return da


def _value_width(dv: int) -> dict[str, int]:
    import triton

    return {"BDV": max(16, triton.next_power_of_2(dv))}


def _fixed(a: Tensor) -> dict[str, int]:
    """Block sizes under the interpreter (small, fast to interpret); on a GPU the autotuner picks them."""
    return {"BM": 16, "BN": 16} if a.device.type == "cpu" else {}


tl: Any = None  # triton.language, imported with the kernels (the module imports without Triton)


def _logits(s, na, nx, rmask, cmask, cols, n_c, c1, c2, qoff, e0, e1, MODE: tl.constexpr, K_EXCL: tl.constexpr,
            HAS_Q: tl.constexpr):  # pragma: no cover (traced by Triton)
    """(logits with -inf where left out, w = dl/d(s or u), valid) of a tile: shared by both kernels."""
    if MODE == 0:
        logit = c1 * s  # c1: a scale (1/tau) the anchors need not carry (no scaled copy of them)
        w = s  # unused
    else:
        u_raw = na[:, None] + nx[None, :] - 2.0 * s
        if MODE == 1:
            uu = tl.maximum(u_raw, 1e-24)
            root = tl.sqrt(uu)
            logit = -c1 * root
            w = tl.where(u_raw >= 1e-24, -0.5 * c1 / root, 0.0)
        elif MODE == 2:
            u = tl.maximum(u_raw, 0.0)
            logit = -c1 * tl.log(1.0 + u / c2)
            w = tl.where(u_raw > 0.0, -c1 / (c2 + u), 0.0)
        else:
            u = tl.maximum(u_raw, 0.0)
            logit = -c1 * u
            w = tl.where(u_raw > 0.0, -c1 + 0.0 * u, 0.0)
    if HAS_Q:
        logit = tl.where(cols[None, :] >= n_c, logit + qoff, logit)
    valid = rmask[:, None] & cmask[None, :]
    if K_EXCL >= 1:
        valid = valid & (cols[None, :] != e0[:, None])
    if K_EXCL >= 2:
        valid = valid & (cols[None, :] != e1[:, None])
    return tl.where(valid, logit, float("-inf")), w, valid


def _mm_input(t, BF16: tl.constexpr):  # pragma: no cover (traced by Triton)
    """A product's input: as it is, in bfloat16 (``BF16`` 1: the tensor cores), or rounded to bfloat16 and kept in
    float32 (2: the same products, for Triton's interpreter, whose bfloat16 products are wrong)."""
    out = t
    if BF16 == 1:
        out = t.to(tl.bfloat16)
    elif BF16 == 2:
        out = t.to(tl.bfloat16).to(tl.float32)
    return out


def _row_block(P, NP, E, rows, M, D, MODE: tl.constexpr, K_EXCL: tl.constexpr, BF16: tl.constexpr,
               BM: tl.constexpr, BD: tl.constexpr):  # pragma: no cover (traced by Triton)
    """A block of rows: (mask, the embeddings, as the products take them, their squared norms (distance kernels) and
    their excluded columns), shared by the three kernels."""
    rmask = rows < M
    offs_d = tl.arange(0, BD)
    a = tl.load(P + rows[:, None] * D + offs_d[None, :], mask=rmask[:, None] & (offs_d < D)[None, :], other=0.0)
    na = tl.load(NP + rows, mask=rmask, other=0.0) if MODE != 0 else tl.zeros([BM], tl.float32)
    e0 = tl.load(E + rows, mask=rmask, other=-1) if K_EXCL >= 1 else rows
    e1 = tl.load(E + M + rows, mask=rmask, other=-1) if K_EXCL >= 2 else rows
    return rmask, a, _bf16(a, BF16), na, e0, e1


def _fwd_kernel(A, X, NA, NX, E, LSE, O, R, KS, V, M, C, n_c, D, DV, c1, c2, qoff, SZ,  # pragma: no cover (traced)
                MODE: tl.constexpr, K_EXCL: tl.constexpr, WANT_O: tl.constexpr, HAS_Q: tl.constexpr,
                HAS_KS: tl.constexpr, HAS_V: tl.constexpr, COST: tl.constexpr, TWO: tl.constexpr,
                PREC: tl.constexpr, BF16: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr,
                BDV: tl.constexpr):
    """Row statistics; with ``HAS_V`` the accumulator O sums p_ij v_j over the columns' values V (C, DV) instead of
    their embeddings (:func:`soft_mix`; BDV, DV: V's width, else BD, D); with ``COST`` ("dot") R holds the rows' mean
    products under their softmax, sbar_i = sum_j p_ij s_ij (:func:`soft_cost`); with ``TWO`` ("dot", no queue) R holds
    the rows' log-sum-exps at a second scale c2 of the same products (:func:`row_lse_scales`)."""
    if HAS_KS:
        c1 = c1 * tl.load(KS)  # the scale's device factor (the symmetric path's tensor k)
        if TWO:
            c2 = c2 * tl.load(KS)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    rmask, a, a_mm, na, e0, e1 = _row_block_jit(A, NA, E, rows, M, D, MODE, K_EXCL, BF16, BM, BD)
    offs_d = tl.arange(0, BD)
    dmask = offs_d < D
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    r_i = tl.zeros([BM], tl.float32)
    m2_i = tl.full([BM], float("-inf"), tl.float32)
    offs_v = tl.arange(0, BDV)
    vmask = offs_v < DV
    acc = tl.zeros([BM, BDV], tl.float32)
    for start in range(0, C, BN):
        cols = start + tl.arange(0, BN)
        cmask = cols < C
        x = tl.load(X + cols[:, None] * D + offs_d[None, :], mask=cmask[:, None] & dmask[None, :], other=0.0)
        x_mm = _bf16(x, BF16)
        s = tl.dot(a_mm, tl.trans(x_mm), input_precision=PREC, out_dtype=tl.float32)
        nx = tl.load(NX + cols, mask=cmask, other=0.0) if MODE != 0 else tl.zeros([BN], tl.float32)
        logit, w, valid = _logits_jit(s, na, nx, rmask, cmask, cols, n_c, c1, c2, qoff, e0, e1, MODE, K_EXCL, HAS_Q)
        m_new = tl.maximum(m_i, tl.max(logit, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing seen yet: no nan
        alpha = tl.exp(m_i - shift)
        p = tl.where(valid, tl.exp(logit - shift[:, None]), 0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        if TWO:  # r_i: the second scale's sum, with its own running maximum
            logit2 = tl.where(valid, c2 * s, float("-inf"))
            m2_new = tl.maximum(m2_i, tl.max(logit2, 1))
            shift2 = tl.where(m2_new == float("-inf"), 0.0, m2_new)
            r_i = r_i * tl.exp(m2_i - shift2) + tl.sum(tl.where(valid, tl.exp(logit2 - shift2[:, None]), 0.0), 1)
            m2_i = m2_new
        if COST:
            r_i = r_i * alpha + tl.sum(p * s, 1)
        if WANT_O:
            pw = p if MODE == 0 else p * w
            if MODE != 0:
                r_i = r_i * alpha + tl.sum(pw, 1)
            pw_mm = _bf16(pw, BF16)
            if HAS_V:
                v = tl.load(V + cols[:, None] * DV + offs_v[None, :], mask=cmask[:, None] & vmask[None, :], other=0.0)
                acc = acc * alpha[:, None] + tl.dot(pw_mm, _bf16(v, BF16), input_precision=PREC, out_dtype=tl.float32)
            else:
                acc = acc * alpha[:, None] + tl.dot(pw_mm, x_mm, input_precision=PREC, out_dtype=tl.float32)
        m_i = m_new
    tl.store(LSE + rows, m_i + tl.log(l_i), mask=rmask)  # -inf for a row with every column left out
    if WANT_O:
        inv = tl.where(l_i > 0.0, 1.0 / l_i, 0.0)
        tl.store(O + rows[:, None] * DV + offs_v[None, :], acc * inv[:, None], mask=rmask[:, None] & vmask[None, :])
        if MODE != 0:
            tl.store(R + rows, r_i * inv, mask=rmask)
    if COST:
        tl.store(R + rows, r_i * tl.where(l_i > 0.0, 1.0 / l_i, 0.0), mask=rmask)
    if TWO:
        tl.store(R + rows, m2_i + tl.log(r_i), mask=rmask)


def _bwd_kernel(A, X, NA, NX, E, LSE, G, SB, DX, U, M, n_grad, n_c, D, DV, c1, c2, qoff, SZ,  # pragma: no cover
                MODE: tl.constexpr, K_EXCL: tl.constexpr, HAS_Q: tl.constexpr, HAS_U: tl.constexpr,
                COST: tl.constexpr, PREC: tl.constexpr, BF16: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BD: tl.constexpr, BDV: tl.constexpr):
    """Columns' sums; with ``HAS_U`` ("dot" only) dX_j sums g_i p_ij u_i over rows U (M, DV) instead of the anchors
    (:func:`soft_mix`'s values gradient; BDV, DV: U's width, else BD, D); with ``COST`` ("dot") the weights of the
    rows' mean products sbar_i (SB): g_i d sbar_i / d s_ij = g_i p_ij (1 + c1 (s_ij - sbar_i)) (1), or g_i p_ij with
    the weights held constant (2)."""
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    cmask = cols < n_grad
    offs_d = tl.arange(0, BD)
    dmask = offs_d < D
    x = tl.load(X + cols[:, None] * D + offs_d[None, :], mask=cmask[:, None] & dmask[None, :], other=0.0)
    x_mm = _bf16(x, BF16)
    nx = tl.load(NX + cols, mask=cmask, other=0.0) if MODE != 0 else tl.zeros([BN], tl.float32)
    offs_v = tl.arange(0, BDV)
    vmask = offs_v < DV
    dx = tl.zeros([BN, BDV], tl.float32)
    rsum = tl.zeros([BN], tl.float32)
    for start in range(0, M, BM):
        rows = start + tl.arange(0, BM)
        rmask, a, a_mm, na, e0, e1 = _row_block_jit(A, NA, E, rows, M, D, MODE, K_EXCL, BF16, BM, BD)
        lse = tl.load(LSE + rows, mask=rmask, other=0.0)
        g = tl.load(G + rows, mask=rmask, other=0.0)
        s = tl.dot(a_mm, tl.trans(x_mm), input_precision=PREC, out_dtype=tl.float32)
        logit, w, valid = _logits_jit(s, na, nx, rmask, cmask, cols, n_c, c1, c2, qoff, e0, e1, MODE, K_EXCL, HAS_Q)
        p = tl.where(valid, tl.exp(logit - lse[:, None]), 0.0) * g[:, None]
        if COST == 1:
            p = p * (1.0 + c1 * (s - tl.load(SB + rows, mask=rmask, other=0.0)[:, None]))
        if MODE != 0:
            p = p * w
            rsum += tl.sum(p, 0)
        p_mm = _bf16(p, BF16)
        if HAS_U:
            u = tl.load(U + rows[:, None] * DV + offs_v[None, :], mask=rmask[:, None] & vmask[None, :], other=0.0)
            dx += tl.dot(tl.trans(p_mm), _bf16(u, BF16), input_precision=PREC, out_dtype=tl.float32)
        else:
            dx += tl.dot(tl.trans(p_mm), a_mm, input_precision=PREC, out_dtype=tl.float32)
    if MODE != 0:
        dx = 2.0 * (x * rsum[:, None] - dx)
    tl.store(DX + cols[:, None] * DV + offs_v[None, :], dx, mask=cmask[:, None] & vmask[None, :])


def _self_bwd_kernel(A, X, NX, E, LSE, G, E_C, LSE_C, G_C, KS, SB, L2, G2, DZ, M, C, n_c, D,  # pragma: no cover
                     c1, c2, qoff, SZ,
                     MODE: tl.constexpr, K_EXCL: tl.constexpr, HAS_KS: tl.constexpr, SYM: tl.constexpr,
                     HAS_Q: tl.constexpr, COST: tl.constexpr, TWO: tl.constexpr, PREC: tl.constexpr,
                     BF16: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    """Rows [i0, i0 + BM) of a gradient by rows: sum_j W_ij x_j and R_i = sum_j W_ij over every column tile of X (C
    columns, the queue's past n_c). ``SYM`` (the symmetric path: A is X): W_ij = g_i p_ij w_ij [j not excluded from
    row i] + g_j p_ji w_ij [i not excluded from row j] (p_ji from the same tile: l_ji = l_ij, the products x_i . x_j
    being the forward's), the columns' own rows' statistics read from E_C, LSE_C, G_C (LSE, G, E on the symmetric
    path; the other side's on the pair path of :func:`row_lse_pair`: A, X two sets of rows, l_ji of x_j against A
    equal to l_ij; "dot", no queue, no ``COST`` or ``TWO``). Else the row side alone: the anchors' gradient where the
    forward kept no accumulator (:func:`soft_cost`). ``COST`` as :func:`_bwd_kernel`'s, each side with its own row's
    sbar (SB). ``TWO`` ("dot", SYM): the rows' log-sum-exps at two scales c1, c2 of the same products (L2, G2: the
    second's statistics and incoming gradient), W = c1 W_1 + c2 W_2 (the scales applied here, not by the caller)."""
    if HAS_KS:
        c1 = c1 * tl.load(KS)
        if TWO:
            c2 = c2 * tl.load(KS)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    rmask, a, a_mm, na, e0_r, e1_r = _row_block_jit(A, NX, E, rows, M, D, MODE, K_EXCL, BF16, BM, BD)
    offs_d = tl.arange(0, BD)
    dmask = offs_d < D
    lse_r = tl.load(LSE + rows, mask=rmask, other=0.0)
    g_r = tl.load(G + rows, mask=rmask, other=0.0)
    sb_r = tl.load(SB + rows, mask=rmask, other=0.0) if COST == 1 else g_r
    acc = tl.zeros([BM, BD], tl.float32)
    rsum = tl.zeros([BM], tl.float32)
    for start in range(0, C, BN):
        cols = start + tl.arange(0, BN)
        cmask = cols < C
        x = tl.load(X + cols[:, None] * D + offs_d[None, :], mask=cmask[:, None] & dmask[None, :], other=0.0)
        x_mm = _bf16(x, BF16)
        nx = tl.load(NX + cols, mask=cmask, other=0.0) if MODE != 0 else tl.zeros([BN], tl.float32)
        s = tl.dot(a_mm, tl.trans(x_mm), input_precision=PREC, out_dtype=tl.float32)
        # the logits with no column excluded; each side's exclusions below (K_EXCL 0 here)
        logit, w, valid = _logits_jit(s, na, nx, rmask, cmask, cols, n_c, c1, c2, qoff, rows, rows, MODE, 0, HAS_Q)
        v_r = valid
        if K_EXCL >= 1:
            v_r = v_r & (cols[None, :] != e0_r[:, None])
        if K_EXCL >= 2:
            v_r = v_r & (cols[None, :] != e1_r[:, None])
        p = tl.where(v_r, tl.exp(logit - lse_r[:, None]), 0.0) * g_r[:, None]
        if COST == 1:
            p = p * (1.0 + c1 * (s - sb_r[:, None]))
        if SYM:
            v_c = valid
            if K_EXCL >= 1:
                v_c = v_c & (rows[:, None] != tl.load(E_C + cols, mask=cmask, other=-1)[None, :])
            if K_EXCL >= 2:
                v_c = v_c & (rows[:, None] != tl.load(E_C + C + cols, mask=cmask, other=-1)[None, :])
            lse_c = tl.load(LSE_C + cols, mask=cmask, other=0.0)
            g_c = tl.load(G_C + cols, mask=cmask, other=0.0)
            p_c = tl.where(v_c, tl.exp(logit - lse_c[None, :]), 0.0) * g_c[None, :]
            if COST == 1:
                p_c = p_c * (1.0 + c1 * (s - tl.load(SB + cols, mask=cmask, other=0.0)[None, :]))
            p = p + p_c
            if TWO:
                l2_r = tl.load(L2 + rows, mask=rmask, other=0.0)
                l2_c = tl.load(L2 + cols, mask=cmask, other=0.0)
                g2_r = tl.load(G2 + rows, mask=rmask, other=0.0)
                g2_c = tl.load(G2 + cols, mask=cmask, other=0.0)
                p2 = (tl.where(v_r, tl.exp(c2 * s - l2_r[:, None]), 0.0) * g2_r[:, None]
                      + tl.where(v_c, tl.exp(c2 * s - l2_c[None, :]), 0.0) * g2_c[None, :])
                p = c1 * p + c2 * p2
        if MODE != 0:
            p = p * w
            rsum += tl.sum(p, 1)
        p_mm = _bf16(p, BF16)
        acc += tl.dot(p_mm, x_mm, input_precision=PREC, out_dtype=tl.float32)
    if MODE != 0:
        acc = 2.0 * (a * rsum[:, None] - acc)
    tl.store(DZ + rows[:, None] * D + offs_d[None, :], acc, mask=rmask[:, None] & dmask[None, :])


# BM, BN, warps, stages: the autotuner's choice (few: each compiles). On an H200 (Triton 3.6), InfoNCE at 2N = 32,768,
# d = 128, forward + backward, each config alone (fp32 symmetric / general path, tf32 symmetric / general), in ms:
# 64x64/4/2 33.6 / 51.1, 12.8 / 17.0; 128x64/8/2 20.6 / (its general backward exceeds the SM's shared memory), 11.4 /
# 16.3; 128x32/8/3 22.4 / 29.4, 11.2 / 14.1; 128x32/4/2 34.8 / 54.0, 11.8 / 11.8 (and slower: 64x64/4/3, 64x32/4/3,
# 64x64/8/2, 32x64/4/3). A config that does not fit is timed as infinite by the autotuner.
_CONFIGS = [(64, 64, 4, 2), (128, 64, 8, 2), (128, 32, 8, 3), (128, 32, 4, 2)]
_logits_jit: Any = None
_bf16: Any = None
_row_block_jit: Any = None
_jitted: dict[bool, tuple[Any, Any, Any]] = {}


def _size_class(n: int) -> int:
    """The autotuner's size key of a launch over n rows (or columns): its bit length, from 2^10 to 2^16 (2N = 32,768
    and above share one choice: there every SM has tiles in either config, and tuning at 2^20, seconds a run, would
    cost minutes). Before it had one, a choice tuned at 8,192 (64x64) was kept at 32,768, where 128x64 took 20.6 ms,
    not 33.6 (fp32 InfoNCE on an H200)."""
    return min(max(int(n).bit_length(), 10), 16)


def _tune_bench(kernel_call: Any, quantiles: Any = None) -> list[float]:
    """The autotuner's timing of one config: a warm run, then runs until 25 ms or 10 of them (Triton's default
    times 5 runs to estimate, then 100 ms' worth: minutes for seconds-long kernels). [median, min, max] in ms."""
    kernel_call()
    torch.cuda.synchronize()
    times: list[float] = []
    while len(times) < 10 and sum(times) < 25.0:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel_call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return [statistics.median(times), min(times), max(times)]


def _kernels(interpreted: bool) -> tuple[Any, Any, Any]:
    """The three kernels (forward, backward, the symmetric backward), jitted by Triton at first use (under its
    interpreter for CPU tensors, autotuned on a GPU for each size class, :func:`_size_class`, which they take as
    ``SZ`` and do not use). Triton decides at its import whether it interprets (``TRITON_INTERPRET=1``, its own library
    included), so one process runs the kernels one way."""
    global tl, _logits_jit, _bf16, _row_block_jit
    if interpreted not in _jitted:
        if _jitted or ("triton" in sys.modules and (os.environ.get("TRITON_INTERPRET") == "1") != interpreted):
            raise RuntimeError("Triton was imported " + ("without" if interpreted else "with") + " TRITON_INTERPRET=1: "
                               "the fused kernels run " + ("interpreted" if interpreted else "compiled") + " only in a "
                               "process that sets it " + ("before" if interpreted else "to 0 before") + " importing "
                               "Triton")
        if interpreted:
            os.environ["TRITON_INTERPRET"] = "1"
        import triton
        import triton.language

        tl = triton.language
        _logits_jit, _bf16, _row_block_jit = triton.jit(_logits), triton.jit(_mm_input), triton.jit(_row_block)
        fwd, bwd, sym = (triton.jit(k, do_not_specialize=["SZ"]) for k in (_fwd_kernel, _bwd_kernel,
                                                                             _self_bwd_kernel))
        if not interpreted:
            configs = [triton.Config({"BM": bm, "BN": bn}, num_warps=w, num_stages=st) for bm, bn, w, st in _CONFIGS]
            fwd = triton.autotune(configs, key=["SZ", "D", "DV", "MODE", "K_EXCL", "WANT_O", "HAS_V", "COST", "TWO",
                                                "PREC", "BF16"], do_bench=_tune_bench)(fwd)
            bwd = triton.autotune(configs, key=["SZ", "D", "DV", "MODE", "K_EXCL", "HAS_U", "COST", "PREC", "BF16"],
                                  do_bench=_tune_bench)(bwd)
            sym = triton.autotune(configs, key=["SZ", "D", "MODE", "K_EXCL", "SYM", "HAS_Q", "COST", "TWO", "PREC",
                                                "BF16"], do_bench=_tune_bench)(sym)
        _jitted[interpreted] = (fwd, bwd, sym)
    return _jitted[interpreted]
