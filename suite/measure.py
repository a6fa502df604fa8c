"""Timing and peak memory: the one kit every bench (``benchmarks/measurements``) and ``make gpu-check`` measure with.

A measured case is a function of nothing and its leaves (``(fn, leaves)``: :meth:`suite.losses.examples.Example.call`
and ``.leaves``); one :func:`step` is its forward and backward with the leaves' gradients cleared first and the
device synchronised at both ends, timed by ``time.perf_counter``, with the CUDA peak allocated above what was
allocated when it began (NaN off CUDA). :func:`round_robin` times several cases in turns, so a change of the
machine's load hits all alike; :func:`median_ratio` is the one ratio of two sides timed so. On the CPU the peak is
the live tensor memory of the call (:func:`peak_tensor_bytes`, :class:`suite.memory.PeakTensorMemory`), or the
process's resident growth (:func:`rss_growth`, meant for a fresh process).

Example: >>> fn, leaves = ex.call(loss), ex.leaves
>>> seconds, peak_mib = step(fn, leaves, torch.device("cuda"))
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from typing import Any, Callable, ContextManager, Mapping, Sequence

import torch
from torch import Tensor

Case = tuple[Callable[[], Tensor], Sequence[Tensor]]  # (a function of nothing: the loss on its inputs, its leaves)


def sync(device: torch.device) -> None:
    """Wait for ``device`` (CUDA) to finish what was queued; nothing elsewhere."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cuda_mark(device: torch.device) -> int:
    """Reset ``device``'s peak statistics and return the bytes allocated now (the base of :func:`cuda_peak_above`);
    0 off CUDA."""
    if device.type != "cuda":
        return 0
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def cuda_peak_above(device: torch.device, base: int) -> float:
    """The most allocated on ``device`` since :func:`cuda_mark` above ``base``, in MiB; NaN off CUDA."""
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20 if device.type == "cuda" else float("nan")


def nan_max(a: float, b: float) -> float:
    """The larger of two peaks, a NaN (none measured) counting as absent."""
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def step(fn: Callable[[], Tensor], leaves: Sequence[Tensor], device: torch.device = torch.device("cpu"),
         within: Callable[[], ContextManager[Any]] | None = None) -> tuple[float, float]:
    """One forward and backward of ``fn`` (``within()`` around it, e.g. a mode of the kernels): seconds, and the CUDA
    peak above the start in MiB (NaN off CUDA). The leaves' gradients are cleared first."""
    for t in leaves:
        t.grad = None
    sync(device)
    base = cuda_mark(device)
    t0 = time.perf_counter()
    with within() if within is not None else contextlib.nullcontext():
        fn().backward()
    sync(device)
    return time.perf_counter() - t0, cuda_peak_above(device, base)


def median_time(fn: Callable[[], Tensor], leaves: Sequence[Tensor], repeats: int) -> float:
    """Median seconds of ``repeats`` :func:`step` calls after one warm-up call."""
    step(fn, leaves)
    return statistics.median(step(fn, leaves)[0] for _ in range(repeats))


def round_robin(cases: Mapping[str, Case], repeats: int, warm_up: bool = True) -> dict[str, list[float]]:
    """Seconds of each case per round: every round times each case once, in order (after one warm-up call each)."""
    if warm_up:
        for fn, leaves in cases.values():
            step(fn, leaves)
    rounds: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for k, (fn, leaves) in cases.items():
            rounds[k].append(step(fn, leaves)[0])
    return rounds


def time_interleaved(cases: Mapping[str, Case], repeats: int, reference: str = "infonce"
                     ) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`round_robin` timing: each case's median seconds and, per case, the median over rounds of its time
    divided by ``reference``'s time in the same round (NaN without that case)."""
    rounds = round_robin(cases, repeats)
    ref = rounds.get(reference)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = {k: statistics.median(a / b for a, b in zip(v, ref)) if ref else float("nan") for k, v in rounds.items()}
    return med, ratio


def median_ratio(side: Sequence[float], other: Sequence[float]) -> dict[str, float]:
    """The one ratio of two sides timed in alternating rounds: ``median(side) / median(other)``, and the lowest and
    highest per-round ``side[i] / other[i]`` as its range.

    Example: >>> median_ratio([2.0, 4.0, 3.0], [2.0, 2.0, 3.0])["ratio"]
    1.5
    """
    per = [a / b for a, b in zip(side, other)]
    return {"ratio": statistics.median(side) / statistics.median(other), "ratio_min": min(per), "ratio_max": max(per)}


def peak_tensor_bytes(fn: Callable[[], Tensor], leaves: Sequence[Tensor]) -> int:
    """The peak bytes of live tensors created during one forward and backward (:class:`suite.memory.PeakTensorMemory`:
    the allocator's caching left out); the leaves' gradients are cleared first."""
    from suite.memory import PeakTensorMemory

    for t in leaves:
        t.grad = None
    with PeakTensorMemory() as m:
        fn().backward()
    return m.peak


def device_info(device: torch.device) -> dict[str, Any]:
    """What a measurement ran on, for its registry row: :func:`suite.machine.environment` (device, driver, CUDA, torch,
    Triton, machine) and the host's torch threads."""
    from suite.machine import environment

    return {**environment(device), "threads": str(torch.get_num_threads())}


def rss_growth(run: Callable[[], Any]) -> dict[str, float]:
    """``run()``'s seconds (``s``) and the growth of the process's peak resident set over what it held before
    (``rss_growth_mib``, the peak reset first: :func:`suite.memory.reset_peak_rss`); meant for a fresh process."""
    from suite.memory import peak_rss, reset_peak_rss

    before = reset_peak_rss()
    t0 = time.perf_counter()
    run()
    dt = time.perf_counter() - t0
    return {"rss_growth_mib": peak_rss() - before, "s": dt}


__all__ = ["Case", "cuda_mark", "cuda_peak_above", "device_info", "median_ratio", "median_time", "nan_max",
           "peak_tensor_bytes", "round_robin", "rss_growth", "step", "sync", "time_interleaved"]
