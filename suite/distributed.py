"""torch.distributed helpers shared by the loss core and the training loops.

Losses call :func:`gather` on their embeddings: with an initialised process group of world size
W > 1 it returns the concatenation of every rank's tensor in rank order. The forward is an
all-gather; the backward all-reduces the incoming gradient and returns this rank's slice, so the
gradient reaches the local part from every rank's loss. Under DDP (which averages gradients over
ranks) training with batch N per rank on W ranks is then the same as one process with batch W*N.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import math
import os
import re
import time
import zlib
from typing import Any, Iterator, Mapping

import torch
import torch.distributed as dist

from suite.faults import RunFault


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def is_main() -> bool:
    return rank() == 0


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.n = x.shape[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        r = dist.get_rank()
        return grad[r * ctx.n : (r + 1) * ctx.n]


def gather(x: torch.Tensor) -> torch.Tensor:
    """All-gather along dim 0 keeping the gradient (identity when not distributed).

    Every rank must pass the same shape.
    """
    if not is_distributed():
        return x
    return _GatherWithGrad.apply(x)


class _AllReduceSum(torch.autograd.Function):
    """Sum over ranks; the backward sums the incoming gradients over ranks (every rank's loss depends on every rank's
    input through the sum)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        y = x.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(y, op=dist.ReduceOp.SUM, group=group)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return _AllReduceSum.apply(grad, ctx.group), None


def all_reduce_sum(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Sum of ``x`` over the ranks of ``group`` (default: all) keeping the gradient (identity when not distributed)."""
    if not is_distributed():
        return x
    return _AllReduceSum.apply(x, group or dist.group.WORLD)


def gather_nograd(x: torch.Tensor) -> torch.Tensor:
    """All-gather along dim 0 without gradient (labels, queue bookkeeping)."""
    if not is_distributed():
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=0)


def all_reduce_mean(x: torch.Tensor) -> torch.Tensor:
    if not is_distributed():
        return x
    y = x.detach().clone()
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y / dist.get_world_size()


def wrap_ddp(model: torch.nn.Module) -> torch.nn.Module:
    """DistributedDataParallel when a process group is active, else the model itself."""
    if not is_distributed():
        return model
    dev = next(model.parameters()).device
    ids = [dev.index] if dev.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


def barrier() -> None:
    """Wait for every rank (nothing to wait for in one process)."""
    if is_distributed():
        dist.barrier()


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list (``gpu[003-005,007],cpu1`` -> ``gpu003``; ``rack[1-2]-n[01-04]`` ->
    ``rack1-n01``), as ``scontrol show hostnames`` would list it first."""
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):  # the first item: up to the first comma outside brackets
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            end = i
            break
    item = nodelist[:end].strip()
    if not item:
        raise ValueError(f"SLURM's node list {nodelist!r} names no host")
    return re.sub(r"\[([^\]]*)\]", lambda m: m.group(1).split(",")[0].split("-")[0], item)


def slurm_env(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """torch.distributed's variables from SLURM's, inside an ``srun`` step of several tasks; None elsewhere.

    ``RANK`` = ``SLURM_PROCID``, ``WORLD_SIZE`` = ``SLURM_STEP_NUM_TASKS``, ``LOCAL_RANK`` = ``SLURM_LOCALID``,
    ``MASTER_ADDR`` the step's first node, ``MASTER_PORT`` (unless set) one of 15000-34999 from the job and step ids,
    the same in every task. Only an ``srun`` step sets ``SLURM_STEP_NUM_TASKS``: a batch script run by ``sbatch
    --ntasks 4`` is one process (it is not a world of 4 whose 3 other ranks never come).
    """
    env = os.environ if environ is None else environ
    try:
        world = int(env.get("SLURM_STEP_NUM_TASKS", "1"))
    except ValueError:
        return None
    if world <= 1 or "SLURM_PROCID" not in env:
        return None
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    job, step = (zlib.crc32(env.get(k, "0").encode()) for k in ("SLURM_JOB_ID", "SLURM_STEP_ID"))
    port = env.get("MASTER_PORT") or str(15000 + (job * 31 + step) % 20000)
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": str(world), "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes), "MASTER_PORT": port}


def init_from_env(backend: str | None = None) -> bool:
    """Initialise the default process group when launched by torchrun (``WORLD_SIZE`` > 1) or by SLURM's ``srun``
    with several tasks (:func:`slurm_env`, whose variables are set for torch and for the rest of the process).

    Backend: nccl with CUDA, gloo otherwise; with nccl each process takes the GPU of its local rank (modulo the
    GPUs it sees: one when SLURM binds a GPU to each task). Returns whether a group is active.
    """
    if dist.is_initialized():
        return True
    if "WORLD_SIZE" not in os.environ:
        os.environ.update(slurm_env() or {})
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, timeout=collective_timeout())
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % max(1, torch.cuda.device_count()))
    return True


def cleanup() -> None:
    """End the process group, then free at once what still holds it: a finished run's DDP module (its reducer holds
    the group) lives on in reference cycles, and left to the interpreter's exit, gloo's teardown of the group under
    finalisation can abort a run that succeeded ('terminate called without an active exception', exit -6)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        gc.collect()


class GlobalBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """BatchNorm whose training statistics are over every rank's batch (SimCLR's global BN, Sec. 2.3), on any device.

    The mean and the biased variance (the normalisation's) are sums all-reduced across ranks (two passes: the sum, then
    the sum of squared deviations from the global mean, so no cancellation); the all-reduces are
    ``all_reduce_sum``, whose backward all-reduces the gradient, so every rank's loss
    reaches every rank's inputs through the statistics. Running statistics take the global mean and the unbiased
    global variance, as one process's BatchNorm over the global batch does. In eval mode, or in one process, it is
    ``F.batch_norm`` (plain BatchNorm). torch's :class:`torch.nn.SyncBatchNorm` takes only accelerator tensors (and
    DDP refuses it on the CPU); :func:`convert_sync_batchnorm` uses torch's on CUDA and this one elsewhere.

    Shapes: (N, C, *) -> (N, C, *); every rank may hold a different N.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: Any = None, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not (self.training and is_distributed()):
            return super().forward(input)
        self._check_input_dim(input)
        group = self.process_group or dist.group.WORLD
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        local = torch.cat([x.sum(dims), x.new_full((1,), x.numel() / max(1, x.shape[1]))])  # (C + 1,): sums, count
        total = all_reduce_sum(local, group)
        n = total[-1].detach()
        mean = total[:-1] / n  # (C,)
        xc = x - mean.view(shape)
        var = all_reduce_sum((xc * xc).sum(dims), group) / n  # (C,) biased: the normalisation's
        y = xc * torch.rsqrt(var + self.eps).view(shape)
        if self.weight is not None:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats and self.running_mean is not None and self.running_var is not None:
            with torch.no_grad():
                count = float(n)
                self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                unbiased = var.detach() * (count / max(count - 1.0, 1.0))
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        return y.to(input.dtype)


def convert_sync_batchnorm(module: torch.nn.Module, process_group: Any = None) -> torch.nn.Module:
    """Every BatchNorm layer of ``module`` synchronised across ranks: torch's :class:`torch.nn.SyncBatchNorm` when
    ``module`` lives on CUDA (convert after moving it), :class:`GlobalBatchNorm` otherwise. The parameters and
    buffers are the same tensors (the optimiser's and DDP's references stay valid if made before) and the state
    dict keys are unchanged, so exports load into plain BatchNorm."""
    p = next(module.parameters(), None)
    if p is not None and p.device.type == "cuda":
        return torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
    bn = torch.nn.modules.batchnorm._BatchNorm
    if isinstance(module, bn) and not isinstance(module, GlobalBatchNorm):
        out = GlobalBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                              module.track_running_stats, process_group)
        if module.affine:
            out.weight, out.bias = module.weight, module.bias
        out.running_mean, out.running_var = module.running_mean, module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.training = module.training
        return out
    for name, child in module.named_children():
        module.add_module(name, convert_sync_batchnorm(child, process_group))
    return module


# ----------------------------------------------------------------------------- a rank that fails

TIMEOUT_ENV = "SUITE_DIST_TIMEOUT"  # seconds a collective waits for the other ranks (torch's default: 30 minutes)
FAILED_KEY = "suite/failed/"  # + rank: the one line of a rank's own error, told to the others through the store
ALIVE_KEY = "suite/alive/"  # + rank: a rank that met a failed collective and is still here


def collective_timeout(environ: Mapping[str, str] | None = None) -> datetime.timedelta | None:
    """How long a collective waits for the other ranks: ``SUITE_DIST_TIMEOUT`` seconds (a positive finite number;
    anything else is a ``ValueError`` naming it), or torch's default (None) when unset."""
    text = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds > 0, got {text!r}")
    return datetime.timedelta(seconds=seconds)


class RankFailed(RunFault, RuntimeError):
    """Another rank failed (raised, was killed, or stalled past :data:`TIMEOUT_ENV`) while this one waited for it in a
    collective: one line naming that rank and what it said; the last checkpoint is kept."""


_COLLECTIVE_WORDS = ("connection closed by peer", "connection reset by peer", "timed out", "timeout", "gloo",
                     "nccl", "broken pipe", "socket", "store")


def is_collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective (or the store) failing because another rank is gone or late, rather than this
    rank's own error."""
    kinds = tuple(k for k in (getattr(dist, n, None) for n in ("DistError", "DistBackendError", "DistNetworkError",
                                                                "DistStoreError")) if isinstance(k, type))
    if kinds and isinstance(exc, kinds):
        return True
    return type(exc) is RuntimeError and any(w in str(exc).lower() for w in _COLLECTIVE_WORDS)


def _store(wait_s: float) -> Any:
    store = dist.distributed_c10d._get_default_store()
    store.set_timeout(datetime.timedelta(seconds=max(wait_s, 0.1)))
    return store


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())[:500]


def say_failed(exc: BaseException) -> None:
    """Tell the other ranks, through the process group's store, that this rank failed and with what (one line);
    nothing if the store cannot be reached."""
    try:
        _store(2.0).set(f"{FAILED_KEY}{rank()}", _one_line(f"{type(exc).__name__}: {exc}") or type(exc).__name__)
    except Exception:  # the store's host is gone too: the others say this rank stopped answering
        pass


def failed_ranks(exc: BaseException, wait_s: float = 2.0) -> str:
    """The one line of a failed collective: which rank failed and what it said (its own error, told through the
    store), or which stopped answering (killed, or stalled in its data or its step), found by waiting ``wait_s``
    seconds for every rank still here to say so."""
    me, world = rank(), world_size()
    head = f"rank {me} of {world} stopped at a collective"
    try:
        store = _store(wait_s)
        store.set(f"{ALIVE_KEY}{me}", "1")
        others = [r for r in range(world) if r != me]
        said: dict[int, str] = {}
        deadline = time.monotonic() + wait_s
        while True:
            for r in others:
                if r not in said and store.check([f"{FAILED_KEY}{r}"]):
                    said[r] = store.get(f"{FAILED_KEY}{r}").decode("utf-8", "replace")
            alive = {r for r in others if store.check([f"{ALIVE_KEY}{r}"])}
            if said or len(alive) == len(others) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if said:
            what = "; ".join(f"rank {r} failed ({m})" for r, m in sorted(said.items()))
        else:
            gone = [r for r in others if r not in alive]
            what = ("; ".join(f"rank {r} stopped answering (killed, or stalled in its data or its step)"
                              for r in gone) or f"another rank stopped answering ({_one_line(exc)[:200]})")
    except Exception:  # the store went with the rank that held it (the main rank, launched without torchrun)
        what = "rank 0 (which holds the process group's store) stopped answering (killed, or stalled)"
    return f"{what}; {head}; the last checkpoint is kept"


@contextlib.contextmanager
def watch_ranks(wait_s: float = 2.0) -> Iterator[None]:
    """Around a distributed run: this rank's own error is told to the others (:func:`say_failed`) and raised as it
    is; a collective that fails because another rank raised, was killed or stalled past :data:`TIMEOUT_ENV` is a
    :class:`RankFailed` of one line naming that rank (:func:`failed_ranks`). Nothing in one process."""
    if not is_distributed():
        yield
        return
    try:
        yield
    except RankFailed:
        raise
    except Exception as exc:
        if is_collective_failure(exc):
            raise RankFailed(failed_ranks(exc, wait_s)) from None
        say_failed(exc)
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM: the others are told too
        say_failed(exc)
        raise
