"""The input checks and numerics every loss shares: embeddings (floating, finite, on one device, of matching shapes),
views, queues, labels, weights and hyper-parameter values, each refused with a ``ValueError`` naming the argument and
the value; the scale-robust row normalisation and the weighted means of per-anchor terms."""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ----------------------------------------------------------------------------- validation

class DeferredChecks:
    """The value checks of the losses, kept on the device while a training engine runs (issue 47): a check that would
    read the device (non-finite inputs, zero embeddings, negative weights) keeps its flag (a 0-d tensor, no further
    work on the device) with the micro-batch it was made in (``index``, set by the engine); the engine reads every flag
    with the loss at its next host read and raises the first failed check's ``ValueError`` naming that step. Outside
    :func:`deferred` every check reads the device at once, as before.

    The flags are tensor operations only, so a loss compiled whole (``torch.compile(fullgraph=True)``, issue 78) keeps
    its checks: the traced code keeps (message, flag) for the micro-batch and reads nothing else of this object (no
    ``index``: its value would be a guard, one compile per micro-batch of the read's window); each flag takes the index
    when ``index`` next changes or ``pending`` is read."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, str, Tensor]] = []  # (micro-batch index, message, failed flag)
        # message -> failed flag of the current micro-batch, a check made twice in it (a loss called twice) OR-ed into
        # one flag: a list that grew by a flag a call was a new guard, and a new compile, at every call
        self._new: dict[str, Tensor] = {}
        self._index = 0

    def add(self, bad: Tensor, message: str) -> None:
        before = self._new.get(message)
        self._new[message] = bad if before is None else before | bad

    def _fold(self) -> None:
        if self._new:
            self._pending.extend((self._index, m, b) for m, b in self._new.items())
            self._new.clear()

    @property
    def pending(self) -> list[tuple[int, str, Tensor]]:
        """Every (micro-batch index, message, failed flag) since the last ``pending.clear()``."""
        self._fold()
        return self._pending

    @property
    def index(self) -> int:
        return self._index

    @index.setter
    def index(self, value: int) -> None:
        self._fold()  # the flags made so far belong to the micro-batch before
        self._index = value


# The checks in force on this thread (:func:`deferred`): an attribute of a plain ``threading.local``, which
# ``torch.compile`` traces and guards (a ``ContextVar``'s ``get`` was a graph break). Plain, with no class default:
# dynamo reads a ``threading.local`` subclass's attribute by static lookup, and torch 2.11 took the class default
# (None) for the value, then failed building its guard when the engine's checks were set (every front-end on a GPU).
_DEFERRED = threading.local()
_DEFERRED.checks = None


def deferred_checks() -> DeferredChecks | None:
    """The checks in force on this thread (None: on a thread that never entered :func:`deferred`)."""
    try:
        return _DEFERRED.checks
    except AttributeError:
        return None


@contextmanager
def deferred(checks: DeferredChecks) -> Iterator[DeferredChecks]:
    """Inside: the losses' value checks go to ``checks`` instead of reading the device."""
    before, _DEFERRED.checks = deferred_checks(), checks
    try:
        yield checks
    finally:
        _DEFERRED.checks = before


def _fails(bad: Tensor, message: str) -> bool:
    """Whether a value check failed: read now (False when deferred: the flag waits for the engine's next read). Under
    ``torch.compile`` outside :func:`deferred` (a compiled loss called on its own) the flag is an asynchronous assert
    (``torch._assert_async``): no host read in the graph; a failed check raises ``RuntimeError`` with ``message`` (on a
    GPU, a device-side assert). The engine's calls are deferred: their checks are read at its sync as ``ValueError``."""
    checks = deferred_checks()
    if checks is not None:
        checks.add(bad, message)
        return False
    if torch.compiler.is_compiling():
        torch._assert_async(~bad, message)
        return False
    return bool(bad)


def _check_float(x: Any, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FLOATS:
        raise ValueError(f"{what} must be a floating-point tensor, got dtype {x.dtype}")
    if x.device.type == "meta":  # no values to check (shape inference)
        return x
    # x * 0 is 0 for every finite entry and NaN for an infinite or NaN one: three small ops (isfinite's are six)
    if _fails(torch.isnan((x.detach() * 0).sum()), f"{what} contains non-finite values"):
        n_nan = int(torch.isnan(x).sum())
        n_inf = int(torch.isinf(x).sum())
        raise ValueError(f"{what} contains non-finite values ({n_nan} NaN, {n_inf} inf)")
    return x


def check_device(x: Tensor | None, what: str, device: torch.device, of: str = "z_a") -> None:
    """``x`` (if given) lives on ``device`` (the embeddings'): tensors on two devices are refused naming both, before
    any value is read (a meta or CUDA tensor beside a CPU one used to fail deep inside with another error)."""
    if isinstance(x, Tensor) and x.device != device:
        raise ValueError(f"{what} is on device {x.device} but {of} is on {device}: every input of a loss must be on "
                         "one device")


def _upcast(x: Tensor) -> Tensor:
    """bfloat16/float16 are computed in float32 (losses are reductions over many terms)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def check_pair(z_a: Tensor, z_b: Tensor) -> tuple[Tensor, Tensor]:
    """Validate a two-view batch: both ``(N, d)``, same shape, N >= 2, finite floats."""
    for x, what in ((z_a, "z_a"), (z_b, "z_b")):
        if not isinstance(x, Tensor):
            raise ValueError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    check_device(z_b, "z_b", z_a.device)
    _check_float(z_a, "z_a")
    _check_float(z_b, "z_b")
    if z_a.dim() != 2 or z_b.dim() != 2:
        raise ValueError(f"z_a and z_b must be 2-D (N, d); got shapes {tuple(z_a.shape)} and {tuple(z_b.shape)}")
    if z_a.shape != z_b.shape:
        raise ValueError(f"z_a and z_b must have the same shape; got {tuple(z_a.shape)} and {tuple(z_b.shape)}")
    if z_a.shape[0] < 2:
        raise ValueError(f"need a batch of N >= 2 samples, got N = {z_a.shape[0]}")
    if z_a.shape[1] < 1:
        raise ValueError(f"embeddings must have dimension d >= 1, got shape {tuple(z_a.shape)}")
    dt = torch.promote_types(z_a.dtype, z_b.dtype)
    return _upcast(z_a.to(dt)), _upcast(z_b.to(dt))


def check_views(views: Tensor) -> Tensor:
    """Validate a multi-view batch ``(V, N, d)`` with V >= 2 and N >= 2."""
    _check_float(views, "views")
    if views.dim() != 3:
        raise ValueError(f"views must be 3-D (V, N, d); got shape {tuple(views.shape)}")
    if views.shape[0] < 2:
        raise ValueError(f"multi-view losses need V >= 2 views, got V = {views.shape[0]}")
    if views.shape[1] < 2:
        raise ValueError(f"need a batch of N >= 2 samples, got N = {views.shape[1]}")
    if views.shape[2] < 1:
        raise ValueError(f"embeddings must have dimension d >= 1, got shape {tuple(views.shape)}")
    return _upcast(views)


def as_views(z_a: Tensor, z_b: Tensor | None) -> Tensor:
    """``loss(views)`` or ``loss(z_a, z_b)`` for multi-view losses -> validated ``(V, N, d)``."""
    if z_b is None:
        return check_views(z_a)
    a, b = check_pair(z_a, z_b)
    return torch.stack([a, b])


def check_queue(queue: Tensor | None, d: int, dtype: torch.dtype, device: torch.device | None = None) -> Tensor | None:
    if queue is None:
        return None
    if device is not None:
        check_device(queue, "queue", device)
    _check_float(queue, "queue")
    if queue.dim() != 2 or queue.shape[1] != d:
        raise ValueError(f"queue must have shape (Q, {d}); got {tuple(queue.shape)}")
    return queue.detach().to(dtype)


def check_labels(labels: Any, n: int, what: str = "labels", device: torch.device | None = None) -> Tensor:
    if not isinstance(labels, Tensor):
        raise ValueError(f"{what} must be a torch.Tensor of shape ({n},), got {type(labels).__name__}")
    if device is not None:
        check_device(labels, what, device)
    if labels.dim() != 1 or labels.shape[0] != n:
        raise ValueError(f"{what} must have shape ({n},) (one per sample); got {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"{what} must be an integer tensor, got dtype {labels.dtype}")
    return labels


def check_weights(weights: Tensor | None, n: int, device: torch.device | None = None) -> Tensor | None:
    """Per-positive-pair weights (N,) (t-SimCLR Sec. 4.1: p_ii' proportional to exp(IoU / tau')):
    validated, detached and scaled to mean 1 over all ranks, so uniform weights give the unweighted loss."""
    if weights is None:
        return None
    from suite import distributed as sd

    if device is not None:
        check_device(weights, "weights", device)
    _check_float(weights, "weights")
    if weights.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) (one per positive pair); got {tuple(weights.shape)}")
    if _fails((weights < 0).any(), "weights must be non-negative"):
        raise ValueError("weights must be non-negative")
    w = _upcast(weights.detach())
    # one power of two for every rank (the mean of their exponents): weights near float32's largest number no longer
    # overflow the mean (they were all scaled to 0), and the scale is exact
    exp = torch.frexp(w.max())[1].to(torch.float64)
    w = w * _exp2(-sd.all_reduce_mean(exp).round(), w.dtype)
    mean_w = sd.all_reduce_mean(w.mean())
    if _fails(~(mean_w > 0), "weights must not all be zero"):
        raise ValueError("weights must not all be zero")
    return w / mean_w


def weighted_mean(per_anchor: Tensor, weights: Tensor | None) -> Tensor:
    """Mean of per-anchor losses (A,) with A = N or 2N (both orders of each pair), pair i weighted by
    ``weights[i]`` (from :func:`check_weights`): (1/A) sum_a w_{a mod N} l_a."""
    if weights is None:
        return per_anchor.mean()
    return (per_anchor.view(-1, weights.shape[0]) * weights.to(per_anchor.dtype)).mean()


def weighted_rows(per_anchor: Tensor, weights: Tensor | None, start: int) -> Tensor:
    """Sum of the per-anchor losses of rows [start, start + len) with each anchor's pair weight
    (anchor a belongs to pair a mod N); the tiled form of :func:`weighted_mean` (divide by A after)."""
    if weights is None:
        return per_anchor.sum()
    n = weights.shape[0]
    idx = torch.arange(start, start + per_anchor.shape[0], device=per_anchor.device) % n
    return (per_anchor * weights.to(per_anchor.dtype)[idx]).sum()


def check_choice(value: str, what: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{what} must be one of {choices}, got {value!r}")
    return value


_F32 = torch.finfo(torch.float32)


def _in_float32(v: float, what: str, value: Any) -> float:
    """``v`` unless a loss computing in float32 cannot hold it: above float32's largest number (it would be inf) or,
    non-zero, below its smallest normal number (1 / v would overflow, products underflow to 0), named with the value."""
    if abs(v) > _F32.max:
        raise ValueError(f"{what} = {value} is above {_F32.max:.4g}, the largest float32: the loss computes in float32 "
                         f"and {what} would be inf there")
    if 0 < abs(v) < _F32.tiny:
        raise ValueError(f"{what} = {value} is below {_F32.tiny:.4g}, the smallest normal float32: the computation would "
                         f"underflow (1/{what} overflows to inf, products with it vanish)")
    return v


def check_positive(value: float, what: str) -> float:
    """A finite number > 0 that float32 holds (NaN, inf, 0, negatives, and values outside float32's normal range,
    which overflow or underflow in the loss, are refused, naming the argument and the value)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number > 0, got {value!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{what} must be a finite number > 0, got {value}")
    return _in_float32(v, what, value)


def check_finite(value: float, what: str, low: float = -math.inf) -> float:
    """A finite number >= ``low`` that float32 holds (NaN, inf and values outside float32's normal range refused,
    naming the argument)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a finite number, got {value!r}") from None
    if not (math.isfinite(v) and v >= low):
        raise ValueError(f"{what} must be a finite number >= {low}, got {value}" if low > -math.inf
                         else f"{what} must be a finite number, got {value}")
    return _in_float32(v, what, value)


def _pow2_inverse(peak: Tensor, dtype: torch.dtype) -> Tensor:
    """The inverse of the power of two at ``peak`` (a non-negative (..., 1) tensor of row maxima): multiplying by it is
    exact (only the exponent changes), so values in float32's normal range come out as they went in up to that factor,
    and sums of squares neither overflow (1e20) nor underflow (1e-30). Zero peaks are left alone."""
    _, exp = torch.frexp(peak.detach())
    return _exp2(-exp, dtype)


_NORM_EPS = 1e-12  # F.normalize's


class _UnitRows(torch.autograd.Function):
    """y = x' / max(||x'||, eps) over the last dimension, x' = x inv (inv: per row, a constant power of two), with
    F.normalize's values, and the backward formed from y: dx = inv (g - y (y . g)) / ||x'|| (rows where ||x'|| <= eps:
    inv g / eps). Autograd's own graph of F.normalize keeps x' for its division, and its backward makes four
    temporaries of x's size. This keeps y (the output, alive anyway) and two numbers per row, and makes one: at 2N =
    2^20, d = 128, each such temporary is 512 MB of the loss's memory on a GPU."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, inv: Tensor) -> Tensor:
        xs = x * inv
        norm = torch.linalg.vector_norm(xs, 2, dim=-1, keepdim=True)
        y = xs.div_(norm.clamp_min(_NORM_EPS))  # F.normalize: x / norm.clamp_min(eps), bit for bit
        ctx.save_for_backward(y, norm, inv)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable  # no second derivative: norm is kept as a constant
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        y, norm, inv = ctx.saved_tensors
        dot = torch.where(norm > _NORM_EPS, (y * g).sum(-1, keepdim=True), 0.0)  # clamped rows: no projection
        return torch.addcmul(g, y, dot, value=-1.0).mul_(inv / norm.clamp_min(_NORM_EPS)), None


def _exp2(k: Tensor, dtype: torch.dtype) -> Tensor:
    """2^k for integer ``k`` in ``dtype``, exactly (k kept inside the range where 2^k and 2^-k are normal)."""
    lim = int(math.log2(torch.finfo(dtype).max)) - 1  # 126 (float32), 1022 (float64)
    return torch.exp2(k.clamp(-lim, lim).to(dtype))


def normalize_rows(x: Tensor, what: str = "embeddings", parts: Sequence[tuple[str, int]] = ()) -> Tensor:
    """Each row of ``x`` (..., d) divided by its L2 norm, for any finite scale: every row is first scaled by the power
    of two of its largest entry (exact), so rows around 1e20 (whose squares overflow float32) or 1e-30 (whose squares
    underflow) give the same unit vectors as at scale 1, where the result equals ``F.normalize``'s bit for bit. A row
    of zeros has no direction (its cosine similarity is undefined): ``ValueError`` naming ``what`` and the row.
    ``parts``: ``x`` (rows, d) is several inputs stacked, ``(name, rows)`` each, normalised in one pass (the values
    are row by row the same); a zero row is named by its input and its row there."""
    peak = x.detach().abs().amax(dim=-1, keepdim=True)  # (..., 1)
    if x.device.type != "meta":
        zero = peak.reshape(-1) == 0
        for name, (lo, hi) in _spans_of(parts, zero.numel(), what):
            if _fails(zero[lo:hi].any(), f"{name}: some embeddings are zero vectors, whose cosine similarity is "
                                         f"undefined"):
                rows = zero[lo:hi].nonzero().flatten()
                raise ValueError(f"{name}: {rows.numel()} of {hi - lo} embeddings are zero vectors (first: row "
                                 f"{int(rows[0])}); the cosine similarity of a zero vector is undefined (a dead "
                                 f"encoder output, or inputs that were never filled)")
    return _UnitRows.apply(x, _pow2_inverse(peak, x.dtype))


def _spans_of(parts: Sequence[tuple[str, int]], total: int, what: str) -> list[tuple[str, tuple[int, int]]]:
    """(name, (first row, end)) of each stacked input; no parts: the whole of ``x`` under ``what``."""
    if not parts:
        return [(what, (0, total))]
    out, lo = [], 0
    for name, n in parts:
        out.append((name, (lo, lo + n)))
        lo += n
    return out
