"""A measurement a benchmark has already taken (a timing, a memory peak), recorded as a registry row through the
run owner's :func:`suite.train.run.evaluation`, so a benchmark records before it renders and every row follows the
one rule (task, dataset, loss, config, headline, seed); and read back (:func:`latest`: the newest committed run per
cell) by the tables that show them."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from suite.registry.queries import committed, versions_text
from suite.train.run import RunContext, Task, evaluation


@dataclass
class Measurement:
    task: str
    dataset: str
    loss: str
    config: dict[str, Any]  # the measured setting (the row's config)
    metrics: dict[str, float]
    primary: str  # the headline metric
    split: str = "bench"
    loss_hparams: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


class MeasuredTask(Task[Measurement]):
    modality = "core"

    def __init__(self, m: Measurement) -> None:
        self.name, self.eval_split, self.primary = m.task, m.split, (m.primary, m.split)

    def dataset(self, cfg: Measurement) -> str:
        return cfg.dataset

    def loss_name(self, cfg: Measurement) -> str:
        return cfg.loss

    def record(self, cfg: Measurement, experiment: dict[str, Any], training: Any) -> dict[str, Any]:
        return dict(cfg.config)

    def evaluate(self, cfg: Measurement, ctx: RunContext[Measurement], training: Any) -> dict[str, float]:
        return dict(cfg.metrics)


@dataclass
class _Hparams:
    values: dict[str, Any]

    def hparams(self) -> dict[str, Any]:
        return self.values


def record(registry: Any, m: Measurement) -> str | None:
    """Record ``m`` in ``registry``; returns the run id."""
    return evaluation(MeasuredTask(m), m, registry=registry, loss=_Hparams(m.loss_hparams)).run_id


@dataclass
class Recorded:
    """A recorded measurement read back: its registry row, config and final metrics (split ``bench``)."""
    row: dict[str, Any]
    config: dict[str, Any]
    metrics: dict[str, float]

    @property
    def code_version(self) -> str:
        return str(self.row.get("code_version") or "?")


def latest(registry: Any, task: str, key: Callable[[Recorded], Hashable], allow_dirty: bool = False
           ) -> dict[Hashable, Recorded]:
    """The newest finished run of ``task`` per cell (``key`` of the run), leaving out runs from uncommitted code
    (:func:`suite.registry.queries.committed`; ``allow_dirty``: every run, for a try-out's own table). A table built from
    these shows exactly what the registry holds, one measurement per cell."""
    return {k: runs[-1] for k, runs in every(registry, task, key, allow_dirty).items()}


def every(registry: Any, task: str, key: Callable[[Recorded], Hashable], allow_dirty: bool = False
          ) -> dict[Hashable, list[Recorded]]:
    """Every finished run of ``task`` per cell, oldest first (the rules of :func:`latest`)."""
    out: dict[Hashable, list[Recorded]] = {}
    for r in registry.runs(status="finished", task=task):  # oldest first
        if not (allow_dirty or committed(r)):
            continue
        fm = registry.final_metrics(r["id"])
        m = Recorded(r, json.loads(r["config"] or "{}"), {n: v for (n, s), v in fm.items() if s == "bench"})
        out.setdefault(key(m), []).append(m)
    return out


def versions_line(runs: Iterable[Recorded]) -> str:
    """``Code versions of these runs (commit: runs): 1a2b3c: 40.`` (most runs first)."""
    return versions_text(Counter(r.code_version for r in runs))


def one(values: Iterable[Any]) -> str:
    """The distinct values of a setting across a table's runs: ``1``, or ``1 / 2`` where runs differ."""
    return " / ".join(str(v) for v in sorted(set(values), key=str))
