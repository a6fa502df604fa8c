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
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor

from suite import distributed as sd
from suite.train.seeding import seeded_generator


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

class _Collated(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, collate: Callable[[Any], Any]) -> None:
        self.collate = collate

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
    training process's random streams are the same with and without them)."""

    def __init__(self, collate: Callable[[Any], Any], workers: int = 0, pin: bool = False) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        self.collate, self.sampler = collate, _Batches()
        self.loader = None
        if workers:
            self.loader = torch.utils.data.DataLoader(
                _Collated(collate), sampler=self.sampler, batch_size=None, num_workers=workers, pin_memory=pin,
                persistent_workers=True, prefetch_factor=4, generator=torch.Generator().manual_seed(0))

    def __call__(self, batches: Sequence[Any]) -> Iterator[Any]:
        if self.loader is None:
            return map(self.collate, batches)
        self.sampler.batches = batches
        return iter(self.loader)

    def close(self) -> None:
        self.loader = None  # the workers end with the loader


__all__ = ["Prefetch", "epoch_batches", "eval_batches"]
