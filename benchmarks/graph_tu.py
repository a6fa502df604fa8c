"""GraphCL unsupervised TU benchmark: six datasets x losses x seeds, published numbers beside ours.

Protocol (graph/methods/graphcl.py): GIN 3 x 32, sum-pool concat (96-d), projection head,
original + random4-augmented view (ratio 0.2), Adam lr 0.01, batch 128, 20 epochs; seeded
10-fold SVM (inner 5-fold C search), the fixed last epoch reported (epoch 10 recorded too).

Every run goes to the registry (task "tu-graphcl"); a run whose exact config already finished is
reused, so the benchmark resumes where it stopped. The table is generated from the registry for
the requested grid and lists every cell not run yet. Speed (per dataset): pretraining graphs/s and
wall time, the ratio of a full training step (augmentation + forward/backward of both views) to
the bare encoder step on pre-augmented batches (target <= 1.3), and the SVM evaluation time.

Run: ``suite bench graph-tu [--quick] [--datasets ...] [--losses ...] [--seeds ...]`` or
``python -m benchmarks.graph_tu``; ``--table-only`` rewrites the table from the registry.
Writes ``benchmarks/results/graph_tu.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.claims import RULE_TEXT, Claim, Verdict, combine, mean_std

RESULTS = Path(__file__).resolve().parent / "results" / "graph_tu.md"
DATASETS = ("MUTAG", "PROTEINS", "NCI1", "DD", "IMDB-BINARY", "REDDIT-BINARY")
LOSSES = ("graphcl", "macl", "infonce", "cacr", "tsimclr")
SEEDS = (0, 1, 2, 3, 4)
QUICK = {"datasets": ("MUTAG", "PROTEINS"), "seeds": (0, 1)}
PUBLISHED = {  # You et al. 2020 (GraphCL, mean ± std) and Huang et al. 2023 (GraphCL + MACL, Table 4)
    "MUTAG": ((86.80, 1.34), (89.04, 0.98)), "PROTEINS": ((74.39, 0.45), (74.47, 0.85)),
    "NCI1": ((77.87, 0.41), (78.41, 0.47)), "DD": ((78.62, 0.40), (78.80, 0.66)),
    "IMDB-BINARY": ((71.14, 0.44), (71.42, 1.05)), "REDDIT-BINARY": ((89.53, 0.84), (90.59, 0.36)),
}
SPEED_TASK = "tu-graphcl-speed"
WALL_TASK = "tu-graphcl-wall"  # wall time of a benchmark invocation
NOTES = """## Notes

- The fold split is seeded and the reported number is the last epoch. This protocol is stricter
  than the published one, which uses unseeded folds and in practice the best logged epoch.
- The augmentations follow issue 3: every ratio is 20% and random4 draws one augmentation per
  batch. GraphCL's released TU code differs. It uses 10% for node dropping, edge removal and
  masking, keeps an ego-subgraph of about 20% of the nodes, and draws the augmentation per graph
  (`--aug random4_graph`; see graph/README.md). On the small datasets these differences can move
  the numbers by about a point.
- Verdicts (macl ≥ graphcl per dataset and "at least 4 of 6") come from benchmarks/claims.py:
  Welch's t-test on the per-seed accuracies, computed from the registry when the table is written.
  With 5 seeds, a gap of a few tenths of a point (the size of the published MACL gains on DD and
  IMDB-BINARY, under one published std) cannot be told apart from seed noise in either direction.
- The |Δ| ≤ 1.5 column compares our mean with the published mean only (a reproduction band, not a
  claim between two measured sides). The protocol differences above (20% ratios, one augmentation
  per batch, seeded folds) are the likely causes of a gap outside the band.
- Hardware: 2 CPU cores, otherwise idle except for about 3 minutes of niced unit tests. Two grid cells run in parallel (`--jobs 2`), each
  with 1 torch thread. The SVM uses a precomputed RBF kernel, which gives the same C and accuracy
  as GridSearchCV(SVC), about 2x faster (graph/README.md). The nested-CV SVM (10 outer x 5 inner
  folds x 7 values of C, twice per run) is most of the time on NCI1. Pretraining is most of it on
  DD and REDDIT-BINARY.
- Runs made with the earlier GridSearchCV evaluator, or before later changes to the t-SimCLR
  normaliser and the subgraph augmentation, stay in the registry under their own config hash and
  are not mixed into this table.
"""


def _cfg(dataset: str, loss: str, seed: int, epochs: int) -> Any:
    from graph.methods.graphcl import TUConfig

    return TUConfig(dataset=dataset, loss=loss, seeds=[seed], epochs=epochs, eval_epochs=[10, epochs])


def measure_speed(dataset: str, batches: int = 6, seed: int = 0, repeats: int = 3) -> dict[str, float]:
    """Full training step vs bare encoder step on the same pre-augmented batches (graphcl preset)."""
    from torch_geometric.loader import DataLoader

    from graph.augment import build_augmentation
    from graph.data.tu import load_tu
    from graph.methods.graphcl import MultiViewModel, evaluate, loss_step, make_views
    from graph.methods.presets import resolve
    from graph.models.gin import GraphCLModel

    data = load_tu(dataset)
    torch.manual_seed(seed)
    loader = DataLoader(data.graphs, batch_size=128, shuffle=True, generator=torch.Generator().manual_seed(seed))  # type: ignore[arg-type]
    bs = [b for _, b in zip(range(batches), loader)]
    loss, mode, _ = resolve("graphcl")
    aug = build_augmentation("random4", 0.2)
    model = GraphCLModel(data.num_features)
    mv = MultiViewModel(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(seed)
    pre = [make_views(b, mode, aug, gen) for b in bs]

    def step(views: list[Any]) -> None:
        value, _ = loss_step(mv, loss, views)
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()

    step(pre[0])  # warm-up
    bare, full = [], []
    for _ in range(repeats):
        for b, views in zip(bs, pre):  # interleaved so that load changes hit both alike
            t0 = time.perf_counter()
            step(views)
            bare.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            step(make_views(b, mode, aug, gen))
            full.append(time.perf_counter() - t0)
    aug_t = []
    for b in bs:
        t0 = time.perf_counter()
        make_views(b, mode, aug, gen)
        aug_t.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    evaluate(model, data, seed)
    eval_s = time.perf_counter() - t0
    n = repeats * sum(b.num_graphs for b in bs)
    return {"step_ratio": statistics.median(full) / statistics.median(bare), "bare_step_ms": 1000 * statistics.median(bare),
            "full_step_ms": 1000 * statistics.median(full), "aug_ms": 1000 * statistics.median(aug_t),
            "graphs_per_s_full": n / sum(full), "eval_s": eval_s}


def _lookup(reg: Any, dataset: str, loss: str, seed: int, epochs: int) -> dict[str, float] | None:
    from graph.methods.tu_run import TASK, _seed_config
    from suite.config import hash_config

    cfg = _seed_config(_cfg(dataset, loss, seed, epochs), seed)
    prev = reg.find_finished(hash_config(cfg, exclude=("data_root",)))
    if prev is None:  # recorded by `suite bench run` under its job hash: match the recorded config instead
        want = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
        want.pop("data_root", None)
        for r in reversed(reg.runs(task=TASK, dataset=dataset, loss=loss, seed=seed, status="finished")):
            got = json.loads(r["config"]) if isinstance(r["config"], str) else r["config"]
            if all(got.get(k) == v for k, v in want.items()):
                prev = r
                break
    if prev is None:
        return None
    fm = reg.final_metrics(prev["id"])
    return {"acc": fm.get(("acc", "test")), "acc_ep10": fm.get(("acc_ep10", "test")),
            "train_time": fm.get(("train_time_s", "train")), "eval_time": fm.get(("eval_time_s", "train")),
            "graphs_per_s": fm.get(("graphs_per_s", "train")), "wall": prev["wall_time"]}


def _ms(values: list[float]) -> str:
    return mean_std(values, scale=100, empty="not run")


CLAIM = Claim("graph/tu-graphcl", "macl", "graphcl", "acc", "MACL ≥ GraphCL on at least 4 of 6 TU data sets (MACL Table 4)")


def write_table(reg: Any, datasets: tuple[str, ...], losses: tuple[str, ...], seeds: tuple[int, ...], epochs: int,
                out: Path, note: str = "") -> str:
    from suite.registry import markdown_table

    cells: dict[tuple[str, str], list[dict[str, float]]] = {}
    missing: list[tuple[str, str, int]] = []
    for ds in datasets:
        for loss in losses:
            got = []
            for s in seeds:
                r = _lookup(reg, ds, loss, s, epochs)
                if r is None or r["acc"] is None:
                    missing.append((ds, loss, s))
                else:
                    got.append({**r, "seed": s})
            cells[(ds, loss)] = got
    head = ["dataset", "GraphCL (paper)", "graphcl (ours)", "|Δ| ≤ 1.5?", "MACL (paper)", "macl (ours)", "macl ≥ graphcl? (claims rule)"]
    others = [l for l in losses if l not in ("graphcl", "macl")]
    head += [f"{l} (ours)" for l in others]
    rows, results, hits = [], [], 0
    ran_g = sum(1 for ds in datasets if cells.get((ds, "graphcl")))
    for ds in datasets:
        (pg, pgs), (pm, pms) = PUBLISHED[ds]
        g = [r["acc"] for r in cells.get((ds, "graphcl"), [])]
        m = [r["acc"] for r in cells.get((ds, "macl"), [])]
        ok = "-" if not g else ("yes" if abs(100 * statistics.fmean(g) - pg) <= 1.5 else
                                f"**no** ({100 * statistics.fmean(g) - pg:+.2f})")
        hits += ok == "yes"
        mw = "-"
        if g and m:
            res = CLAIM.judge([100 * x for x in m], [100 * x for x in g])
            results.append(res)
            mw = f"{res.verdict} ({res.evidence()})"
        row = [ds, f"{pg:.2f} ± {pgs:.2f}", _ms(g), ok, f"{pm:.2f} ± {pms:.2f}", _ms(m), mw]
        row += [_ms([r["acc"] for r in cells.get((ds, l), [])]) for l in others]
        rows.append(row)
    ep10 = [[ds] + [_ms([r["acc_ep10"] for r in cells.get((ds, l), []) if r.get("acc_ep10") is not None]) for l in losses]
            for ds in datasets]
    speed_rows = []
    for ds in datasets:
        sp = [r for r in reg.runs(task=SPEED_TASK, dataset=ds, status="finished")]
        runs = [r for l in losses for r in cells.get((ds, l), [])]
        tt = [r["train_time"] for r in runs if r.get("train_time") is not None]
        ev = [r["eval_time"] for r in runs if r.get("eval_time") is not None]
        gps = [r["graphs_per_s"] for r in runs if r.get("graphs_per_s") is not None]
        s = reg.final_metrics(sp[-1]["id"]) if sp else {}
        speed_rows.append([ds, f"{statistics.fmean(gps):.0f}" if gps else "-", f"{statistics.fmean(tt):.1f}" if tt else "-",
                           f"{statistics.fmean(ev):.1f}" if ev else "-",
                           f"{s[('step_ratio', 'speed')]:.2f}" if s else "not measured",
                           f"{s[('bare_step_ms', 'speed')]:.0f} / {s[('full_step_ms', 'speed')]:.0f} / {s[('aug_ms', 'speed')]:.1f}" if s else "-",
                           f"{s[('eval_s', 'speed')]:.1f}" if s else "-"])
    per_run = {}
    for ds in datasets:
        rs = [r for l in losses for r in cells.get((ds, l), []) if r.get("train_time") is not None and r.get("eval_time") is not None]
        if rs:
            per_run[ds] = statistics.fmean(r["train_time"] + r["eval_time"] for r in rs)
    est = sum(v * len(losses) * len(seeds) for v in per_run.values())
    est_line = (f"Serial time of the whole grid from the measured per-run times (train + evaluation, one process): "
                f"{est / 3600:.1f} h for the {len(per_run)} datasets measured" + (f"; not measured yet: {', '.join(d for d in datasets if d not in per_run)}"
                                                               if len(per_run) < len(datasets) else "") + ".")
    walls = reg.runs(task=WALL_TASK, status="finished")
    if walls:
        w = reg.final_metrics(walls[-1]["id"])
        est_line += (f" Last benchmark invocation: {w[('runs', 'speed')]:.0f} runs (of a {w[('grid', 'speed')]:.0f}-cell grid) "
                     f"in {w[('wall_s', 'speed')] / 60:.1f} min wall with {w[('jobs', 'speed')]:.0f} parallel jobs "
                     f"(load average {w[('load_avg_1m', 'speed')]:.1f} at its end).")
    done = sum(len(v) for v in cells.values())
    total = len(datasets) * len(losses) * len(seeds)
    text = [
        "# GraphCL on TU datasets: unsupervised graph classification (SVM accuracy, %)",
        "",
        "Generated by `benchmarks/graph_tu.py` from the results registry (task `tu-graphcl`). Mean ± std over seeds",
        f"of the accuracy at the fixed last epoch ({epochs}); n = seeds actually run. Runs done: {done} of {total}.",
        "",
        "Protocol: GIN 3 layers x 32 (sum-pool concat, 96-d) + 2-layer projection head; views = original graph and",
        "its random4 augmentation (node dropping / edge perturbation (removal) / random-walk subgraph / attribute",
        "masking with N(0.5, 0.5) noise, ratio 0.2, one choice per batch); Adam lr 0.01, batch 128, "
        f"{epochs} epochs; embeddings of the un-augmented graphs (encoder output, eval mode); RBF SVC, C in",
        "{1e-3..1e3} chosen by inner 5-fold grid search, outer 10-fold stratified CV seeded with the run seed.",
        "Presets: graphcl = dcl(τ=0.2, cross negatives, asymmetric); macl = macl(τ0=0.2, α=0.5, A0=0, cross,",
        "asymmetric); infonce = infonce(τ=0.2, cross, asymmetric); cacr = cacr(t+=1, t-=2), V=2; tsimclr =",
        "tsimclr(τ=5, ν=5). Published numbers: GraphCL (You et al. 2020) and GraphCL+MACL (Huang et al. 2023, Table 4).",
        "",
        markdown_table(head, rows),
        "",
        f"Targets: graphcl within 1.5 points of the published GraphCL mean on every dataset: met on {hits} of the "
        f"{ran_g} datasets with graphcl results ({len(datasets) - ran_g} not run yet). {CLAIM.text}: "
        f"**{combine(results, need=4, total=len(PUBLISHED))}** (confirmed on "
        f"{sum(r.verdict is Verdict.CONFIRMED for r in results)} of the {len(results)} datasets with both results).",
        "",
        RULE_TEXT,
        "",
        "## Epoch-10 accuracy (recorded, not the reported number)",
        "",
        markdown_table(["dataset"] + list(losses), ep10),
        "",
        "## Speed (2 CPU cores, 1 torch thread per run)",
        "",
        "graphs/s and train s: mean over the runs above (pretraining only, all epochs); eval s: SVM evaluation time",
        "per run (two evaluations: epoch 10 and last). Step ratio: full training step (random4 augmentation +",
        "forward/backward of both views) / bare step on the same pre-augmented batches, graphcl preset, batch 128.",
        "",
        markdown_table(["dataset", "graphs/s", "train s / run", "eval s / run", "step ratio (≤ 1.3)",
                        "bare / full step ms / aug ms", "one SVM eval s"], speed_rows),
        "",
        est_line,
        "",
    ]
    if missing:
        groups: dict[tuple[str, str], list[int]] = {}
        for ds, loss, s in missing:
            groups.setdefault((ds, loss), []).append(s)
        text += ["## Not run yet", "",
                 f"{len(missing)} (dataset, loss, seed) runs: " + "; ".join(
                     f"{ds} {loss} seeds {' '.join(map(str, ss))}" for (ds, loss), ss in groups.items()) + ".",
                 "", "Run them with (resumes, reusing finished runs):", "",
                 "```", "nice -n 10 .venv/bin/python -m benchmarks.graph_tu --datasets " + " ".join(datasets)
                 + " --losses " + " ".join(losses) + " --seeds " + " ".join(map(str, seeds)), "```", ""]
    if note:
        text += [note, ""]
    md = "\n".join(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    return md


def _cell(ds: str, loss: str, seed: int, epochs: int, threads: int) -> bool:
    """One (dataset, loss, seed) run in a worker process; True when it ran (False: reused from the registry)."""
    from graph.data.tu import load_tu
    from graph.methods.tu_run import run_tu
    from suite.registry import Registry

    torch.set_num_threads(threads)
    reg = Registry()
    if _lookup(reg, ds, loss, seed, epochs) is not None:
        return False
    if _DATA.get("name") != ds:
        _DATA.update(name=ds, data=load_tu(ds))
    run_tu(_cfg(ds, loss, seed, epochs), registry=reg, data=_DATA["data"])
    return True


_DATA: dict[str, Any] = {}  # per worker process: the last dataset loaded


def run(datasets: tuple[str, ...], losses: tuple[str, ...], seeds: tuple[int, ...], epochs: int = 20,
        speed: str = "once", out: Path = RESULTS, table_only: bool = False, order: str = "seed", jobs: int = 1,
        threads: int = 1) -> str:
    from benchmarks.parallel import run_cells
    from suite.registry import Registry

    reg = Registry()
    note = NOTES
    if not table_only:
        for ds in datasets:  # before the grid, on an otherwise idle machine
            if speed == "always" or (speed == "once" and not reg.runs(task=SPEED_TASK, dataset=ds, status="finished")):
                with reg.run(modality="graph", task=SPEED_TASK, dataset=ds, loss="graphcl", config={"batches": 6}, seed=0) as r:
                    r.log_many(measure_speed(ds), split="speed")
        # seeds outermost (default): every dataset/loss gets a first seed before any gets a second
        grid = ([(ds, l, s) for s in seeds for ds in datasets for l in losses] if order == "seed"
                else [(ds, l, s) for ds in datasets for l in losses for s in seeds])
        t0, ran = time.perf_counter(), 0
        for _, did_run in run_cells(_cell, [(ds, loss, s, epochs, threads) for ds, loss, s in grid], jobs):
            ran += did_run
            write_table(reg, datasets, losses, seeds, epochs, out, note)
        if ran:
            with reg.run(modality="graph", task=WALL_TASK, dataset="+".join(datasets), loss="+".join(losses),
                         config={"seeds": list(seeds), "epochs": epochs, "jobs": jobs, "threads": threads}, seed=0) as r:
                r.log_many({"wall_s": time.perf_counter() - t0, "runs": ran, "grid": len(grid), "jobs": jobs,
                            "load_avg_1m": os.getloadavg()[0]}, split="speed")
    return write_table(reg, datasets, losses, seeds, epochs, out, note)


def register(sub: Any) -> None:
    p = sub.add_parser("graph-tu", help="GraphCL TU benchmark (6 datasets x losses x seeds); writes benchmarks/results/graph_tu.md")
    p.add_argument("--quick", action="store_true", help="MUTAG + PROTEINS, seeds 0 1 (a few minutes)")
    p.add_argument("--datasets", nargs="+", default=None)
    p.add_argument("--losses", nargs="+", default=list(LOSSES))
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--order", choices=["seed", "dataset"], default="seed", help="grid order (seed: breadth first)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on shared cores)")
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (worker processes, --threads each)")
    p.add_argument("--speed", choices=["once", "always", "never"], default="once",
                   help="step-ratio measurement per dataset: once ever (default), at every invocation, or never")
    p.add_argument("--table-only", action="store_true", help="only rewrite the table from the registry")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    datasets = tuple(args.datasets or (QUICK["datasets"] if args.quick else DATASETS))
    seeds = tuple(args.seeds if args.seeds is not None else (QUICK["seeds"] if args.quick else SEEDS))
    unknown = [d for d in datasets if d not in PUBLISHED]
    if unknown:
        raise ValueError(f"no published numbers for {unknown}; datasets: {list(PUBLISHED)}")
    print(run(datasets, tuple(args.losses), seeds, args.epochs, args.speed, args.out, args.table_only, args.order,
              args.jobs, args.threads))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.graph_tu")
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["graph-tu", *sys.argv[1:]])))
