"""The order of a run's data and the host's part of its steps: the epoch rule (:func:`epoch_batches`), evaluation's
batches (:func:`eval_batches`) and :class:`Prefetch` (a step's collate run ahead of it in ``DataLoader`` workers).

The epoch rule for contrastive training (:func:`epoch_batches`): a permutation seeded by
(seed, epoch) is cut to a multiple of ``batch_size * world_size``; global batch j is split into
equal per-rank slices, so every rank runs the same number of steps with the same batch size and the
union of the ranks' batch j equals the batch j one process would see with ``batch_size * world_size``.
Under torch.distributed the last partial global batch is dropped (ranks must run the same steps
with equal batches). In one process it is kept when it holds at least 2 examples (a contrastive
batch), as GraphCL's and SimCSE's released code do: dropping it would cost small TU data sets a third
of their graphs per epoch (MUTAG: 188 graphs, batch 128). A data set smaller than one batch trains on
one batch of all of it (with a warning).
Evaluation drops nothing (:func:`eval_batches`).

The order of an epoch is a pure function of (seed, epoch), so a resumed run sees the same batches
(:class:`suite.train.Engine`'s checkpoints hold the position within the epoch).

A read that hangs in its worker (a file on a hard-mounted share that went away: the read never returns and no
signal ends it) does not hang the run: when no batch comes from the workers within :data:`STALL_S` seconds, the run
stops with a :class:`suite.faults.DataStall` of one line naming what each worker has been reading, and for how long
(what a read declares with :func:`reading`), and keeps its last checkpoint.
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import time
import warnings
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor

from suite import distributed as sd
from suite.faults import DataStall
from suite.train.seeding import seeded_generator

STALL_S = 600.0  # seconds without a batch from the data workers before the run stops (DataStall)


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, shuffle: bool = True) -> list[Tensor]:
    """This rank's index batches of ``epoch`` for contrastive training (the one rule, see the module
    docstring): equal batches of ``batch_size`` on every rank, the last partial global batch dropped
    under torch.distributed and kept (if >= 2 examples) in one process.
    The order is a pure function of (seed, epoch), so a resumed run sees the same batches."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ws, r = sd.world_size(), sd.rank()
    k = n // (batch_size * ws)
    if k == 0:  # a data set smaller than one batch: one batch of all of it (per rank n // ws)
        if n // ws < 2:
            raise ValueError(f"{n} training examples make no contrastive batch (>= 2 per rank) on {ws} rank(s)")
        if epoch == 0:
            warnings.warn(f"{n} training examples are fewer than one batch of {batch_size} x {ws} rank(s); "
                          f"training with batches of {n // ws} per rank", stacklevel=2)
        batch_size, k = n // ws, 1
    if shuffle:
        perm = torch.randperm(n, generator=seeded_generator(seed, epoch=epoch, stream="batches"))
    else:
        perm = torch.arange(n)
    out = list(perm[: k * batch_size * ws].view(k, ws, batch_size)[:, r])  # k x (batch_size,)
    if ws == 1 and n - k * batch_size >= 2:  # one process: the last partial batch is kept
        out.append(perm[k * batch_size:])
    return out


def eval_batches(n: int, batch_size: int) -> list[Tensor]:
    """Sequential index batches over all ``n`` examples: evaluation drops nothing."""
    return list(torch.arange(n).split(batch_size))


# ----------------------------------------------------------------------------- the host's part, ahead of the step

class _Board:
    """What each data worker is reading now and since when: one slot of shared memory a worker (forked: inherited),
    written by the workers (:func:`reading`) and read by the run when no batch comes."""

    SLOT = 1024  # bytes a worker's slot holds: the start time, a space, the name (cut at a character)

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.buf = multiprocessing.RawArray(ctypes.c_char, workers * self.SLOT)

    def set(self, worker: int, what: str) -> None:
        text = f"{time.time():.3f} {what}".encode("utf-8", "backslashreplace")[: self.SLOT - 1] if what else b""
        text = text.decode("utf-8", "ignore").encode("utf-8")
        start = worker * self.SLOT
        self.buf[start:start + len(text) + 1] = text + b"\0"

    def get(self, worker: int) -> tuple[float, str] | None:
        """(seconds since the worker began, what) it is reading; None when it reads nothing."""
        raw = bytes(self.buf[worker * self.SLOT:(worker + 1) * self.SLOT]).split(b"\0", 1)[0]
        if not raw:
            return None
        since, _, what = raw.decode("utf-8", "replace").partition(" ")
        return max(0.0, time.time() - float(since)), what  # the start is kept to the millisecond


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Declare, in a data worker, that it is reading ``what`` (a file, a shard's member: the words the stall message
    names it by) while the block runs; nothing outside a worker of :class:`Prefetch`."""
    info = torch.utils.data.get_worker_info()
    board = getattr(info.dataset, "board", None) if info is not None else None
    if board is None:
        yield
        return
    board.set(info.id, what)
    try:
        yield
    finally:
        board.set(info.id, "")


class _Collated(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, collate: Callable[[Any], Any], board: _Board | None = None) -> None:
        self.collate, self.board = collate, board

    def __getitem__(self, batch: Any) -> Any:
        return self.collate(batch)


class _Batches(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """The batches of the current epoch, set before each pass (the sampler runs in the training process)."""

    def __init__(self) -> None:
        self.batches: Sequence[Any] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class Prefetch:
    """``collate`` of each batch, in order: in this process (``workers`` 0), or in persistent ``DataLoader`` workers
    that run ahead of the step (forked, so they share the data; their seeds come from a generator of their own, so the
    training process's random streams are the same with and without them). With workers, no batch within ``stall_s``
    seconds is a :class:`suite.faults.DataStall` naming what each worker is reading (:func:`reading`)."""

    def __init__(self, collate: Callable[[Any], Any], workers: int = 0, pin: bool = False,
                 stall_s: float = STALL_S) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        if not stall_s > 0:
            raise ValueError(f"stall_s must be > 0 seconds, got {stall_s!r}")
        self.collate, self.sampler, self.stall_s = collate, _Batches(), stall_s
        self.loader, self.board = None, None
        if workers:
            self.board = _Board(workers)
            self.loader = torch.utils.data.DataLoader(
                _Collated(collate, self.board), sampler=self.sampler, batch_size=None, num_workers=workers,
                pin_memory=pin, persistent_workers=True, prefetch_factor=4, timeout=stall_s,
                generator=torch.Generator().manual_seed(0))

    def __call__(self, batches: Sequence[Any]) -> Iterator[Any]:
        if self.loader is None:
            return map(self.collate, batches)
        self.sampler.batches = batches
        return self._watched(iter(self.loader))

    def _watched(self, it: Iterator[Any]) -> Iterator[Any]:
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            except RuntimeError as exc:
                if "DataLoader timed out" not in str(exc):
                    raise
                raise DataStall(self.stalled()) from None
            yield batch

    def stalled(self) -> str:
        """The stall's one line: what each worker has been reading, and for how long."""
        assert self.board is not None
        now = [(i, got) for i in range(self.board.workers) if (got := self.board.get(i)) is not None]
        head = f"no batch from the {self.board.workers} data worker(s) in {self.stall_s:g} s"
        if not now:
            return (f"{head}, and none of them is reading a file: the batch's preparation itself is stuck or slow "
                    f"(--workers 0 runs it in the training process); the last checkpoint is kept")
        what = "; ".join(f"worker {i} has been reading {name} for {age:.0f} s" for i, (age, name) in now)
        return f"{head}: {what} (a hung mount or network share?); the last checkpoint is kept"

    def close(self) -> None:
        self.loader = None  # the workers end with the loader


__all__ = ["STALL_S", "Prefetch", "epoch_batches", "eval_batches", "reading"]
