"""A measurement a benchmark has already taken (a timing, a memory peak), recorded as a registry row through the
run owner's :func:`suite.train.run.evaluation`, so a benchmark records before it renders and every row follows the
one rule (task, dataset, loss, config, headline, seed)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
