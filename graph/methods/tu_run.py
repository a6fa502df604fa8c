"""Run GraphCL pretraining for one seed, write the run to the registry.

A run is one seed (modality "graph", task "tu-graphcl", loss = the preset name) with the resolved
config (``seed`` in it), the loss hyper-parameters, per-epoch training stats
(split "train": loss, the loss's diagnostics such as MACL's tau, alignment, uniformity, graphs/s)
and the SVM results (split "test": ``acc`` at every evaluated epoch, the last epoch being the
reported one; ``acc_ep10`` etc. by name; the protocol as metrics ``svm_folds``/``svm_seed``).
A config that already finished in the registry is reused unless ``rerun=True``. Under the benchmark runner a
run is recorded with the runner's job hash (``$SUITE_CONFIG_HASH``) instead of its own. Loops over seeds
belong to the runner (a suite's ``seeds:`` list), not to the config.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from graph.data.tu import TUData, load_tu
from graph.methods.graphcl import TUConfig, evaluate, load_encoder, save_encoder, train, tu_card
from suite import distributed as sd
from suite.config import experiment_config, run_option_values
from suite.registry import Registry, config_hash

TASK = "tu-graphcl"


def run_tu(cfg: TUConfig, registry: Registry | None = None, data: TUData | None = None, rerun: bool = False,
           verbose: bool = True) -> dict[str, Any]:
    """Train and evaluate ``cfg`` (one seed); returns its accuracies and timings (``reused``: the id of the
    finished run taken from the registry instead)."""
    # the hash the run is recorded under: the runner's job hash (SUITE_CONFIG_HASH), else the setting's own
    h = os.environ.get("SUITE_CONFIG_HASH") or config_hash(experiment_config(cfg))
    # every rank reads the registry (all must agree on whether to skip); only the main rank writes
    lookup = registry if registry is not None else Registry()
    prev = lookup.find_finished(h) if not rerun else None
    if prev is not None:
        fm = lookup.final_metrics(prev["id"])
        r = {"acc": fm.get(("acc", "test")), "acc_ep10": fm.get(("acc_ep10", "test")),
             "train_time": fm.get(("train_time_s", "train")), "reused": prev["id"]}
        if verbose:
            print(f"[{cfg.dataset} {cfg.loss} seed {cfg.seed}] reused finished run {prev['id'][:10]}: acc {r['acc']}")
    else:
        data = data if data is not None else _load_once(cfg)
        r = _run(cfg, h, data, lookup if sd.is_main() else None, verbose)
    return {"dataset": cfg.dataset, "loss": cfg.loss, "seed": cfg.seed, **r}


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
    from graph.methods.presets import resolve

    seed = cfg.seed

    loss, views, record = resolve(cfg.loss, cfg.loss_hparams, cfg.views)
    config = {**experiment_config(cfg), "resolved": {**record, "hparams": loss.hparams()},
              "protocol": {"svm": "SVC(rbf), C in 1e-3..1e3 by inner grid search", "outer_folds": cfg.svm_folds,
                           "inner_folds": cfg.svm_inner_folds, "fold_seed": seed, "reported_epoch": cfg.epochs,
                           "embeddings": "encoder (pre-projection) of un-augmented graphs, eval mode"}}

    def body(run: Any) -> dict[str, Any]:
        def log(stats: dict[str, float], epoch: int) -> None:
            if run is not None:
                run.log_many(stats, split="train", step=epoch)
            if verbose:
                print(f"[{cfg.dataset} {cfg.loss} seed {seed}] epoch {epoch}: "
                      + " ".join(f"{k}={v:.4g}" for k, v in stats.items()), flush=True)

        t0 = time.perf_counter()
        res = train(cfg, data, seed, log=log)
        wall = time.perf_counter() - t0
        if not sd.is_main():
            return {}
        last = cfg.epochs
        r: dict[str, Any] = {"acc": res.evals[last]["acc"], "acc_fold_std": res.evals[last]["acc_std"],
                             "train_time": res.train_time, "eval_time": res.eval_time, "wall_time": wall,
                             "graphs_per_s": statistics.fmean(s["graphs_per_s"] for s in res.epoch_stats),
                             "skipped_batches": res.skipped_batches, "dropped_graphs_per_epoch": res.dropped_per_epoch}
        for ep, ev in sorted(res.evals.items()):
            r[f"acc_ep{ep}"] = ev["acc"]
            if run is not None:
                run.log_many({"acc": ev["acc"], f"acc_ep{ep}": ev["acc"], "acc_fold_std": ev["acc_std"]},
                             split="test", step=ep)
        if run is not None:
            run.log_many({"train_time_s": res.train_time, "eval_time_s": res.eval_time, "graphs_per_s": r["graphs_per_s"],
                          "skipped_batches": res.skipped_batches, "dropped_graphs_per_epoch": res.dropped_per_epoch},
                         split="train", step=last)
        if cfg.save_dir:
            d = Path(cfg.save_dir)
            path = d / f"{cfg.dataset}_{cfg.loss}_seed{seed}.pt"
            save_encoder(path, res.model, cfg, meta={"acc": r["acc"], "run_id": run.id if run is not None else None},
                         card=tu_card(cfg, type(loss).name, loss.hparams(), len(data), seed, path, run))
            if cfg.save_embeddings and res.embeddings is not None:
                torch.save({"embeddings": res.embeddings, "labels": res.labels},
                           d / f"{cfg.dataset}_{cfg.loss}_seed{seed}_emb.pt")
        if verbose:
            ep_str = " ".join(f"ep{ep}={ev['acc']:.4f}" for ep, ev in sorted(res.evals.items()))
            print(f"[{cfg.dataset} {cfg.loss} seed {seed}] SVM acc {ep_str}; train {res.train_time:.1f}s "
                  f"eval {res.eval_time:.1f}s; skipped batches {res.skipped_batches}; "
                  f"{res.dropped_per_epoch} graphs per epoch left out (last partial batch)", flush=True)
        return r

    if reg is None:
        return body(None)
    with reg.run(modality="graph", task=TASK, dataset=cfg.dataset, loss=cfg.loss, loss_hparams=loss.hparams(),
                 config=config, run_options=run_option_values(cfg), seed=seed,
                 cfg_hash=h) as run:
        return body(run)


def evaluate_checkpoint(path: str | Path, data_root: str | None = None, seed: int | None = None) -> dict[str, Any]:
    """Reload a saved encoder and evaluate it with the SVM protocol on its dataset."""
    model, cfg, meta = load_encoder(path)
    data = load_tu(cfg.dataset, data_root or cfg.data_root, download=cfg.download)
    res, _, _ = evaluate(model, data, seed if seed is not None else cfg.seed, cfg.svm_folds, cfg.svm_inner_folds,
                         precomputed=cfg.svm_precomputed)
    return {"dataset": cfg.dataset, "loss": cfg.loss, "acc": res["acc"], "acc_fold_std": res["acc_std"],
            "saved_acc": meta.get("acc"), "protocol": res["protocol"]}


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=2, default=str)
