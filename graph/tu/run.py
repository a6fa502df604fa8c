"""Run GraphCL pretraining for one seed, write the run to the registry.

A run is one seed (modality "graph", task "tu-graphcl", loss = the preset name) with the resolved
config (``seed`` in it), the loss hyper-parameters, per-epoch training stats
(split "train": loss, the loss's diagnostics such as MACL's tau, alignment, uniformity, graphs/s)
and the SVM results (split "test": ``acc`` at every evaluated epoch, the last epoch being the
reported one; ``acc_ep10`` etc. by name; the protocol as metrics ``svm_folds``/``svm_seed``).
A config that already finished in the registry is reused unless ``rerun=True``; every option is checked first
(:func:`suite.train.run.check_run_options`: a reused run is no excuse for a bad ``--out`` or ``--keep-checkpoints``),
and the lookup happens while this process holds the run folder (:func:`suite.train.run.hold_folder`), so two
identical commands started together never both train: the second is refused while the first runs, and reuses its
row once it has finished. The SVM folds are checked against the data's smallest class before training. Under the
benchmark runner a
run is recorded with the runner's job hash (``$SUITE_CONFIG_HASH``) instead of its own. Loops over seeds
belong to the runner (a suite's ``seeds:`` list), not to the config.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from graph.tu.data import TUData, load_tu
from graph.tu.graphcl import TUConfig, TUTask, evaluate, load_encoder
from suite import distributed as sd
from suite.config import experiment_config
from suite.registry import Registry, config_hash
from suite.train.run import check_run_options, hold_folder, run, run_folder

TASK = "tu-graphcl"


def run_tu(cfg: TUConfig, registry: Registry | None = None, data: TUData | None = None, rerun: bool = False,
           verbose: bool = True) -> dict[str, Any]:
    """Train and evaluate ``cfg`` (one seed); returns its accuracies and timings (``reused``: the id of the
    finished run taken from the registry instead)."""
    check_run_options(cfg)  # before any lookup: a finished run is reused only for a command that is valid
    # the hash the run is recorded under: the runner's job hash (SUITE_CONFIG_HASH), else the setting's own
    h = os.environ.get("SUITE_CONFIG_HASH") or config_hash(experiment_config(cfg))
    # every rank reads the registry (all must agree on whether to skip); only the main rank writes
    lookup = registry if registry is not None else Registry()
    folder = run_folder(cfg, TASK, TUTask(None).stem(cfg))  # type: ignore[arg-type]
    # the main rank looks up and runs while holding the folder: a twin started at the same time is refused, one
    # started after it finished reuses its row (never two finished rows for one run)
    with hold_folder(folder) if sd.is_main() else _nothing():
        prev = lookup.find_finished(h) if not rerun else None
        if prev is not None:
            fm = lookup.final_metrics(prev["id"])
            r = {"acc": fm.get(("acc", "test")), "acc_ep10": fm.get(("acc_ep10", "test")),
                 "train_time": fm.get(("train_time_s", "train")), "reused": prev["id"]}
            if verbose:
                print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] reused finished run {prev['id'][:10]}: acc {r['acc']}")
        else:
            data = data if data is not None else _load_once(cfg)
            check_folds(cfg, data)
            r = _run(cfg, h, data, lookup if sd.is_main() else None, verbose)
    return {"dataset": cfg.dataset, "loss": cfg.loss, "seed": cfg.seed, **r}


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


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
    import torch.distributed as dist

    if sd.is_main():
        try:
            return load_tu(cfg.dataset, cfg.data_root, download=cfg.download)
        finally:
            dist.barrier()
    dist.barrier()
    return load_tu(cfg.dataset, cfg.data_root, download=cfg.download)


def _run(cfg: TUConfig, h: str, data: TUData, reg: Registry | None, verbose: bool) -> dict[str, Any]:
    def log(stats: dict[str, float], epoch: int) -> None:
        if verbose:
            print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] epoch {epoch}: "
                  + " ".join(f"{k}={v:.4g}" for k, v in stats.items()), flush=True)

    task = TUTask(data, log)
    t0 = time.perf_counter()
    res = run(task, cfg, registry=reg if reg is not None else False, cfg_hash=h)
    wall = time.perf_counter() - t0
    if not sd.is_main():
        return {}
    tr = task.result()
    last = cfg.epochs
    r: dict[str, Any] = {"acc": tr.evals[last]["acc"], "acc_fold_std": tr.evals[last]["acc_std"],
                         "train_time": tr.train_time, "eval_time": tr.eval_time, "wall_time": wall,
                         "graphs_per_s": statistics.fmean(s["graphs_per_s"] for s in tr.epoch_stats),
                         "skipped_batches": tr.skipped_batches, "dropped_graphs_per_epoch": tr.dropped_per_epoch,
                         "folder": str(res.folder), "export": str(res.export)}
    for ep, ev in sorted(tr.evals.items()):
        r[f"acc_ep{ep}"] = ev["acc"]
    if cfg.save_embeddings and tr.embeddings is not None:
        torch.save({"embeddings": tr.embeddings, "labels": tr.labels}, res.folder / "embeddings.pt")
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
