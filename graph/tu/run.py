"""Run GraphCL pretraining for one seed, write the run to the registry.

A run is one seed (modality "graph", task "tu-graphcl", loss = the preset name) with the resolved
config (``seed`` in it), the loss hyper-parameters, per-epoch training stats
(split "train": loss, the loss's diagnostics such as MACL's tau, alignment, uniformity, graphs/s)
and the SVM results (split "test": ``acc`` at every evaluated epoch, the last epoch being the
reported one; ``acc_ep10`` etc. by name; the protocol as metrics ``svm_folds``/``svm_seed``).
A config that already finished in the registry is reused unless ``rerun=True``: the run owner looks it up
(``run(..., reuse=True)``) after checking every option and while it holds the run folder, so two identical commands
started together never both train. The data is read and the SVM folds are checked against its smallest class only
for a run that trains. Under the benchmark runner a run is recorded with the runner's job hash
(``$SUITE_CONFIG_HASH``) instead of its own (:func:`suite.train.run.row_hash`). Loops over seeds
belong to the runner (a suite's ``seeds:`` list), not to the config.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import torch

from graph.tu.data import TUData, load_tu
from graph.tu.graphcl import TUConfig, TUTask, evaluate, load_encoder
from suite import distributed as sd
from suite.safeio import save_arrays
from suite.train.run import RunResult, run

TASK = "tu-graphcl"
EMBEDDINGS = "embeddings.npz"  # with save_embeddings: the final embeddings and labels (suite.safeio.load_arrays)


def run_tu(cfg: TUConfig, registry: Any = None, data: TUData | None = None, rerun: bool = False,
           verbose: bool = True) -> RunResult:
    """Train and evaluate ``cfg`` (one seed) through the run owner, which reuses a finished run of the setting unless
    ``rerun`` (``reused``: its id). ``registry`` as :func:`suite.train.run.run` takes it (None: the default
    registry). The result's ``info`` holds the accuracies and timings (``acc``, ``acc_ep<N>``, ``train_time``, ...)."""
    def log(stats: dict[str, float], epoch: int) -> None:
        if verbose and sd.is_main():
            print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] epoch {epoch}: "
                  + " ".join(f"{k}={v:.4g}" for k, v in stats.items()), flush=True)

    task = TUTask(data, log, load=lambda: _load_once(cfg), check=lambda d: check_folds(cfg, d))
    res = run(task, cfg, registry=registry, reuse=not rerun)
    head = {"dataset": cfg.dataset, "loss": cfg.loss, "seed": cfg.seed}
    if res.reused is not None:
        rec = res.recorded
        res.info = {**head, "acc": rec.get("test/acc"), "acc_ep10": rec.get("test/acc_ep10"),
                    "train_time": rec.get("train/train_time_s"), "reused": res.reused}
        if verbose and sd.is_main():
            print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] reused finished run {res.reused[:10]}: "
                  f"acc {res.info['acc']}")
    elif sd.is_main():
        res.info = {**head, **_summary(cfg, task, res, verbose)}
    return res


def check_folds(cfg: TUConfig, data: TUData) -> None:
    """The SVM protocol fits the data (checked after it is read, before any training): every class has at least
    ``--svm-folds`` graphs (stratified outer folds), and the training part of an outer fold holds at least
    ``--svm-inner-folds`` graphs of its largest class (scikit-learn's inner split refuses fewer)."""
    labels = data.labels.long()
    counts = torch.bincount(labels)
    smallest, largest = int(counts[counts > 0].min()), int(counts.max())
    if cfg.svm_folds > smallest:
        raise ValueError(f"--svm-folds {cfg.svm_folds}: {cfg.dataset}'s smallest class has {smallest} graphs "
                         f"({len(labels)} graphs in all), so it cannot be split into {cfg.svm_folds} stratified folds; "
                         f"use at most {smallest}")
    inner = largest - -(-largest // cfg.svm_folds)  # the largest class left in an outer fold's training part
    if cfg.svm_inner_folds > inner:
        raise ValueError(f"--svm-inner-folds {cfg.svm_inner_folds}: the training part of an outer fold holds at most "
                         f"{inner} graphs of any class of {cfg.dataset}; use at most {inner} (or fewer --svm-folds)")


def _load_once(cfg: TUConfig) -> TUData:
    """Load the dataset; under torch.distributed the main rank builds PyG's processed cache first."""
    if not sd.is_distributed():
        return load_tu(cfg.dataset, cfg.data_root, download=cfg.download)
    if sd.is_main():
        try:
            return load_tu(cfg.dataset, cfg.data_root, download=cfg.download)
        finally:
            sd.barrier()
    sd.barrier()
    return load_tu(cfg.dataset, cfg.data_root, download=cfg.download)


def _summary(cfg: TUConfig, task: TUTask, res: RunResult, verbose: bool) -> dict[str, Any]:
    """The accuracies and timings of a finished run (main rank); the embeddings saved with ``save_embeddings``."""
    tr = task.result()
    last = cfg.epochs
    r: dict[str, Any] = {"acc": tr.evals[last]["acc"], "acc_fold_std": tr.evals[last]["acc_std"],
                         "train_time": tr.train_time, "eval_time": tr.eval_time, "wall_time": res.wall_s,
                         "graphs_per_s": statistics.fmean(s["graphs_per_s"] for s in tr.epoch_stats),
                         "skipped_batches": tr.skipped_batches, "dropped_graphs_per_epoch": tr.dropped_per_epoch,
                         "folder": str(res.folder), "export": str(res.export)}
    for ep, ev in sorted(tr.evals.items()):
        r[f"acc_ep{ep}"] = ev["acc"]
    if cfg.save_embeddings and tr.embeddings is not None:
        save_arrays(res.folder / EMBEDDINGS, {"embeddings": tr.embeddings, "labels": tr.labels})
    if verbose:
        ep_str = " ".join(f"ep{ep}={ev['acc']:.4f}" for ep, ev in sorted(tr.evals.items()))
        print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] SVM acc {ep_str}; train {tr.train_time:.1f}s "
              f"eval {tr.eval_time:.1f}s; {tr.dropped_per_epoch} graphs per epoch left out (last partial batch); "
              f"encoder: {res.export}", flush=True)
    return r


def evaluate_checkpoint(path: str | Path, data_root: str | None = None, seed: int | None = None) -> dict[str, Any]:
    """Reload a saved encoder (a run folder, its ``export/``, or an older ``.pt`` checkpoint) and evaluate it with the
    SVM protocol on its dataset."""
    model, cfg, meta = load_encoder(path)
    data = load_tu(cfg.dataset, data_root or cfg.data_root, download=cfg.download)
    res, _, _ = evaluate(model, data, seed if seed is not None else cfg.seed, cfg.svm_folds, cfg.svm_inner_folds,
                         precomputed=cfg.svm_precomputed)
    return {"dataset": cfg.dataset, "loss": cfg.loss, "acc": res["acc"], "acc_fold_std": res["acc_std"],
            "saved_acc": meta.get("acc"), "protocol": res["protocol"]}


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, default=str)
