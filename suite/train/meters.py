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


def diagnostic_values(loss: Any) -> dict[str, Tensor | float]:
    """A loss's diagnostics as they are, tensors left on their device (a :class:`ContrastiveLoss` keeps them as
    tensors); a loss of another kind through its ``diagnostics()``."""
    raw = getattr(loss, "diagnostic_tensors", None)
    return dict(raw() if callable(raw) else (loss.diagnostics() if hasattr(loss, "diagnostics") else {}))


class LossLogger:
    """Running means of the loss and of the loss's own diagnostics over an epoch. The sums stay where the values are
    (on the device: no host read per step); :meth:`means` reads them all at once."""

    def __init__(self) -> None:
        self.sums: dict[str, Tensor | float] = {}
        self.count = 0

    def update(self, loss_value: Tensor | float, loss: ContrastiveLoss | None = None) -> None:
        self.count += 1
        vals = {"loss": loss_value, **(diagnostic_values(loss) if loss is not None else {})}
        for k, v in vals.items():
            v = v.detach().float() if isinstance(v, Tensor) else float(v)
            self.sums[k] = v if k not in self.sums else self.sums[k] + v

    def means(self) -> dict[str, float]:
        if not self.sums:
            return {}
        keys = list(self.sums)
        dev = next((v.device for v in self.sums.values() if isinstance(v, Tensor)), torch.device("cpu"))
        vals = torch.stack([torch.as_tensor(self.sums[k], dtype=torch.float32).to(dev).reshape(()) for k in keys])
        return dict(zip(keys, (v / max(self.count, 1) for v in vals.tolist())))  # one host read

    def reset(self) -> None:
        self.sums, self.count = {}, 0
