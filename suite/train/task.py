"""What a front-end hands the run owner (:func:`suite.train.run.run`) and what it sees of its run: a :class:`Task`
(what to build, how to evaluate, what to export; its headline), the :class:`Training` its ``build`` returns (model,
optimiser, batches, step, how long), the :class:`RunContext` it builds and evaluates in (device, folder, seeded
generators, logging, a checkpoint now) and the :class:`RunResult` every entry function returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Generic, Sequence, TypeVar

import torch
from torch import Tensor, nn

from suite import distributed as sd
from suite.train.batches import epoch_batches
from suite.train.engine import LOG_EVERY, CachedStep, Engine
from suite.train.legacy import Earlier
from suite.train.seeding import seeded_generator

C = TypeVar("C")


@dataclass
class Training:
    """What :meth:`Task.build` returns: the module the checkpoints and the export hold, its optimiser, the epoch's
    batches, the step (batch -> loss, or a :class:`suite.train.CachedStep`) and how long to train."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batches: Callable[[int], Sequence[Any]]
    step: Callable[[Any], Tensor | CachedStep]
    epochs: int | None = None
    max_steps: int | None = None
    scheduler: Any = None
    loss: Any = None  # the contrastive loss (its diagnostics are logged); None for a supervised task
    precision: str = "fp32"
    grad_clip: float = 0.0
    on_step: Callable[[], None] | None = None
    size: Callable[[Any], int] | None = None
    rate_name: str = "items_per_s"
    unit: str = "batch"
    data_info: dict[str, float] = field(default_factory=dict)  # logged once as split "data"
    checkpoint_unit: str = "epoch"  # what cfg.checkpoint_every counts: "epoch" or "step"
    checkpoint_steps: int = 0  # also a checkpoint every this many optimiser steps, mid-epoch (long epochs; 0: off)
    log_epochs: bool = True  # the engine logs each epoch's training stats (a task that logs its own: False)
    log_every: int = LOG_EVERY  # optimiser steps between the engine's host reads (no read per step on a GPU)
    compile: bool = False  # the forward through torch.compile (opt-in)
    collate: Callable[[Any], Any] | None = None  # the host's part of a step: step() then takes its result (Engine.fit)
    workers: int = 0  # DataLoader workers that run collate ahead of the step (0: in the training process)


class Task(Generic[C]):
    """A front-end's part of a run. Override :meth:`build` and :meth:`evaluate`; the rest has defaults."""

    modality: ClassVar[str] = ""
    name: ClassVar[str] = ""  # the registry task
    primary: ClassVar[tuple[str, str | None] | None] = None  # the headline (metric, split) of the evaluation
    eval_split: ClassVar[str | None] = "test"  # the split :meth:`evaluate`'s metrics are logged as
    model_type: ClassVar[str] = ""  # the export's model type (``from_pretrained`` checks it); "" = no export
    earlier: ClassVar[Earlier] = Earlier()  # what earlier versions of the task left in a run folder (data)

    def stem(self, cfg: C) -> str:
        """The readable part of the default folder name."""
        return f"{self.dataset(cfg)}-{self.loss_name(cfg)}-s{getattr(cfg, 'seed', 0)}"

    def dataset(self, cfg: C) -> str:
        return str(getattr(cfg, "dataset", ""))

    def loss_name(self, cfg: C) -> str:
        return str(getattr(cfg, "loss", ""))

    def data_inputs(self, cfg: C) -> dict[str, str | Path | list[str]]:
        """The data files and folders the run reads, by name (e.g. ``{"data": <TU raw folder>}``; a list of files:
        shards): the run owner records their identity (:func:`suite.inputs.data_identity`, a digest of the content of
        a small set, a manifest of a large one) with the row and every checkpoint, and reuses or resumes only while it
        is the same. Found from the config alone, before anything is read."""
        return {}

    def run_info(self, cfg: C) -> dict[str, Any]:
        """Facts recorded with the row's run options (never hashed), e.g. which built start model a run used."""
        return {}

    def record(self, cfg: C, experiment: dict[str, Any], training: Training) -> dict[str, Any]:
        """The experiment config recorded with the registry row (default: the config less its run options)."""
        return experiment

    def build(self, cfg: C, ctx: "RunContext[C]") -> Training:
        raise NotImplementedError

    def evaluate(self, cfg: C, ctx: "RunContext[C]", training: Training) -> dict[str, float]:
        return {}

    def on_epoch(self, cfg: C, ctx: "RunContext[C]", training: Training, epoch: int, stats: dict[str, float]) -> None:
        """After every epoch, before its checkpoint (e.g. an evaluation during training)."""

    def state(self, cfg: C, ctx: "RunContext[C]", training: Training) -> dict[str, Any]:
        """Task state a checkpoint carries besides the engine's (tensors and plain data)."""
        return {"loss": training.loss.state_dict()} if isinstance(training.loss, nn.Module) else {}

    def restore(self, cfg: C, ctx: "RunContext[C]", training: Training, state: dict[str, Any]) -> None:
        if isinstance(training.loss, nn.Module) and "loss" in state:
            training.loss.load_state_dict(state["loss"])

    def keep_checkpoints(self, cfg: C) -> int:
        """How many checkpoints stay (0: none once the run has finished)."""
        return getattr(cfg, "keep_checkpoints", 2)

    def export_module(self, cfg: C, training: Training) -> nn.Module | None:
        """The module exported at the end (default: the trained model when :attr:`model_type` is set). A module with
        its own ``save_pretrained(path)`` writes itself; any other is saved with :meth:`export_config`."""
        return training.model if self.model_type else None

    def export(self, cfg: C, ctx: "RunContext[C]", training: Training, module: nn.Module, path: Path) -> None:
        """Write ``module`` to ``path``: its own ``save_pretrained(path)``, else :func:`suite.pretrained.save_pretrained`
        with :attr:`model_type` and :meth:`export_config`; then the card (:meth:`card`). The run owner adds
        ``run.json``."""
        from suite.model_card import write_card
        from suite.pretrained import save_pretrained

        if callable(getattr(module, "save_pretrained", None)):
            module.save_pretrained(path)  # type: ignore[operator]
        else:
            save_pretrained(module, path, self.model_type, self.export_config(cfg, training))
        info = self.card(cfg, ctx, training)
        if info is not None:
            write_card(path, info)

    def export_config(self, cfg: C, training: Training) -> dict[str, Any]:
        """What rebuilds the exported module (written to ``config.json`` beside the weights)."""
        return {}

    def card(self, cfg: C, ctx: "RunContext[C]", training: Training) -> dict[str, Any] | None:
        """The export's model card (:func:`suite.model_card.card_info`), or None for none."""
        return None


@dataclass
class RunContext(Generic[C]):
    """What a task sees of its run while it builds and evaluates."""

    cfg: C
    device: torch.device
    folder: Path
    seed: int
    run: Any = None  # the registry run (main rank), or None
    engine: Engine[Any] | None = None
    generators: dict[str, torch.Generator] = field(default_factory=dict)
    moved: dict[str, Path] = field(default_factory=dict)  # today's name -> where an earlier layout keeps it

    def path(self, name: str) -> Path:
        """``<folder>/<name>``, or where the task's earlier layout keeps it when the folder is of that layout."""
        return self.moved.get(name, self.folder / name)

    def generator(self, stream: str, per_rank: bool = True, device: str | torch.device = "cpu") -> torch.Generator:
        """The generator of ``stream`` on ``device``: this rank's own (augmentations, dropout-like noise), or with
        ``per_rank=False`` the same on every rank (data). Ask for it in :meth:`Task.build`: the checkpoints save it, a
        resume restores it."""
        if stream not in self.generators:
            self.generators[stream] = seeded_generator(self.seed, rank=sd.rank() if per_rank else 0, stream=stream,
                                                       device=device)
        return self.generators[stream]

    def epoch_batches(self, n: int, batch_size: int, epoch: int) -> list[Tensor]:
        """The contrastive epoch rule (:func:`suite.train.epoch_batches`) for this run's seed."""
        return epoch_batches(n, batch_size, self.seed, epoch)

    def log(self, metrics: dict[str, float], split: str | None, step: int | None = None) -> None:
        if not metrics:
            return
        if self.engine is not None:
            self.engine.flush()  # nothing is logged after a non-finite loss the engine has not read yet
            self.engine.record(metrics, split=split, step=step)  # the registry row and the trackers
        elif self.run is not None:
            self.run.log_many(metrics, split=split, step=step)

    def checkpoint(self) -> None:
        """Write a checkpoint now (e.g. after an evaluation that picked a new best state); every rank calls it."""
        assert self._save is not None, "checkpoint() is available while the run trains"
        self._save()

    _save: Callable[[], None] | None = field(default=None, repr=False)


@dataclass
class RunResult:
    """What every entry function returns: the run's folder, registry row, evaluation (``metrics``, the task's
    :attr:`Task.eval_split`), progress, time and export; ``reused``: the id of the finished row returned instead of a
    run, whose final metrics of every split are ``recorded`` (``"<split>/<name>"``); ``info``: the task's own summary
    (data counts, training stats)."""

    folder: Path
    run_id: str | None
    metrics: dict[str, float]
    epochs: int
    steps: int
    resumed_from: int  # the epoch the run resumed at (0: a fresh run)
    wall_s: float
    export: Path | None
    reused: str | None = None
    recorded: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
