"""What a training loop shows and counts: the progress bar, the throughput and the running loss means."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterable, Iterator, TypeVar

from tqdm.auto import tqdm

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss

T = TypeVar("T")


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
