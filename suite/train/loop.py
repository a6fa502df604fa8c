"""Small pieces every front-end's training loop uses."""
from __future__ import annotations

import os
import random
import sys
import time
import zlib
from typing import Any, Iterable, Iterator, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss

T = TypeVar("T")


def derive_seed(seed: int, *, rank: int = 0, epoch: int = 0, stream: str = "main") -> int:
    """The one seed derivation: a 32-bit seed (what every generator takes: python, NumPy, torch) from
    ``(seed, rank, epoch, stream)`` through NumPy's ``SeedSequence``: distinct inputs give independent streams
    (no collisions like ``seed + rank`` of seed 1 with ``seed + 1`` of seed 0). Every front-end seeds its process,
    its data order (stream ``batches``, :func:`suite.train.epoch_batches`) and its augmentation streams with it."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if rank < 0 or epoch < 0:
        raise ValueError(f"rank and epoch must be >= 0, got rank={rank}, epoch={epoch}")
    return int(np.random.SeedSequence([int(seed), int(rank), int(epoch), zlib.crc32(stream.encode())]).generate_state(1)[0])


def seeded_generator(seed: int, *, rank: int = 0, epoch: int = 0, stream: str = "main",
                     device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`derive_seed`."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, rank=rank, epoch=epoch, stream=stream))


def seed_everything(seed: int, deterministic: bool = False, rank: int = 0) -> torch.Generator:
    """Seed python, numpy and torch with stream ``main`` of ``(seed, rank)`` (:func:`derive_seed`); return a
    torch.Generator seeded likewise for data pipelines."""
    seed = derive_seed(seed, rank=rank)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def progress(it: Iterable[T], desc: str = "", total: int | None = None, unit: str = "it", **kw: Any) -> Iterator[T]:
    """tqdm progress bar on the main rank only (disabled with SUITE_NO_PROGRESS=1)."""
    disable = not sd.is_main() or os.environ.get("SUITE_NO_PROGRESS") == "1"
    return iter(tqdm(it, desc=desc, total=total, unit=unit, disable=disable, dynamic_ncols=True, file=sys.stderr, **kw))


class Throughput:
    """Items per second over a window (e.g. images/s, graphs/s, sentences/s)."""

    def __init__(self) -> None:
        self.items = 0
        self.t0 = time.perf_counter()

    def update(self, n: int) -> None:
        self.items += n

    @property
    def rate(self) -> float:
        dt = time.perf_counter() - self.t0
        return self.items / dt if dt > 0 else 0.0

    def reset(self) -> None:
        self.items, self.t0 = 0, time.perf_counter()


class LossLogger:
    """Running means of the loss and of the loss's own diagnostics over an epoch."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def update(self, loss_value: float, loss: ContrastiveLoss | None = None) -> None:
        self.count += 1
        vals = {"loss": loss_value, **(loss.diagnostics() if loss is not None else {})}
        for k, v in vals.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)

    def means(self) -> dict[str, float]:
        return {k: v / max(self.count, 1) for k, v in self.sums.items()}

    def reset(self) -> None:
        self.sums, self.count = {}, 0


def wrap_ddp(model: torch.nn.Module) -> torch.nn.Module:
    """DistributedDataParallel when a process group is active, else the model itself."""
    if not sd.is_distributed():
        return model
    dev = next(model.parameters()).device
    ids = [dev.index] if dev.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
