"""MoleculeNet fine-tuning (Hu et al. 2020 protocol, pretrain-gnns ``finetune.py``).

Encoder (pretrained or random) + linear head on the mean-pooled embedding, dropout 0.5, BCE with
missing labels masked out, Adam lr 1e-3, batch 32, 100 epochs, scaffold split 80/10/10. After every
epoch valid and test ROC-AUC (OGB convention, :class:`graph.eval.rocauc.RocAuc`) are computed; the
run reports test ROC-AUC at the last epoch (``test_rocauc_last``) and at the best-valid epoch
(``test_rocauc_bestval``), both recorded in the registry.

Example:
    >>> cfg = FinetuneMolConfig(dataset="bbbp", init="ckpt/encoder.pt", seed=0)
    >>> result = finetune(cfg)         # one seed, one registry run; a benchmark suite loops over seeds
"""
from __future__ import annotations

import math
import time
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from graph.data.molecules import MolGraphs, get_featurizer, load_moleculenet
from graph.data.splits import split as make_split
from graph.eval.rocauc import RocAuc
from graph.methods.pretrain_mol import load_encoder, shard_batches
from graph.models.gin_mol import MolGIN, MolPredictor
from suite import distributed as sd
from suite.config import experiment_config, run_option_values
from suite.train import Engine, seed_everything


@dataclass
class FinetuneMolConfig:
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("data_root", "device", "registry", "eval_batch_size")
    dataset: str = "bbbp"
    init: str = field(default="none", metadata={"help": "encoder checkpoint (file or pretraining dir) or 'none'"})
    seed: int = field(default=0, metadata={"help": "seed of the head, dropout and batch order (and of the split when "
                                                   "it is random); one seed per run"})
    featurizer: str = "hu"
    split: str = "scaffold"
    epochs: int = 100
    max_steps: int | None = field(default=None, metadata={
        "help": "stop after this many optimiser steps (the cut epoch is evaluated as the last); None = all epochs"})
    batch_size: int = 32
    lr: float = 0.001
    weight_decay: float = 0.0
    dropout: float = 0.5
    num_layers: int = 5
    emb_dim: int = 300
    eval_batch_size: int = 512
    data_root: str | None = None
    device: str = "auto"
    registry: bool = True


def masked_bce(logits: Tensor, y: Tensor) -> Tensor:
    """BCE-with-logits averaged over the labelled entries. Shapes: logits, y (B, T), NaN = missing -> ()."""
    mask = ~torch.isnan(y)
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits[mask], y[mask])


@torch.no_grad()
def predict(model: MolPredictor, graphs: MolGraphs, idx: Tensor, batch_size: int, device: torch.device) -> Tensor:
    """Logits (len(idx), T) in eval mode."""
    model.eval()
    out = [model(graphs.batch(chunk).to(device)).float().cpu() for chunk in idx.split(batch_size)]
    return torch.cat(out) if out else torch.zeros(0, len(graphs.tasks))


def _score(evaluator: RocAuc, y: Tensor, s: Tensor) -> float:
    try:
        return evaluator(y, s)["rocauc"]
    except ValueError:  # no task with both classes in this split
        return float("nan")


def finetune_seed(graphs: MolGraphs, splits: tuple[Tensor, Tensor, Tensor], cfg: FinetuneMolConfig, seed: int,
                  init: dict[str, Any] | None, run: Any = None) -> dict[str, float]:
    """Fine-tune one seed on :class:`suite.train.Engine`; ``init`` holds the pretrained encoder state (or
    None for random init). Batches keep every training molecule (supervised: no contrastive batch rule;
    a last batch of one molecule is dropped, BatchNorm needs two); each epoch is scored on valid and
    test. A ROC-AUC that is undefined (a split with one class in every task) is counted, not logged."""
    seed_everything(seed)
    if init is not None:
        enc = MolGIN(init["spec"]["num_layers"], init["spec"]["emb_dim"], cfg.dropout, get_featurizer(init["spec"]["featurizer"]))
        enc.load_state_dict(init["state"])
    else:
        enc = MolGIN(cfg.num_layers, cfg.emb_dim, cfg.dropout, get_featurizer(cfg.featurizer))
    model = MolPredictor(enc, len(graphs.tasks))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    engine = Engine(model, opt, device=cfg.device, desc=f"{cfg.dataset} s{seed}")
    device = engine.device
    train, valid, test = splits
    y_val, y_test = graphs.y[valid], graphs.y[test]  # type: ignore[index]
    ev = RocAuc()
    best = {"epoch": 0, "valid": -math.inf, "test": float("nan")}
    last = {"valid": float("nan"), "test": float("nan")}
    undefined = [0]

    def batches(epoch: int) -> list[Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        return shard_batches(train[torch.randperm(train.numel(), generator=g)], cfg.batch_size)

    def step(idx: Tensor) -> Tensor:
        b = graphs.batch(idx).to(device)
        return masked_bce(engine.ddp(b), b.y)  # type: ignore[arg-type]

    def score(epoch: int, *_: Any) -> None:
        nonlocal best, last
        last = {"valid": _score(ev, y_val, predict(model, graphs, valid, cfg.eval_batch_size, device)),
                "test": _score(ev, y_test, predict(model, graphs, test, cfg.eval_batch_size, device))}
        model.train()
        for split_name, v in last.items():
            if math.isnan(v):
                undefined[0] += 1
            elif run is not None:
                run.log_many({"rocauc": v}, split=split_name, step=epoch)
        if not math.isnan(last["valid"]) and last["valid"] > best["valid"]:
            best = {"epoch": epoch, "valid": last["valid"], "test": last["test"]}

    engine.fit(batches, step, epochs=cfg.epochs, max_steps=cfg.max_steps, on_epoch=score, log_epochs=False,
               rate_name="finetune_mol_per_s")
    epoch = engine.epoch
    if engine.batch_in_epoch:  # max_steps cut an epoch: it is evaluated as the last
        epoch += 1
        score(epoch)
    if undefined[0]:
        warnings.warn(f"{cfg.dataset} seed {seed}: ROC-AUC undefined (one class only) in {undefined[0]} "
                      "split evaluations; not logged", stacklevel=2)
    return {"test_rocauc_last": last["test"], "valid_rocauc_last": last["valid"],
            "test_rocauc_bestval": best["test"], "valid_rocauc_best": best["valid"], "best_epoch": float(best["epoch"]),
            "epochs_run": float(epoch), "steps": float(engine.step), "finetune_mol_per_s": engine.throughput.rate,
            "undefined_rocauc": float(undefined[0])}


def finetune(cfg: FinetuneMolConfig, graphs: MolGraphs | None = None) -> dict[str, Any]:
    """Fine-tune on ``cfg.dataset`` with ``cfg.seed``; one registry run."""
    if cfg.epochs < 1 or cfg.batch_size < 2:
        raise ValueError(f"need epochs >= 1 and batch_size >= 2, got {cfg.epochs}, {cfg.batch_size}")
    if cfg.max_steps is not None and cfg.max_steps < 1:
        raise ValueError(f"max_steps must be >= 1 or None, got {cfg.max_steps}")
    init: dict[str, Any] | None = None
    loss_name = "none"
    featurizer = cfg.featurizer
    if cfg.init.lower() not in ("none", ""):
        enc, spec = load_encoder(cfg.init)
        init = {"spec": spec, "state": enc.state_dict()}
        loss_name, featurizer = str(spec["loss"]), spec["featurizer"]
        if featurizer != cfg.featurizer:
            warnings.warn(f"using the encoder's featurizer {featurizer!r} (config says {cfg.featurizer!r})", stacklevel=2)
    t0 = time.perf_counter()
    if graphs is None:
        graphs = load_moleculenet(cfg.dataset, featurizer, cfg.data_root)
    load_s = time.perf_counter() - t0
    if graphs.y is None or not graphs.tasks:
        raise ValueError(f"{cfg.dataset}: no labels to fine-tune on")
    # the scaffold split is deterministic; random splits follow the run's seed
    splits = make_split(graphs.smiles, cfg.split, seed=cfg.seed if cfg.split in ("random", "random_scaffold") else 0)
    with ExitStack() as stack:
        run = None
        if cfg.registry and sd.is_main():
            from suite.registry import Registry

            conf = {**experiment_config(cfg), "init_spec": None if init is None else init["spec"]}
            run = stack.enter_context(Registry().run(
                modality="graph", task="molnet-finetune", dataset=cfg.dataset, loss=loss_name,
                loss_hparams={}, config=conf, run_options=run_option_values(cfg), seed=cfg.seed))
        res = finetune_seed(graphs, splits, cfg, cfg.seed, init, run)
        if run is not None:
            run.log_many({k: v for k, v in (("rocauc_last", res["test_rocauc_last"]),
                                             ("rocauc_bestval", res["test_rocauc_bestval"])) if not math.isnan(v)},
                         split="test", step=cfg.epochs)
            run.log_many({"best_epoch": res["best_epoch"], "finetune_mol_per_s": res["finetune_mol_per_s"],
                          "undefined_rocauc": res["undefined_rocauc"],
                          "molecules": len(graphs), "skipped": graphs.skipped,
                          "non_numeric_labels": graphs.bad_labels}, split="info")
    return {"dataset": cfg.dataset, "seed": cfg.seed, "init": cfg.init, "loss": loss_name,
            "molecules": len(graphs), "skipped": graphs.skipped, "non_numeric_labels": graphs.bad_labels,
            "load_s": load_s, **res}
