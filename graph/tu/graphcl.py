"""GraphCL pretraining on TU datasets (You et al. 2020, unsupervised TU setting) with any core loss.

One view is the original graph, the other its augmentation (``views="orig+aug"``; also
``aug+aug`` and the three-view ``orig+aug+aug`` for multi-view losses). Adam, lr 0.01, batch 128,
20 epochs, GIN 3 x 32. The encoder embeddings of the un-augmented graphs are evaluated with the
seeded SVM protocol (:mod:`graph.tu.svm`) at ``eval_epochs`` (default 10 and the last epoch; the
reported number is the fixed last epoch, never the best one).

Training runs on :class:`suite.train.Engine`. Under ``torchrun`` (``WORLD_SIZE`` > 1) the model is
wrapped in DDP, each rank runs equal batches of every epoch (:func:`suite.train.epoch_batches`: the
last partial batch is dropped under torch.distributed and kept in one process, as GraphCL's loader
does: MUTAG's 188 graphs at batch 128 train as 128 + 60), and the loss gathers negatives across ranks.

Example:
    >>> cfg = TUConfig(dataset="MUTAG", loss="macl", epochs=20)
    >>> result = train(cfg, load_tu("MUTAG"), seed=0)
    >>> result.evals[20]["acc"]
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor, nn
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from graph.augment import build_augmentation, chunk_views
from graph.tu.data import TUData, tu_folder
from graph.tu.svm import SVMEvaluator, embed_graphs
from graph.tu.presets import resolve
from graph.tu.model import MODEL_TYPE, GINEncoder, GraphCLModel
from suite import distributed as sd
from suite.losses import apply_loss
from suite.metrics import alignment_on_device, uniformity_on_device
from suite.train import CachedStep, data_workers, optimizer_options
from suite.config import RUN_OPTION, RunOptions, load_config
from suite.pretrained import POSITIVE_INT, load_export, load_state
from suite.train.legacy import Earlier, OldExport
from suite.train.run import EXPORT, PROVENANCE, RunContext, Task, Training, run


@dataclass
class TUConfig(RunOptions):
    # where and how it runs, not what: RunOptions, and data_root, download, save_embeddings (marked RUN_OPTION)
    RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"device": "cpu", "keep_checkpoints": 0}
    RUN_HELP: ClassVar[dict[str, str]] = {
        "out": "run folder: checkpoints, the encoder export (export/) (default: "
               "runs/tu-graphcl/<set>-<loss>-s<seed>-<hash>)",
        "device": "cpu or cuda", "keep_checkpoints": "checkpoints kept once the run has finished (0: none)"}
    RETIRED_RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("save_dir",)  # run options of older versions (now ``out``)
    dataset: str = field(default="MUTAG", metadata={"help": "TU dataset name"})
    loss: str = field(default="graphcl", metadata={"help": "preset (graphcl, macl, infonce, cacr, cacr3, tsimclr) or core loss"})
    loss_hparams: dict[str, Any] = field(default_factory=dict, metadata={"help": "loss hyper-parameter overrides"})
    views: str | None = field(default=None, metadata={"help": "orig+aug | aug+aug | orig+aug+aug (default: the loss preset's views)"})
    aug: str = field(default="random4", metadata={"help": "augmentation (drop_nodes, perturb_edges, subgraph, mask_attributes, random2-4)"})
    aug_ratio: float = field(default=0.2, metadata={"help": "augmentation strength"})
    epochs: int = 20
    batch_size: int = 128
    lr: float = 0.01
    hidden: int = 32
    layers: int = 3
    eval_epochs: list[int] = field(default_factory=lambda: [10, 20], metadata={"help": "epochs evaluated with the SVM (last epoch always)"})
    grad_cache_chunk: int = field(default=0, metadata={"help": "gradient caching: encode the batch in chunks of K graphs "
                                                                "(the loss still sees the whole batch); GIN's BatchNorm "
                                                                "sees chunks, so K is part of the experiment (0 = off)",
                                                                "omit_default": True})
    svm_folds: int = 10
    svm_inner_folds: int = 5
    svm_precomputed: bool = field(default=True, metadata={"help": "SVM on a shared precomputed RBF kernel (same result as "
                                                               "GridSearchCV(SVC), ~2x faster); false: the GridSearchCV reference"})
    seed: int = field(default=0, metadata={"help": "seed of the pretraining and of the SVM fold split (one seed per run: "
                                                   "a benchmark suite's seeds list loops over seeds)"})
    data_root: str | None = field(default=None, metadata={"help": "folder holding <NAME>/raw (default: $SUITE_DATA/TU)",
                                                          RUN_OPTION: True})
    download: bool = field(default=False, metadata={"help": "let PyG download a dataset absent from the data root",
                                                    RUN_OPTION: True})
    save_embeddings: bool = field(default=False, metadata={"help": "also save the final embeddings and labels "
                                                                   "(<out>/embeddings.npz)", RUN_OPTION: True})

    DEFAULT_EVAL_EPOCHS: ClassVar[tuple[int, ...]] = (10, 20)  # GraphCL's protocol (a shorter run evaluates its last)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2 or not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"need epochs >= 1, batch_size >= 2, lr a finite number > 0; got {self.epochs}, "
                             f"{self.batch_size}, {self.lr}")
        if self.hidden < 1 or self.layers < 1:
            raise ValueError(f"need hidden >= 1 and layers >= 1, got {self.hidden}, {self.layers}")
        if self.svm_folds < 2:
            raise ValueError(f"--svm-folds must be >= 2 (stratified cross-validation needs two folds), got {self.svm_folds}")
        if self.svm_inner_folds < 2:
            raise ValueError(f"--svm-inner-folds must be >= 2 (the inner grid search needs two folds), got "
                             f"{self.svm_inner_folds}")
        bad = [e for e in self.eval_epochs if e < 1]
        if bad:
            raise ValueError(f"--eval-epochs: epochs are counted from 1, got {bad}")
        late = [e for e in self.eval_epochs if e > self.epochs]
        if late and tuple(self.eval_epochs) != self.DEFAULT_EVAL_EPOCHS:  # the default: GraphCL's 10 and 20
            raise ValueError(f"--eval-epochs {' '.join(map(str, late))} after the last epoch ({self.epochs}) would never "
                             f"be evaluated (the last epoch always is); give epochs in 1..{self.epochs}")
        if self.grad_cache_chunk < 0:
            raise ValueError(f"grad_cache_chunk must be >= 0 (0: off), got {self.grad_cache_chunk}")
        if not 0.0 <= self.aug_ratio < 1.0:
            raise ValueError(f"aug_ratio must be in [0, 1), got {self.aug_ratio}")


@dataclass
class TrainResult:
    model: GraphCLModel
    epoch_stats: list[dict[str, float]]  # per epoch: loss, diagnostics, alignment, uniformity, graphs/s
    evals: dict[int, dict[str, Any]]  # epoch -> SVM metrics
    skipped_batches: int
    train_time: float
    eval_time: float
    embeddings: Tensor | None = None
    labels: Tensor | None = None
    loss_record: dict[str, Any] = field(default_factory=dict)
    dropped_per_epoch: int = 0  # graphs left out of each epoch by the epoch rule (last partial batch)


class MultiViewModel(nn.Module):
    """Runs the model once per view inside one ``forward`` (one DDP call per step; batch-norm
    statistics per view as in GraphCL's two forward passes). Returns (V, B, d)."""

    def __init__(self, model: GraphCLModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, views: list[Batch]) -> Tensor:
        return torch.stack([self.model(v.x, v.edge_index, v.batch, v.num_graphs) for v in views])


def make_views(batch: Batch, mode: str, aug: Callable[[Batch, torch.Generator | None], Batch],
               generator: torch.Generator | None) -> list[Batch]:
    """The views of ``batch`` named by ``mode`` ("orig+aug", ...), each augmented independently."""
    return [batch if v == "orig" else aug(batch, generator) for v in mode.split("+")]


def evaluate(model: GraphCLModel, data: TUData, seed: int, folds: int = 10, inner_folds: int = 5,
             batch_size: int = 512, device: str = "cpu", precomputed: bool = True) -> tuple[dict[str, Any], Tensor, Tensor]:
    """SVM accuracy of the encoder embeddings of the un-augmented graphs (model in eval mode)."""
    was = model.training
    model.eval()
    loader = DataLoader(data.graphs, batch_size=batch_size, shuffle=False)  # type: ignore[arg-type]
    emb, y = embed_graphs(lambda b: model.embed(b.x.to(device), b.edge_index.to(device), b.batch.to(device), b.num_graphs),
                          loader)
    model.train(was)
    return SVMEvaluator(seed=seed, folds=folds, inner_folds=inner_folds, precomputed=precomputed)(emb, y), emb, y


def collate(data: TUData, idx: Tensor) -> Batch:
    """The graphs ``idx`` of ``data`` as one PyG batch."""
    return Batch.from_data_list([data.graphs[i] for i in idx.tolist()])


PROTOCOL = "SVC(rbf), C in 1e-3..1e3 by inner grid search"


class TUTask(Task[TUConfig]):
    """GraphCL on a TU data set as a :class:`suite.train.run.Task` (task ``tu-graphcl``, headline ``acc`` / test).

    The loop is :class:`suite.train.Engine`'s; batches follow its epoch rule (:func:`suite.train.epoch_batches`:
    equal batches on every rank, the last partial batch dropped under torch.distributed, counted in
    ``dropped_per_epoch``). Per epoch the training stats (loss, the loss's diagnostics, alignment, uniformity,
    graphs/s) go to split ``train``; at ``eval_epochs`` and the last epoch the SVM accuracy of the encoder's
    embeddings of the un-augmented graphs (main rank) goes to split ``test`` (``acc``, ``acc_ep<N>``,
    ``acc_fold_std``). The run owner seeds, checkpoints every epoch (removed once finished unless
    ``keep_checkpoints``), resumes and records it, and exports the encoder (``GINEncoder.from_pretrained``)."""

    modality, name, primary = "graph", "tu-graphcl", ("acc", "test")

    def __init__(self, data: TUData | None, log: Callable[[dict[str, float], int], None] | None = None,
                 load: Callable[[], TUData] | None = None, check: Callable[[TUData], None] | None = None) -> None:
        self.data, self.log, self.load, self.check = data, log, load, check  # data None: load() in build
        self.stats: list[dict[str, float]] = []
        self.evals: dict[int, dict[str, Any]] = {}
        self.t_eval = 0.0
        self.emb_labels: list[Tensor | None] = [None, None]

    def keep_checkpoints(self, cfg: TUConfig) -> int:
        return cfg.keep_checkpoints

    def data_inputs(self, cfg: TUConfig) -> dict[str, str | Path]:
        """The raw folder the data set is read from (the data given, or ``<data root>/<dataset>/raw``); nothing for
        a set PyG downloads into its cache."""
        if self.data is not None:
            return {} if self.data.source == "download" else {"data": self.data.source}
        folder = tu_folder(cfg.dataset, cfg.data_root)
        return {} if cfg.download and not folder.exists() else {"data": folder / "raw"}

    def record(self, cfg: TUConfig, experiment: dict[str, Any], training: Training) -> dict[str, Any]:
        return {**experiment, "resolved": self.loss_record,
                "protocol": {"svm": PROTOCOL, "outer_folds": cfg.svm_folds, "inner_folds": cfg.svm_inner_folds,
                             "fold_seed": cfg.seed, "reported_epoch": cfg.epochs,
                             "embeddings": "encoder (pre-projection) of un-augmented graphs, eval mode"}}

    def build(self, cfg: TUConfig, ctx: RunContext[TUConfig]) -> Training:
        if self.data is None and self.load is not None:
            self.data = self.load()
        if self.check is not None:
            self.check(self.data)  # type: ignore[arg-type]
        data, device = self.data, ctx.device
        assert data is not None, "TUTask needs its data or a loader"
        loss, view_mode, record = resolve(cfg.loss, cfg.loss_hparams, cfg.views)
        self.loss_record = {**record, "hparams": loss.hparams()}
        aug = build_augmentation(cfg.aug, cfg.aug_ratio)
        gen = ctx.generator("aug", device=device)
        self.model = GraphCLModel(data.num_features, cfg.hidden, cfg.layers).to(device)
        n = len(data.graphs)
        self.dropped = n - sum(len(b) for b in ctx.epoch_batches(n, cfg.batch_size, 0)) * sd.world_size()
        self.au = {"alignment": 0.0, "uniformity": 0.0}

        def loss_of(z: Tensor) -> Tensor:  # z (V, B, d); the meters stay on the device (no host read per step)
            self.au["alignment"] = self.au["alignment"] + alignment_on_device(z[0].detach(), z[1].detach())
            self.au["uniformity"] = self.au["uniformity"] + uniformity_on_device(z[0].detach())
            return apply_loss(loss, z)

        def step(batch: Batch) -> Tensor | CachedStep:  # collated ahead (Training.collate), in workers on a GPU
            ddp = ctx.engine.ddp  # type: ignore[union-attr]
            views = make_views(batch.to(device, non_blocking=True), view_mode, aug, gen)
            if cfg.grad_cache_chunk:  # the views made once, encoded in chunks of graphs, the loss over the whole batch
                return CachedStep(lambda c: ddp(list(c)), chunk_views(views, cfg.grad_cache_chunk), loss_of, dim=1)
            return loss_of(ddp(views))

        self.t0 = time.perf_counter()
        return Training(MultiViewModel(self.model),
                        torch.optim.Adam(self.model.parameters(), lr=cfg.lr, **optimizer_options(device)),
                        lambda epoch: ctx.epoch_batches(n, cfg.batch_size, epoch), step, epochs=cfg.epochs, loss=loss,
                        size=len, rate_name="graphs_per_s", collate=lambda idx: collate(data, idx),
                        workers=data_workers(device), compile=cfg.compile)

    def on_epoch(self, cfg: TUConfig, ctx: RunContext[TUConfig], training: Training, epoch: int,
                 stats: dict[str, float]) -> None:
        steps = max(len(training.batches(epoch - 1)), 1)
        au = {k: float(v) / steps for k, v in self.au.items()}
        self.au.update(alignment=0.0, uniformity=0.0)
        self.stats.append({**stats, **au})
        if not sd.is_main():
            return
        ctx.log(au, split="train", step=epoch)
        if self.log is not None:
            self.log(self.stats[-1], epoch)
        if epoch in {e for e in cfg.eval_epochs if 1 <= e <= cfg.epochs} | {cfg.epochs}:
            t1 = time.perf_counter()
            ev, self.emb_labels[0], self.emb_labels[1] = evaluate(
                self.model, self.data, cfg.seed, cfg.svm_folds, cfg.svm_inner_folds, device=str(ctx.device),
                precomputed=cfg.svm_precomputed)
            self.t_eval += time.perf_counter() - t1
            self.evals[epoch] = ev
            ctx.log({"acc": ev["acc"], f"acc_ep{epoch}": ev["acc"], "acc_fold_std": ev["acc_std"]}, split="test",
                    step=epoch)

    def state(self, cfg: TUConfig, ctx: RunContext[TUConfig], training: Training) -> dict[str, Any]:
        return {"loss": training.loss.state_dict(), "stats": self.stats, "evals": self.evals, "t_eval": self.t_eval}

    def restore(self, cfg: TUConfig, ctx: RunContext[TUConfig], training: Training, state: dict[str, Any]) -> None:
        training.loss.load_state_dict(state["loss"])
        self.stats, self.t_eval = list(state["stats"]), float(state["t_eval"])
        self.evals = {int(k): v for k, v in state["evals"].items()}

    def evaluate(self, cfg: TUConfig, ctx: RunContext[TUConfig], training: Training) -> dict[str, float]:
        self.train_time = time.perf_counter() - self.t0 - self.t_eval
        gps = statistics.fmean(s["graphs_per_s"] for s in self.stats) if self.stats else float("nan")
        ctx.log({"train_time_s": self.train_time, "eval_time_s": self.t_eval, "graphs_per_s": gps,
                 "skipped_batches": 0, "dropped_graphs_per_epoch": self.dropped}, split="train", step=cfg.epochs)
        return {}

    def export_module(self, cfg: TUConfig, training: Training) -> nn.Module:
        return self.model.encoder  # GINEncoder.save_pretrained

    def card(self, cfg: TUConfig, ctx: RunContext[TUConfig], training: Training) -> dict[str, Any]:
        return tu_card(cfg, type(training.loss).name, training.loss.hparams(), len(self.data), cfg.seed,
                       ctx.folder / EXPORT, ctx.run)

    def result(self) -> TrainResult:
        return TrainResult(self.model, self.stats, self.evals, 0, getattr(self, "train_time", 0.0), self.t_eval,
                           self.emb_labels[0], self.emb_labels[1], self.loss_record, dropped_per_epoch=self.dropped)


def train(cfg: TUConfig, data: TUData, seed: int, log: Callable[[dict[str, float], int], None] | None = None) -> TrainResult:
    """Train and evaluate ``cfg`` with ``seed`` (a run of :class:`TUTask` without a registry row; its checkpoints and
    export go to a temporary folder unless ``cfg.out`` is set). ``log(stats, epoch)`` receives every epoch's stats."""
    cfg = dataclasses.replace(cfg, seed=seed)
    task = TUTask(data, log)
    with tempfile.TemporaryDirectory(prefix="tu-") as tmp:
        run(task, cfg if cfg.out else dataclasses.replace(cfg, out=tmp), registry=False)
    return task.result()


# ----------------------------------------------------------------------------- save / reload

def tu_card(cfg: TUConfig, loss_name: str, loss_hparams: dict[str, Any], n_graphs: int, seed: int, path: str | Path,
            run: Any = None) -> dict[str, Any]:
    """The model card of a GraphCL TU run (``run``: its registry run, for the SVM metrics)."""
    from suite.model_card import card_info

    folder = Path(path).with_suffix("")
    return card_info(
        title=f"GraphCL GIN encoder on {cfg.dataset} with the {cfg.loss} loss",
        what=(f"GIN ({cfg.layers} layers x {cfg.hidden}, sum pooling, {cfg.layers * cfg.hidden}-d graph embedding) "
              f"pretrained by contrastive-suite's GraphCL front-end ({cfg.aug} augmentation, ratio {cfg.aug_ratio})."),
        modality="graph", loss=loss_name, loss_hparams=loss_hparams, data=f"TU {cfg.dataset}", n_train=n_graphs,
        steps=None, seed=seed, run=run,
        extra={"epochs": cfg.epochs, "batch_size": cfg.batch_size, "lr": cfg.lr, "views": cfg.views},
        load=("from graph.tu.model import GINEncoder\n"
              f"encoder = GINEncoder.from_pretrained({str(folder)!r})  # plain PyG module, eval mode\n"
              "emb = encoder(data.x, data.edge_index, data.batch)  # (B, layers * hidden)\n"
              f"# with the projection head: graph.tu.graphcl.load_encoder({str(path)!r})"))


# what the layout before the run owner left: one .pt file (GraphCLModel weights, sizes, TUConfig fields, meta)
EARLIER = Earlier(exports=(OldExport(
    files=(), weights="model", prefix="encoder.", fields={"in_dim": "in_dim", "hidden": "hidden", "layers": "layers"},
    record={"config": "config"}, drop=TUConfig.RETIRED_RUN_OPTIONS, facts_from="meta",
    facts={("metrics", "test/acc"): "acc", "run_id": "run_id"}, what="a graph encoder checkpoint"),))
SIZES = {"in_dim": POSITIVE_INT, "hidden": POSITIVE_INT, "layers": POSITIVE_INT}


def load_encoder(path: str | Path) -> tuple[GraphCLModel, TUConfig, dict[str, Any]]:
    """The GraphCL model (its encoder trained; the projection head is not exported), its TUConfig and meta (``acc``,
    ``run_id``) from a run folder or its ``export/`` (``GINEncoder``'s config and weights + the run owner's
    ``run.json``), or an export of an earlier layout (:data:`EARLIER`, read by :func:`suite.pretrained.load_export`).
    A record whose config TUConfig refuses (an unknown key, a value of the wrong type) is a ValueError naming the
    file and the field."""
    ex = load_export(path, MODEL_TYPE, SIZES, earlier=EARLIER)
    where = ex.path if ex.earlier else ex.path / PROVENANCE
    if "config" not in ex.record:
        raise ValueError(f"{ex.path}: {PROVENANCE} missing; it records the TU config the encoder was trained with")
    config = ex.record["config"]
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config must be a mapping of TUConfig fields, got {type(config).__name__}")
    try:
        cfg = load_config(TUConfig, None, config)
    except (TypeError, ValueError) as exc:
        msg = str(exc).replace("TUConfig override: ", "")
        raise ValueError(f"{where}: config refused by TUConfig ({msg})") from None
    model = GraphCLModel(ex.config["in_dim"], ex.config["hidden"], ex.config["layers"])
    load_state(model.encoder, ex.weights, ex.path)  # names and shapes checked, a mismatch named with the file
    model.eval()
    metrics = ex.record.get("metrics") or {}
    return model, cfg, {"acc": metrics.get("test/acc"), "run_id": ex.record.get("run_id")}
