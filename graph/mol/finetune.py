"""MoleculeNet fine-tuning (Hu et al. 2020 protocol, pretrain-gnns ``finetune.py``).

Encoder (pretrained or random) + linear head on the mean-pooled embedding, dropout 0.5, BCE with
missing labels masked out, Adam lr 1e-3, batch 32, 100 epochs, scaffold split 80/10/10. After every
epoch valid and test ROC-AUC (OGB convention, :class:`graph.mol.rocauc.RocAuc`) are computed; the
run reports test ROC-AUC at the last epoch (``test_rocauc_last``) and at the best-valid epoch
(``test_rocauc_bestval``), both recorded in the registry.

Your own molecules (issue 80, chemprop's interface): ``data`` names a CSV with a SMILES column and one column per
target (task ``mol-finetune``; the registry names the set ``<file name>@<content fingerprint>``). Classification
(every target value 0 or 1, unless ``task`` says) is scored as above; regression standardises each target on the
training part (mean, standard deviation), trains with the mean squared error over the labelled entries and reports
RMSE and MAE in the targets' own units (averaged over targets, as chemprop). The split is scaffold, random or
``given`` (a column naming each molecule's part). The fine-tuned model is exported (``<run>/export``: safetensors
weights, ``config.json`` with the encoder, the targets, the task and the target scaling, the model card), which
``suite graph predict`` (:mod:`graph.mol.predict`) reads.

Example:
    >>> cfg = FinetuneMolConfig(dataset="bbbp", init="runs/mol-pretrain/graphcl-1a2b3c4d", seed=0)
    >>> res = finetune(cfg)   # one seed, one registry run (res.info: the ROC-AUCs); a benchmark suite loops over seeds
    >>> res = finetune(FinetuneMolConfig(data="my.csv", smiles_column="smiles", target_columns="logS,pKa"))
    >>> res.export            # the fine-tuned model: suite graph predict --model <res.folder> --data new.csv
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph.mol.data import (MOLECULENET, TASKS, MolGraphs, content_fingerprint, featurize, get_featurizer,
                            load_moleculenet, read_target_table)
from graph.mol.splits import GIVEN, given_split, split as make_split
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
    dataset: str = field(default="bbbp", metadata={"help": "a MoleculeNet classification set (bbbp, tox21, toxcast, "
                                                            "sider, clintox, muv, hiv, bace); your own CSV: --data"})
    init: str = field(default="none", metadata={"help": "encoder checkpoint (file or pretraining dir) or 'none'"})
    seed: int = field(default=0, metadata={"help": "seed of the head, dropout and batch order (and of the split when "
                                                   "it is random); one seed per run"})
    split: str = field(default="scaffold", metadata={"help": "scaffold, random, random_scaffold, or given (--data with "
                                                             "--split-column)"})
    max_steps: int | None = field(default=None, metadata={
        "help": "stop after this many optimiser steps (the cut epoch is evaluated as the last) (default: all epochs)"})
    batch_size: int = 32
    dropout: float = 0.5
    # your own molecules (issue 80): each left out of the config while unused, so MoleculeNet runs keep their hashes
    data: str = field(default="", metadata={"help": "a CSV of your own molecules instead of --dataset: a SMILES column "
                                                    "and one column per target (default: none)", "omit_default": True})
    smiles_column: str = field(default="", metadata={"help": "the SMILES column of --data (default: a column named "
                                                             "smiles, else the first)", "omit_default": True})
    target_columns: str = field(default="", metadata={"help": "comma-separated target columns of --data (default: every "
                                                              "column but the SMILES and split columns)",
                                                      "omit_default": True})
    task: str = field(default="", metadata={"help": "classification (ROC-AUC) or regression (RMSE, MAE) for --data "
                                                    "(default: classification when every target value is 0 or 1, else "
                                                    "regression)", "omit_default": True})
    split_column: str = field(default="", metadata={"help": "with --split given: the column of --data naming each "
                                                            "molecule's part, train / val / test (default: none)",
                                                    "omit_default": True})
    eval_batch_size: int = field(default=512, metadata={RUN_OPTION: True})
    data_root: str | None = field(default=None, metadata={"help": "folder holding the MoleculeNet CSV files "
                                                                   "(default: $SUITE_DATA/moleculenet)", RUN_OPTION: True})


OWN_FIELDS = ("smiles_column", "target_columns", "task", "split_column")


def target_list(cfg: FinetuneMolConfig) -> list[str]:
    """``cfg.target_columns`` as names (comma-separated; empty: every column but the SMILES and split columns)."""
    return [t.strip() for t in cfg.target_columns.split(",") if t.strip()]


def check_config(cfg: FinetuneMolConfig, graphs_given: bool = True) -> None:
    """Refuse settings no fine-tuning can use before the encoder or the data is read (``ValueError`` naming the field
    and the value); ``graphs_given=False``: the MoleculeNet set is read by name, which must be one."""
    from graph.mol.splits import SPLITS

    check_ints(cfg, {"epochs": 1, "batch_size": 2, "eval_batch_size": 1, "num_layers": 1, "emb_dim": 1})
    if cfg.max_steps is not None and not (is_int(cfg.max_steps) and cfg.max_steps >= 1):
        raise ValueError(f"max_steps must be >= 1 or None, got {cfg.max_steps}")
    if not (is_number(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {cfg.lr!r}")
    check_numbers(cfg, {"weight_decay": 0.0})
    if not (is_number(cfg.dropout) and 0 <= cfg.dropout < 1):
        raise ValueError(f"dropout must be in [0, 1), got {cfg.dropout!r}")
    own = bool(cfg.data)
    splits = (*SPLITS, GIVEN) if own else SPLITS
    if cfg.split not in splits:
        raise ValueError(f"unknown split {cfg.split!r}; choose from {splits}" + (
            "" if own or cfg.split != GIVEN else " (a given split needs your own CSV: --data with --split-column)"))
    if not own:
        if unused := [f"--{k.replace('_', '-')}" for k in OWN_FIELDS if getattr(cfg, k)]:
            raise ValueError(f"{', '.join(unused)} apply to your own CSV: give it with --data")
        if not graphs_given and cfg.dataset.lower() not in MOLECULENET:
            hint = (f"; for your own CSV give --data {cfg.dataset} (with --smiles-column and --target-columns)"
                    if cfg.dataset.lower().endswith((".csv", ".csv.gz", ".txt")) or "/" in cfg.dataset else "")
            raise ValueError(f"unknown MoleculeNet data set {cfg.dataset!r}; choose from {sorted(MOLECULENET)}{hint}")
        return
    if cfg.dataset not in ("", DEFAULT_DATASET):
        raise ValueError(f"give --dataset (a MoleculeNet set) or --data (your own CSV), not both: got --dataset "
                         f"{cfg.dataset!r} and --data {cfg.data!r}")
    if not Path(cfg.data).is_file():
        raise ValueError(f"molecule CSV not found: {cfg.data}")
    if cfg.task not in ("", *TASKS):
        raise ValueError(f"unknown task {cfg.task!r}; choose from {TASKS} (or leave it out: inferred from the targets)")
    if (cfg.split == GIVEN) != bool(cfg.split_column):
        raise ValueError("--split given needs --split-column (the column naming each molecule's part)"
                         if cfg.split == GIVEN else f"--split-column {cfg.split_column!r} needs --split given (got "
                         f"--split {cfg.split})")
    targets = target_list(cfg)
    if len(set(targets)) != len(targets):
        raise ValueError(f"--target-columns {cfg.target_columns!r} names a column twice")


DEFAULT_DATASET = "bbbp"


def masked_bce(logits: Tensor, y: Tensor) -> Tensor:
    """BCE-with-logits averaged over the labelled entries. Shapes: logits, y (B, T), NaN = missing -> ()."""
    mask = ~torch.isnan(y)
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits[mask], y[mask])


def masked_mse(pred: Tensor, y: Tensor) -> Tensor:
    """Mean squared error over the labelled entries. Shapes: pred, y (B, T), NaN = missing -> ()."""
    mask = ~torch.isnan(y)
    if not bool(mask.any()):
        return pred.sum() * 0.0
    return F.mse_loss(pred[mask], y[mask])


class Regression:
    """Evaluator: ``Regression()(y_true, y_pred) -> {"rmse", "mae", "tasks_scored"}``, each the mean over the targets
    with a label in the split (chemprop's convention) of the per-target error over its labelled molecules; NaN where
    no target has one. Shapes: y_true (N, T) with NaN = missing, y_pred (N, T)."""

    primary_metric = "rmse"  # lower is better

    def __call__(self, y_true: Tensor, y_pred: Tensor) -> dict[str, float]:
        y, p = y_true.double(), y_pred.double()
        if y.shape != p.shape:
            raise ValueError(f"y_true {tuple(y.shape)} and y_pred {tuple(p.shape)} must have the same shape")
        mask = ~torch.isnan(y)  # (N, T)
        n = mask.sum(0)  # (T,)
        err = torch.where(mask, p - y, torch.zeros_like(p))  # (N, T)
        scored = n > 0
        if not bool(scored.any()):
            return {"rmse": float("nan"), "mae": float("nan"), "tasks_scored": 0.0}
        rmse = (err.pow(2).sum(0)[scored] / n[scored]).sqrt()  # (T',)
        mae = err.abs().sum(0)[scored] / n[scored]
        return {"rmse": float(rmse.mean()), "mae": float(mae.mean()), "tasks_scored": float(scored.sum())}


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


OWN_TASK = "mol-finetune"  # the registry task of a fine-tuning on the user's own CSV


class FinetuneMolTask(Task[FinetuneMolConfig]):
    """MoleculeNet fine-tuning as a :class:`suite.train.run.Task` (task ``molnet-finetune``, headline: test ROC-AUC at
    the last epoch). Each epoch is scored on valid and test (split ``valid`` / ``test``, metric ``rocauc``). A
    ROC-AUC that is undefined (a split with one class in every task) is counted, not logged. The run owner seeds,
    checkpoints (every ``checkpoint_every`` epochs, removed when the run has finished unless ``keep_checkpoints``),
    resumes and records it; nothing is exported.

    ``own_data=True`` (``cfg.data``, a user's CSV): task ``mol-finetune``, the data set named by its file name and
    content fingerprint, classification as above or regression (metrics ``rmse`` and ``mae`` in the targets' units;
    headline: test RMSE at the last epoch), and the fine-tuned model exported (``<run>/export``,
    :func:`graph.mol.predict.load_finetuned`)."""

    modality, name, primary = "graph", "molnet-finetune", ("rocauc_last", "test")

    def __init__(self, graphs: MolGraphs | None = None, own_data: bool = False) -> None:
        from graph.mol.predict import PREDICTOR_TYPE

        self.graphs = graphs
        self.own = own_data
        if own_data:
            self.name, self.model_type = OWN_TASK, PREDICTOR_TYPE  # type: ignore[misc]
        self.init: dict[str, Any] | None = None
        self.label = "none"
        self.kind, self.kind_reason = "classification", "MoleculeNet"
        self.metric = "rocauc"
        self.targets: list[str] = []
        self.smiles_column = ""
        self.scaling: tuple[Tensor, Tensor] | None = None  # regression: (mean (T,), std (T,)) of the training part
        self.n_train = 0
        self.best: dict[str, float] = {"epoch": 0, "valid": -math.inf, "test": float("nan")}
        self.last: dict[str, float] = {"valid": float("nan"), "test": float("nan")}
        self.undefined = 0
        self.load_s = 0.0

    # ------------------------------------------------------------------ identity
    def fingerprint(self, cfg: FinetuneMolConfig) -> str:
        return content_fingerprint(cfg.data) if Path(cfg.data).is_file() else "missing"

    def dataset(self, cfg: FinetuneMolConfig) -> str:
        """A MoleculeNet set by its name; the user's CSV by its file name and content fingerprint
        (``my_mols.csv@3f2a9c0d1e2b``)."""
        return f"{Path(cfg.data).name}@{self.fingerprint(cfg)}" if self.own else cfg.dataset

    def stem(self, cfg: FinetuneMolConfig) -> str:
        data = f"{Path(cfg.data).name.split('.')[0]}-{self.fingerprint(cfg)[:8]}" if self.own else cfg.dataset
        return f"{data}-{Path(cfg.init).name or 'none'}-s{cfg.seed}"

    def data_inputs(self, cfg: FinetuneMolConfig) -> dict[str, str | Path]:
        """The CSV the set is read from (a set handed in as graphs: none); reuse and resume decide on its content
        (issue 69, class A)."""
        if self.own:
            return {"data": Path(cfg.data)}
        if self.graphs is not None:
            return {}
        return {"data": Path(cfg.data_root) / f"{cfg.dataset}.csv" if cfg.data_root is not None
                else data_path("moleculenet", f"{cfg.dataset}.csv")}

    def loss_name(self, cfg: FinetuneMolConfig) -> str:
        return self.label

    def record(self, cfg: FinetuneMolConfig, experiment: dict[str, Any], training: Training) -> dict[str, Any]:
        out = {**experiment, "init_spec": None if self.init is None else self.init["spec"]}
        if self.own:  # what the run resolved from the file: the targets and the task (given or inferred)
            out["resolved"] = {"targets": self.targets, "task": self.kind, "task_reason": self.kind_reason,
                               "smiles_column": self.smiles_column, "fingerprint": self.fingerprint(cfg)}
        return out

    def keep_checkpoints(self, cfg: FinetuneMolConfig) -> int:
        return cfg.keep_checkpoints

    # ------------------------------------------------------------------ data
    def _own_graphs(self, cfg: FinetuneMolConfig, featurizer: str) -> tuple[MolGraphs, list[str] | None]:
        """The user's CSV read, featurised (unparsable SMILES skipped, counted and warned about), with the given
        split's part of every kept molecule."""
        table = read_target_table(cfg.data, cfg.smiles_column or None, target_list(cfg), cfg.task or None,
                                  cfg.split_column or None)
        self.kind, self.kind_reason, self.targets = table.task, table.task_reason, table.targets
        self.smiles_column = table.smiles_column
        self.metric = "rocauc" if self.kind == "classification" else "rmse"
        graphs = featurize(table.smiles, featurizer, y=table.y, tasks=table.targets, what=str(cfg.data))
        assert graphs.source_index is not None
        parts = None if table.split is None else [table.split[i] for i in graphs.source_index.tolist()]
        return graphs, parts

    def _split(self, cfg: FinetuneMolConfig, graphs: MolGraphs, parts: list[str] | None) -> tuple[Tensor, Tensor, Tensor]:
        if parts is not None:
            return given_split(parts, f"{cfg.data}: split column {cfg.split_column!r}")
        # the scaffold split is deterministic; random splits follow the run's seed
        return make_split(graphs.smiles, cfg.split, seed=cfg.seed if cfg.split in ("random", "random_scaffold") else 0)

    def _scaling(self, cfg: FinetuneMolConfig, y: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and standard deviation (population, as chemprop's scaler) of each target over the labelled molecules
        of the training part ``y`` (n, T); a target with one value (or one distinct value) gets scale 1."""
        mask = ~torch.isnan(y)
        if empty := [t for k, t in enumerate(self.targets) if not bool(mask[:, k].any())]:
            raise ValueError(f"{cfg.data}: target(s) {empty} have no value in the {cfg.split} split's training part "
                             f"({y.shape[0]} molecules): nothing to learn them from")
        n = mask.sum(0).double()  # (T,)
        yz = torch.where(mask, y.double(), torch.zeros_like(y, dtype=torch.float64))
        mean = yz.sum(0) / n
        var = torch.where(mask, (y.double() - mean) ** 2, torch.zeros_like(yz)).sum(0) / n
        std = var.sqrt()
        std = torch.where(std > 1e-12, std, torch.ones_like(std))
        return mean.float(), std.float()

    # ------------------------------------------------------------------ training
    def build(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig]) -> Training:
        check_config(cfg, graphs_given=self.graphs is not None)
        featurizer = cfg.featurizer
        if cfg.init.lower() not in ("none", ""):
            pre, spec = load_mol_encoder(cfg.init)
            self.init = {"spec": spec, "state": pre.state_dict()}
            self.label, featurizer = str(spec["loss"]), spec["featurizer"]
            if featurizer != cfg.featurizer:
                warnings.warn(f"using the encoder's featurizer {featurizer!r} (config says {cfg.featurizer!r})", stacklevel=2)
        t0 = time.perf_counter()
        parts = None
        if self.own:
            graphs, parts = self._own_graphs(cfg, featurizer)
        else:
            graphs = self.graphs if self.graphs is not None else load_moleculenet(cfg.dataset, featurizer, cfg.data_root)
            self.targets = list(graphs.tasks)
        self.graphs, self.load_s = graphs, time.perf_counter() - t0
        what = cfg.data if self.own else cfg.dataset
        if graphs.y is None or not graphs.tasks:
            raise ValueError(f"{what}: no labels to fine-tune on")
        if not bool((~torch.isnan(graphs.y)).any()):  # every label cell missing or not a number: nothing to learn
            raise ValueError(f"{what}: no usable label ({graphs.bad_labels} non-numeric label cell(s), the rest "
                             f"empty, in {len(graphs.tasks)} task column(s) of {len(graphs)} molecules): nothing to "
                             "fine-tune on or score")
        train, self.valid, self.test = self._split(cfg, graphs, parts)
        self.n_train = int(train.numel())
        if not bool((~torch.isnan(graphs.y[train])).any()):
            raise ValueError(f"{what}: the {cfg.split} split's training part ({train.numel()} molecules) has no "
                             "usable label: nothing to fine-tune on")
        if self.kind == "regression":
            self.scaling = self._scaling(cfg, graphs.y[train])
            self.primary = ("rmse_last", "test")  # type: ignore[misc]
            self.best["valid"] = math.inf
        if self.init is not None:
            spec = self.init["spec"]
            enc = MolGIN(spec["num_layers"], spec["emb_dim"], cfg.dropout, get_featurizer(spec["featurizer"]))
            enc.load_state_dict(self.init["state"])
        else:
            enc = MolGIN(cfg.num_layers, cfg.emb_dim, cfg.dropout, get_featurizer(cfg.featurizer))
        model = MolPredictor(enc, len(graphs.tasks)).to(ctx.device)
        scale = None if self.scaling is None else tuple(t.to(ctx.device) for t in self.scaling)

        def step(idx: Tensor) -> Tensor:
            b = graphs.batch(idx).to(ctx.device)
            out = ctx.engine.ddp(b)  # type: ignore[union-attr]  # (B, T)
            if scale is not None:  # regression on the standardised targets
                return masked_mse(out, (b.y - scale[0]) / scale[1])  # type: ignore[operator]
            return masked_bce(out, b.y)  # type: ignore[arg-type]

        return Training(model, torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay),
                        lambda epoch: [train[b] for b in ctx.epoch_batches(train.numel(), cfg.batch_size, epoch)],
                        step, epochs=cfg.epochs, max_steps=cfg.max_steps, rate_name="finetune_mol_per_s",
                        compile=cfg.compile)

    def on_epoch(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training, epoch: int,
                 stats: dict[str, float]) -> None:
        if sd.is_main():
            self._score(cfg, ctx, training, epoch)

    def _metrics(self, y: Tensor, out: Tensor) -> dict[str, float]:
        """The split's metrics from the model's outputs ``out`` (n, T): ROC-AUC of the logits, or RMSE and MAE of the
        predictions in the targets' units."""
        if self.scaling is None:
            return {"rocauc": _score(RocAuc(), y, out)}
        r = Regression()(y, out * self.scaling[1] + self.scaling[0])
        return {"rmse": r["rmse"], "mae": r["mae"]}

    def _score(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training, epoch: int) -> None:
        graphs = self.graphs
        assert graphs is not None and graphs.y is not None
        scored = {name: self._metrics(graphs.y[idx], predict(training.model, graphs, idx, cfg.eval_batch_size, ctx.device))
                  for name, idx in (("valid", self.valid), ("test", self.test))}
        training.model.train()
        self.last = {}
        for split_name, m in scored.items():
            self.last[split_name] = m[self.metric]
            self.last.update({f"{split_name}_{k}": v for k, v in m.items() if k != self.metric})
            if math.isnan(m[self.metric]):
                self.undefined += 1
            else:
                ctx.log(m, split=split_name, step=epoch)
        v, b = self.last["valid"], self.best["valid"]
        if not math.isnan(v) and (v > b if self.metric == "rocauc" else v < b):
            self.best = {"epoch": epoch, **self.last}

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
        what = self.dataset(cfg)
        if self.undefined:
            why = "ROC-AUC undefined (one class only)" if self.metric == "rocauc" else "no labelled molecule"
            warnings.warn(f"{what} seed {cfg.seed}: {why} in {self.undefined} split evaluations; not logged",
                          stacklevel=2)
        m = self.metric
        self.result = {f"test_{m}_last": self.last["test"], f"valid_{m}_last": self.last["valid"],
                       f"test_{m}_bestval": self.best["test"], f"valid_{m}_best": self.best["valid"],
                       "best_epoch": float(self.best["epoch"]), "epochs_run": float(self.epochs_run),
                       "steps": float(engine.step), "finetune_mol_per_s": engine.throughput.rate,
                       f"undefined_{m}": float(self.undefined)}
        if m == "rmse":
            self.result.update({"test_mae_last": self.last["test_mae"], "test_mae_bestval": self.best.get("test_mae", math.nan)})
        info = {"best_epoch": self.result["best_epoch"], "finetune_mol_per_s": self.result["finetune_mol_per_s"],
                f"undefined_{m}": float(self.undefined), "molecules": len(self.graphs), "skipped": self.graphs.skipped,
                "non_numeric_labels": self.graphs.bad_labels}
        ctx.log(info, split="info")
        metrics = {f"{m}_last": self.last["test"], f"{m}_bestval": self.best["test"]}
        if m == "rmse":
            metrics.update({"mae_last": self.result["test_mae_last"], "mae_bestval": self.result["test_mae_bestval"]})
        return {k: v for k, v in metrics.items() if not math.isnan(v)}

    # ------------------------------------------------------------------ export (your own data)
    def export_config(self, cfg: FinetuneMolConfig, training: Training) -> dict[str, Any]:
        """``config.json`` of the fine-tuned model: the encoder (layers, width, featuriser vocabulary), the targets in
        output order, the task, the target scaling (regression: predictions are ``output * std + mean``) and the
        SMILES column it was trained on."""
        enc = training.model.encoder
        return {"num_layers": enc.num_layers, "dim": enc.dim, "featurizer": dataclasses.asdict(enc.featurizer),
                "targets": list(self.targets), "task": self.kind, "task_reason": self.kind_reason,
                "target_scaling": None if self.scaling is None else {"mean": self.scaling[0].tolist(),
                                                                      "std": self.scaling[1].tolist()},
                "smiles_column": self.smiles_column,
                "data": {"file": Path(cfg.data).name, "fingerprint": self.fingerprint(cfg)}}

    def card(self, cfg: FinetuneMolConfig, ctx: RunContext[FinetuneMolConfig], training: Training) -> dict[str, Any]:
        from graph.mol.card import finetuned_card

        return finetuned_card(cfg, self.dataset(cfg), self.label, self.kind, self.kind_reason, self.targets,
                              self.scaling, self.n_train, ctx.engine.step if ctx.engine else None, ctx.run,
                              self.init, str(ctx.folder), self.smiles_column)


def finetune(cfg: FinetuneMolConfig, graphs: MolGraphs | None = None) -> RunResult:
    """Fine-tune on ``cfg.dataset`` (or the user's CSV ``cfg.data``) with ``cfg.seed`` through the run owner; one
    registry run. Returns the owner's result (``metrics``: ``rocauc_last``, ``rocauc_bestval`` where defined, or for
    regression ``rmse_last``, ``mae_last``, ``rmse_bestval``, ``mae_bestval``; ``export``: the fine-tuned model of a
    user's CSV) with the front-end's summary in ``info`` (dataset, seed, init, loss, task, targets, molecule counts,
    ``test_rocauc_last`` / ``test_rmse_last``, ..., ``best_epoch``)."""
    if cfg.data and cfg.dataset == DEFAULT_DATASET:  # the MoleculeNet default means nothing beside your own data
        cfg = dataclasses.replace(cfg, dataset="")
    check_config(cfg, graphs_given=graphs is not None)  # before a folder is made or anything is read
    task = FinetuneMolTask(graphs, own_data=bool(cfg.data))
    res = run(task, cfg)
    g = task.graphs
    assert g is not None
    res.info = {"dataset": task.dataset(cfg), "seed": cfg.seed, "init": cfg.init, "loss": task.label,
                "task": task.kind, "task_reason": task.kind_reason, "targets": list(task.targets),
                "metric": task.metric, "molecules": len(g), "skipped": g.skipped, "non_numeric_labels": g.bad_labels,
                "load_s": task.load_s, **task.result}
    return res
