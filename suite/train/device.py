"""Device and precision, one rule for every run: :func:`resolve_device` (``auto``, ``cpu``, ``cuda``, ``cuda:N``,
checked against this machine before anything is built), :func:`autocast` (``fp32``, ``bf16``, ``fp16``), the optimiser
options and host workers a device takes, a batch's way onto it; and what a step's GPU fault says
(:func:`gpu_fault`: where it happened, the loss or the encoder, the memory asked for and free, and the options that
fit it). The faults themselves are :mod:`suite.faults`, torch-free, so the command line catches them without torch."""
from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ContextManager

import torch
from torch import Tensor

from suite.faults import GPUError, OutOfMemory, oom_memory

PRECISIONS = ("fp32", "bf16", "fp16")


def resolve_device(name: str = "auto") -> torch.device:
    """The one device rule. ``auto``: this process's CUDA device if CUDA is available (under
    torchrun the one :func:`suite.distributed.init_from_env` selected from ``LOCAL_RANK``), else the
    CPU; ``cuda`` without an index means the current CUDA device. Unknown names and ``cuda`` on a
    machine without a GPU raise a one-line ``ValueError``."""
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        return check_cuda_device(torch.device("cuda"), name)
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} asked for, but no CUDA GPU is available; use --device cpu or auto")
        dev = check_cuda_device(dev, name)
    return dev


def check_cuda_device(dev: torch.device, asked: str) -> torch.device:
    """``dev`` (``cuda`` or ``cuda:N``) with its index, checked against this machine: an index it does not have, or a
    CUDA that is installed but cannot be used (a driver too old, a GPU busy or lost), is a one-line ``ValueError``
    naming what was asked for, before anything is built."""
    try:
        count = torch.cuda.device_count()
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= count:
            have = ", ".join(f"cuda:{i}" for i in range(count)) or "none"
            raise ValueError(f"device {asked!r} asked for, but this machine has {count} CUDA GPU(s) ({have}); use one "
                             "of them, --device auto or cpu")
        torch.cuda.get_device_properties(index)
    except (RuntimeError, AssertionError) as exc:  # torch's CUDA errors (torch.AcceleratorError is a RuntimeError)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"device {asked!r}: CUDA is installed but cannot be used ({first}); use --device cpu, or fix "
                         "the driver / free the GPU") from None
    return torch.device("cuda", index)


def check_device_precision(device: torch.device, precision: str) -> None:
    """bf16 on a CUDA GPU that has no bfloat16 (before Ampere): a one-line ``ValueError`` naming the GPU, before
    anything is built (autocast would otherwise emulate it, slowly, or fail inside a kernel)."""
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"bf16 asked for, but {device} ({torch.cuda.get_device_name(device)}) does not support "
                         "bfloat16; train in fp32 (drop --bf16 / use --precision fp32)")


def optimizer_options(device: torch.device) -> dict[str, Any]:
    """Keyword arguments for a torch optimiser on ``device``: ``fused=True`` on CUDA (one kernel for every parameter,
    and a flagged update is skipped on the device, :class:`suite.train.Engine`); none elsewhere, so the CPU's numbers stay those of
    torch's default implementation."""
    return {"fused": True} if device.type == "cuda" else {}


def data_workers(device: torch.device) -> int:
    """``DataLoader`` workers for the host's part of a step (:class:`suite.train.batches.Prefetch`): on CUDA up to 4 (half the cores), so
    collating and tokenising run beside the GPU; none on the CPU, whose cores the step itself uses."""
    if device.type != "cuda":
        return 0
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def to_device(batch: Any, device: torch.device) -> Any:
    """A host batch (a tensor, a PyG batch: anything with ``pin_memory`` and ``to``) on ``device``; to CUDA through
    pinned memory, so the copy does not wait for the GPU (a copy from pageable memory synchronises the stream). A
    tensor already there is returned as it is."""
    if isinstance(batch, Tensor) and batch.device == device:
        return batch
    if device.type == "cuda":
        return batch.pin_memory().to(device, non_blocking=True)
    return batch.to(device)


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


def autocast(device: torch.device, precision: str) -> ContextManager[Any]:
    """Autocast to bf16 / fp16 on ``device`` (a no-op for fp32)."""
    check_precision(precision)
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


# ----------------------------------------------------------------------------- a step's GPU fault

def cuda_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA error (the device lost, a launch failure), not torch's out-of-memory error."""
    accel = getattr(torch, "AcceleratorError", None)
    return (accel is not None and isinstance(exc, accel)) or (isinstance(exc, RuntimeError)
                                                              and str(exc).startswith("CUDA error"))


def _in_loss(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside a loss (the core's ``suite/losses`` or a user's adopted loss)."""
    from suite.losses.user import UserLossFault

    if isinstance(exc, UserLossFault):
        return True
    losses = Path(__file__).resolve().parents[1] / "losses"
    tb = exc.__traceback__
    while tb is not None:
        f = Path(tb.tb_frame.f_code.co_filename)
        if losses in f.parents:  # the user's loss is called through suite/losses/user.py's guard
            return True
        tb = tb.tb_next
    return False


def gpu_fault(exc: BaseException, where: str, batch: int, caching: bool = False) -> OutOfMemory | GPUError:
    """The one line a step's GPU fault ``exc`` (torch's out-of-memory error or a :func:`cuda_error`) is raised as:
    ``where`` (the step), the part (the loss or the encoder), for memory the ``batch`` size, the memory asked for and
    free, and the options that fit it (``caching``: the fault came inside a gradient-caching step)."""
    part = "loss" if _in_loss(exc) else "encoder"
    if not isinstance(exc, torch.cuda.OutOfMemoryError):  # a CUDA error: the device failed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return GPUError(f"the GPU failed at {where} in the {part} ({first}); nothing was stepped and no checkpoint "
                        "written, the last checkpoint is kept: the same command resumes from it (set "
                        "CUDA_LAUNCH_BLOCKING=1 to name the failing kernel)")
    if part == "loss":
        hint = ("build the loss with chunk_size='auto' (memory-bounded tiles; --loss-hparams chunk_size=auto) or "
                "give a smaller --batch-size")
    elif caching:
        hint = ("give a smaller --grad-cache-chunk (gradient caching holds the activations of one chunk) or a "
                "smaller --batch-size (the loss still sees the whole batch's embeddings)")
    else:
        hint = ("encode the batch in chunks with gradient caching (--grad-cache-chunk K: the same gradient, the "
                "memory of K examples) or give a smaller --batch-size")
    return OutOfMemory(f"GPU out of memory at {where} in the {part} with a batch of "
                       f"{batch} ({oom_memory(exc)}); {hint}. Nothing was stepped and no checkpoint written, the last "
                       f"checkpoint is kept")


__all__ = ["PRECISIONS", "autocast", "check_cuda_device", "check_device_precision", "check_precision", "cuda_error",
           "data_workers", "gpu_fault", "optimizer_options", "resolve_device", "to_device"]
