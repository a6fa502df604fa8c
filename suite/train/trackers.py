"""Curves where researchers already look (issue 51): the engine's step-curve points (:meth:`suite.train.Engine.log_curve`)
sent on to the trackers a run names in ``log_to`` (``--log-to tensorboard``), beside the registry.

* ``tensorboard``: event files in ``<run folder>/tensorboard`` (``tensorboard --logdir <run folder>``), one scalar per
  metric under ``train-step/``, the run's config and code version as text; the extra ``[tensorboard]``.

A tracker is an option, never a dependency: a missing package is one line naming the extra to install, before the run
builds anything; a tracker that fails while the run goes (disk full, a server gone) costs one warning and stops
itself, never the run or its registry row. MLflow and Weights & Biases are the rest of issue 51."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Protocol

KNOWN = {"tensorboard": ("tensorboard", "tensorboard")}  # tracker -> (its module, the extra that installs it)


class Tracker(Protocol):
    name: str

    def log(self, point: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def parse(spec: str | None) -> list[str]:
    """The tracker names of ``spec`` (``"tensorboard"``, comma-separated; empty: none), each checked: an unknown name,
    or one whose package is missing, is a ``ValueError`` of one line (the extra to install)."""
    names = [s.strip() for s in (spec or "").split(",") if s.strip()]
    for n in names:
        if n not in KNOWN:
            raise ValueError(f"log_to: unknown tracker {n!r}; choose from {', '.join(sorted(KNOWN))} (comma-separated)")
        module, extra = KNOWN[n]
        try:
            __import__(module)
        except ImportError:
            raise ValueError(f"log_to {n}: the package {module!r} is not installed; pip install "
                             f"'contrastive-suite[{extra}]'") from None
    return names


class TensorBoard:
    """Scalars in ``<folder>/tensorboard`` through ``torch.utils.tensorboard.SummaryWriter``."""

    name = "tensorboard"

    def __init__(self, folder: Path, info: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder / "tensorboard"))
        self.writer.add_text("run", "```\n" + json.dumps(info, indent=1, sort_keys=True, default=str) + "\n```", 0)

    def log(self, point: dict[str, float], step: int) -> None:
        for k, v in point.items():
            self.writer.add_scalar(f"train-step/{k}", v, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


class Guarded:
    """A tracker whose failure costs one warning and ends it; the run goes on."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker: Tracker | None = tracker

    def _do(self, what: str, *args: Any) -> None:
        if self.tracker is None:
            return
        try:
            getattr(self.tracker, what)(*args)
        except Exception as exc:  # noqa: BLE001 - a tracker never ends a run
            warnings.warn(f"tracker {self.tracker.name} failed ({type(exc).__name__}: {exc}); it logs nothing more, "
                          f"the run and its registry row go on", stacklevel=2)
            self.tracker = None

    def log(self, point: dict[str, float], step: int) -> None:
        self._do("log", point, step)

    def close(self) -> None:
        self._do("close")


def open_trackers(names: list[str], folder: Path, info: dict[str, Any]) -> list[Guarded]:
    """The trackers ``names`` for a run in ``folder`` (``info``: its id, config, code version and seed)."""
    makers = {"tensorboard": TensorBoard}
    out = []
    for n in names:
        try:
            out.append(Guarded(makers[n](folder, info)))
        except Exception as exc:  # noqa: BLE001 - a tracker that cannot start is a warning, not the run's end
            warnings.warn(f"tracker {n} could not start ({type(exc).__name__}: {exc}); the run goes on without it",
                          stacklevel=2)
    return out
