"""Peak tensor memory of a CPU (or GPU) computation, tracked op by op.

:class:`PeakTensorMemory` is a ``TorchDispatchMode`` that adds the bytes of every new storage an op
produces and subtracts them when the storage is freed, keeping the maximum: the peak of live tensor
memory created inside the block (forward and backward), independent of the allocator's caching.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only


class PeakTensorMemory(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def _track(self, t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        key, n = st.data_ptr(), st.nbytes()
        if n == 0 or key in self._seen:
            return t
        self._seen.add(key)
        self.live += n
        self.peak = max(self.peak, self.live)

        def free(k: int = key, n: int = n) -> None:
            self.live -= n
            self._seen.discard(k)

        weakref.finalize(st, free)
        return t

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._track, out)
        return out


def _status_kib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> float:
    """Reset the process's peak resident set (Linux: ``/proc/self/clear_refs`` 5) and return the current RSS
    in MiB, so that :func:`peak_rss` afterwards measures only what follows (``ru_maxrss`` cannot be reset:
    an earlier peak, e.g. from imports, would hide a smaller computation). Elsewhere: ``ru_maxrss``."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        now = _status_kib("VmRSS")
        if now is not None:
            return now / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss() -> float:
    """Peak resident set (MiB) since the last :func:`reset_peak_rss` (``ru_maxrss`` where /proc is absent)."""
    hwm = _status_kib("VmHWM")
    if hwm is not None:
        return hwm / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_MALLOC_FIXED = False


def pin_malloc_threshold() -> None:
    """Pin glibc's mmap threshold (once per process) so that freed blocks go back to the OS (the tiled losses,
    and training on batches whose shapes vary, e.g. MLM's length-bucketed batches).

    glibc raises its mmap threshold dynamically (up to 32 MiB) after large blocks are freed; tiles then
    come from the heap, where interleaved small allocations fragment it, and the process's resident
    memory grows with the number of tiles although live tensor memory stays at one tile (measured: 2N =
    16,384 tiled infonce, 80 MiB live tensors, 696 MiB RSS growth; with the threshold pinned at
    128 KiB, 172 MiB). No-op where glibc's ``mallopt`` is not available.
    """
    global _MALLOC_FIXED
    if _MALLOC_FIXED:
        return
    _MALLOC_FIXED = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass
