"""MoleculeNet fine-tuning (Hu et al. 2020 protocol, pretrain-gnns ``finetune.py``).

Encoder (pretrained or random) + linear head on the mean-pooled embedding, dropout 0.5, BCE with
missing labels masked out, Adam lr 1e-3, batch 32, 100 epochs, scaffold split 80/10/10. After every
epoch valid and test ROC-AUC (OGB convention, :class:`graph.mol.rocauc.RocAuc`) are computed; the
run reports test ROC-AUC at the last epoch (``test_rocauc_last``) and at the best-valid epoch
(``test_rocauc_bestval``), both recorded in the registry.

Example:
    >>> cfg = FinetuneMolConfig(dataset="bbbp", init="runs/mol-pretrain/graphcl-1a2b3c4d", seed=0)
    >>> res = finetune(cfg)   # one seed, one registry run (res.info: the ROC-AUCs); a benchmark suite loops over seeds
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph.mol.data import MolGraphs, get_featurizer, load_moleculenet
from graph.mol.splits import split as make_split
from graph.mol.rocauc import RocAuc
from graph.mol.model import MolGIN, MolGINConfig, MolPredictor, load_mol_encoder
from suite import distributed as sd
from suite.paths import data_path
from suite.config import RUN_OPTION, RunOptions, check_ints, check_numbers, is_int, is_number
from suite.train.run import RunContext, RunResult, Task, Training, run


@dataclass
class FinetuneMolConfig(MolGINConfig, RunOptions):
    # where and how it runs, not what: RunOptions, and eval_batch_size, data_root (marked RUN_OPTION)
    RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"checkpoint_every": 10, "keep_checkpoints": 0}
    RUN_HELP: ClassVar[dict[str, str]] = {
        "out": "run folder (default: runs/molnet-finetune/<set>-<init>-s<seed>-<hash>)",
        "keep_checkpoints": "checkpoints kept once the run has finished (0: none)"}
    dataset: str = "bbbp"
    init: str = field(default="none", metadata={"help": "encoder checkpoint (file or pretraining dir) or 'none'"})
    seed: int = field(default=0, metadata={"help": "seed of the head, dropout and batch order (and of the split when "
                                                   "it is random); one seed per run"})
    split: str = "scaffold"
    max_steps: int | None = field(default=None, metadata={
        "help": "stop after this many optimiser steps (the cut epoch is evaluated as the last) (default: all epochs)"})
    batch_size: int = 32
    dropout: float = 0.5
    eval_batch_size: int = field(default=512, metadata={RUN_OPTION: True})
    data_root: str | None = field(default=None, metadata={"help": "folder holding the MoleculeNet CSV files "
                                                                   "(default: $SUITE_DATA/moleculenet)", RUN_OPTION: True})


def check_config(cfg: FinetuneMolConfig) -> None:
    """Refuse settings no fine-tuning can use before the encoder or the data is read (``ValueError`` naming the field
    and the value)."""
    from graph.mol.splits import SPLITS

    check_ints(cfg, {"epochs": 1, "batch_size": 2, "eval_batch_size": 1, "num_layers": 1, "emb_dim": 1})
    if cfg.max_steps is not None and not (is_int(cfg.max_steps) and cfg.max_steps >= 1):
        raise ValueError(f"max_steps must be >= 1 or None, got {cfg.max_steps}")
    if not (is_number(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {cfg.lr!r}")
    check_numbers(cfg, {"weight_decay": 0.0})
    if not (is_number(cfg.dropout) and 0 <= cfg.dropout < 1):
        raise ValueError(f"dropout must be in [0, 1), got {cfg.dropout!r}")
    if cfg.split not in SPLITS:
        raise ValueError(f"unknown split {cfg.split!r}; choose from {SPLITS}")


def masked_bce(logits: Tensor, y: Tensor) -> Tensor:
    """BCE-with-logits averaged over the labelled entries. Shapes: logits, y (B, T), NaN = missing -> ()."""
    mask = ~torch.isnan(y)
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits[mask], y[mask])


@torch.no_grad()
def predict(model: nn.Module, graphs: MolGraphs, idx: Tensor, batch_size: int, device: torch.device) -> Tensor:
    """Logits (len(idx), T) in eval mode."""
    model.eval()
    out = [model(graphs.batch(chunk).to(device)).float().cpu() for chunk in idx.split(batch_size)]
    return torch.cat(out) if out else torch.zeros(0, len(graphs.tasks))


def _score(evaluator: RocAuc, y: Tensor, s: Tensor) -> float:
    try:
        return evaluator(y, s)["rocauc"]
    except ValueError:  # no task with both classes in this split
        return float("nan")


class FinetuneMolTask(Task[FinetuneMolConfig]):
    """MoleculeNet fine-tuning as a :class:`suite.train.run.Task` (task ``molnet-finetune``, headline: test ROC-AUC at
    the last epoch). Each epoch is scored on valid and test (split ``valid`` / ``test``, metric ``rocauc``). A
    ROC-AUC that is undefined (a split with one class in every task) is counted, not logged. The run owner seeds,
    checkpoints (every ``checkpoint_every`` epochs, removed when the run has finished unless ``keep_checkpoints``),
    resumes and records it; nothing is exported."""

    modality, name, primary = "graph", "molnet-finetune", ("rocauc_last", "test")

    def __init__(self, graphs: MolGraphs | None = None) -> None:
        self.graphs = graphs
        self.init: dict[str, Any] | None = None
        self.label = "none"
        self.best = {"epoch": 0, "valid": -math.inf, "test": float("nan")}
        self.last = {"valid": float("nan"), "test": float("nan")}
        self.undefined = 0
        self.load_s = 0.0

    def stem(self, cfg: FinetuneMolConfig) -> str:
        return f"{cfg.dataset}-{Path(cfg.init).name or 'none'}-s{cfg.seed}"

    def data_inputs(self, cfg: FinetuneMolConfig) -> dict[str, str | Path]:
        """The MoleculeNet CSV the set is read from (a set handed in as graphs: none); reuse and resume decide on its
        content (issue 69, class A)."""
        if self.graphs is not None:
            return {}
        return {"data": Path(cfg.data_root) / f"{cfg.dataset}.csv" if cfg.data_root is not None
                else data_path("moleculenet", f"{cfg.dataset}.csv")}

    def loss_name(self, cfg: FinetuneMolConfig) -> str:
        return self.label

    def record(self, cfg: FinetuneMolConfig, experiment: dict[str, Any], training: Training) -> dict[str, Any]:
        return {**experiment, "init_spec": None if self.init is None else self.init["spec"]}

    def keep_checkpoints(self, cfg: FinetuneMolConfig) -> int:
        return cfg.keep_checkpoints

    def build(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig]) -> Training:
        check_config(cfg)
        featurizer = cfg.featurizer
        if cfg.init.lower() not in ("none", ""):
            pre, spec = load_mol_encoder(cfg.init)
            self.init = {"spec": spec, "state": pre.state_dict()}
            self.label, featurizer = str(spec["loss"]), spec["featurizer"]
            if featurizer != cfg.featurizer:
                warnings.warn(f"using the encoder's featurizer {featurizer!r} (config says {cfg.featurizer!r})", stacklevel=2)
        t0 = time.perf_counter()
        graphs = self.graphs if self.graphs is not None else load_moleculenet(cfg.dataset, featurizer, cfg.data_root)
        self.graphs, self.load_s = graphs, time.perf_counter() - t0
        if graphs.y is None or not graphs.tasks:
            raise ValueError(f"{cfg.dataset}: no labels to fine-tune on")
        if not bool((~torch.isnan(graphs.y)).any()):  # every label cell missing or not a number: nothing to learn
            raise ValueError(f"{cfg.dataset}: no usable label ({graphs.bad_labels} non-numeric label cell(s), the rest "
                             f"empty, in {len(graphs.tasks)} task column(s) of {len(graphs)} molecules): nothing to "
                             "fine-tune on or score")
        # the scaffold split is deterministic; random splits follow the run's seed
        train, self.valid, self.test = make_split(graphs.smiles, cfg.split,
                                                  seed=cfg.seed if cfg.split in ("random", "random_scaffold") else 0)
        if not bool((~torch.isnan(graphs.y[train])).any()):
            raise ValueError(f"{cfg.dataset}: the {cfg.split} split's training part ({train.numel()} molecules) has no "
                             "usable label: nothing to fine-tune on")
        if self.init is not None:
            spec = self.init["spec"]
            enc = MolGIN(spec["num_layers"], spec["emb_dim"], cfg.dropout, get_featurizer(spec["featurizer"]))
            enc.load_state_dict(self.init["state"])
        else:
            enc = MolGIN(cfg.num_layers, cfg.emb_dim, cfg.dropout, get_featurizer(cfg.featurizer))
        model = MolPredictor(enc, len(graphs.tasks)).to(ctx.device)

        def step(idx: Tensor) -> Tensor:
            b = graphs.batch(idx).to(ctx.device)
            return masked_bce(ctx.engine.ddp(b), b.y)  # type: ignore[arg-type, union-attr]

        return Training(model, torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay),
                        lambda epoch: [train[b] for b in ctx.epoch_batches(train.numel(), cfg.batch_size, epoch)],
                        step, epochs=cfg.epochs, max_steps=cfg.max_steps, rate_name="finetune_mol_per_s",
                        compile=cfg.compile)

    def on_epoch(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training, epoch: int,
                 stats: dict[str, float]) -> None:
        if sd.is_main():
            self._score(cfg, ctx, training, epoch)

    def _score(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training, epoch: int) -> None:
        graphs, ev = self.graphs, RocAuc()
        assert graphs is not None and graphs.y is not None
        self.last = {name: _score(ev, graphs.y[idx], predict(training.model, graphs, idx, cfg.eval_batch_size, ctx.device))
                     for name, idx in (("valid", self.valid), ("test", self.test))}
        training.model.train()
        for split_name, v in self.last.items():
            if math.isnan(v):
                self.undefined += 1
            else:
                ctx.log({"rocauc": v}, split=split_name, step=epoch)
        if not math.isnan(self.last["valid"]) and self.last["valid"] > self.best["valid"]:
            self.best = {"epoch": epoch, "valid": self.last["valid"], "test": self.last["test"]}

    def state(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training) -> dict[str, Any]:
        return {"best": self.best, "last": self.last, "undefined": self.undefined}

    def restore(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training,
                state: dict[str, Any]) -> None:
        self.best, self.last, self.undefined = dict(state["best"]), dict(state["last"]), int(state["undefined"])

    def evaluate(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training) -> dict[str, float]:
        engine = ctx.engine
        assert engine is not None and self.graphs is not None
        self.epochs_run = engine.epoch
        if engine.batch_in_epoch:  # max_steps cut an epoch: it is evaluated as the last
            self.epochs_run += 1
            self._score(cfg, ctx, training, self.epochs_run)
        if self.undefined:
            warnings.warn(f"{cfg.dataset} seed {cfg.seed}: ROC-AUC undefined (one class only) in {self.undefined} "
                          "split evaluations; not logged", stacklevel=2)
        self.result = {"test_rocauc_last": self.last["test"], "valid_rocauc_last": self.last["valid"],
                       "test_rocauc_bestval": self.best["test"], "valid_rocauc_best": self.best["valid"],
                       "best_epoch": float(self.best["epoch"]), "epochs_run": float(self.epochs_run),
                       "steps": float(engine.step), "finetune_mol_per_s": engine.throughput.rate,
                       "undefined_rocauc": float(self.undefined)}
        ctx.log({"best_epoch": self.result["best_epoch"], "finetune_mol_per_s": self.result["finetune_mol_per_s"],
                 "undefined_rocauc": float(self.undefined), "molecules": len(self.graphs), "skipped": self.graphs.skipped,
                 "non_numeric_labels": self.graphs.bad_labels}, split="info")
        return {k: v for k, v in (("rocauc_last", self.last["test"]), ("rocauc_bestval", self.best["test"]))
                if not math.isnan(v)}


def finetune(cfg: FinetuneMolConfig, graphs: MolGraphs | None = None) -> RunResult:
    """Fine-tune on ``cfg.dataset`` with ``cfg.seed`` through the run owner; one registry run. Returns the owner's
    result (``metrics``: ``rocauc_last``, ``rocauc_bestval`` where defined) with the front-end's summary in ``info``
    (dataset, seed, init, loss, molecule counts, ``test_rocauc_last``, ``test_rocauc_bestval``, ``best_epoch``, ...)."""
    task = FinetuneMolTask(graphs)
    res = run(task, cfg)
    g = task.graphs
    assert g is not None
    res.info = {"dataset": cfg.dataset, "seed": cfg.seed, "init": cfg.init, "loss": task.label,
                "molecules": len(g), "skipped": g.skipped, "non_numeric_labels": g.bad_labels,
                "load_s": task.load_s, **task.result}
    return res
