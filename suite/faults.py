"""What a run can fail with at run time, as opposed to a bad input (torch-free, so that ``suite``'s command line can
catch it without importing torch): one line, exit 1 (:func:`suite.cli.main`). What a step's GPU fault says is made by
:func:`suite.train.device.gpu_fault`."""
from __future__ import annotations

import re


class RunFault(Exception):
    """A run failed while it ran (the GPU's memory, a GPU that failed): the message names the step or the stage and
    what to do; the last checkpoint is kept."""


class OutOfMemory(RunFault, MemoryError):
    """The GPU ran out of memory in a step (the loss or the encoder) or in the evaluation: one line naming where, the
    batch, the memory asked for and free, and the options that fit it; the last checkpoint is kept."""


class GPUError(RunFault, RuntimeError):
    """The GPU failed in a step (a CUDA error: the device lost, a launch failure): one line naming the step and torch's
    first line; the last checkpoint is kept."""


class DataStall(RunFault, TimeoutError):
    """No batch came from the data workers within the stall limit (:data:`suite.train.batches.STALL_S`): one line
    naming the file each worker has been reading, and for how long (a hung mount or network share), or saying that
    none is reading a file; the last checkpoint is kept."""


_OOM_ASKED = re.compile(r"Tried to allocate ([\d.]+ [KMGTP]?i?B)")
_OOM_TOTAL = re.compile(r"total capacity of ([\d.]+ [KMGTP]?i?B) of which ([\d.]+ [KMGTP]?i?B) is free")


def oom_memory(exc: BaseException) -> str:
    """``tried to allocate X, Y free of Z`` from torch's out-of-memory message (what of it is there)."""
    text = str(exc)
    asked, total = _OOM_ASKED.search(text), _OOM_TOTAL.search(text)
    parts = [f"tried to allocate {asked.group(1)}"] if asked else []
    if total:
        parts.append(f"{total.group(2)} free of {total.group(1)}")
    return ", ".join(parts) if parts else "the allocator gave no sizes"


__all__ = ["DataStall", "GPUError", "OutOfMemory", "RunFault", "oom_memory"]
