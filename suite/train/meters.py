"""What a training loop shows and counts: the progress bar, the throughput and the running loss means."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterable, Iterator, TypeVar

import torch
from torch import Tensor
from tqdm.auto import tqdm

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss

T = TypeVar("T")


def bar(total: int | None = None, desc: str = "", unit: str = "it", it: Iterable[Any] | None = None, **kw: Any) -> Any:
    """A tqdm bar with rate and ETA on stderr, on the main rank only (disabled with SUITE_NO_PROGRESS=1): over ``it``,
    or updated by hand (``update(n)``)."""
    disable = not sd.is_main() or os.environ.get("SUITE_NO_PROGRESS") == "1"
    return tqdm(it, total=total, desc=desc, unit=unit, disable=disable, dynamic_ncols=True, file=sys.stderr, **kw)


def progress(it: Iterable[T], desc: str = "", total: int | None = None, unit: str = "it", **kw: Any) -> Iterator[T]:
    """:func:`bar` over an iterable."""
    return iter(bar(total, desc, unit, it, **kw))


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


def diagnostic_values(loss: Any) -> dict[str, Tensor | float]:
    """A loss's diagnostics as they are, tensors left on their device (a :class:`ContrastiveLoss` keeps them as
    tensors); a loss of another kind through its ``diagnostics()``."""
    raw = getattr(loss, "diagnostic_tensors", None)
    return dict(raw() if callable(raw) else (loss.diagnostics() if hasattr(loss, "diagnostics") else {}))


class LossLogger:
    """Running means of the loss and of the loss's own diagnostics over an epoch (host values: the engine feeds it the
    values it read from the device, a window of steps at a time)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def update(self, loss_value: float, diagnostics: dict[str, Any] | ContrastiveLoss | None = None) -> None:
        """One micro-batch: its loss and its loss's diagnostics (a dict of values, or the loss itself)."""
        self.count += 1
        if diagnostics is not None and not isinstance(diagnostics, dict):
            diagnostics = diagnostics.diagnostics()
        for k, v in {"loss": loss_value, **(diagnostics or {})}.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)

    def means(self) -> dict[str, float]:
        return {k: v / max(self.count, 1) for k, v in self.sums.items()}

    def reset(self) -> None:
        self.sums, self.count = {}, 0
