"""``suite bench report``: the cross-modality report, built from the results registry alone.

Writes ``benchmarks/results/README.md`` (Markdown tables: rows losses, columns data sets, mean ± std over
seeds of each task's headline metric, published numbers beside ours, best per column in bold, and which
of the papers' claims were confirmed at this scale) and ``benchmarks/results/report.html`` (the same
tables plus plots as embedded PNG: accuracy per loss and data set with error bars, a loss x modality
rank heat-map, training curves, MACL's temperature trajectory, CACR's conditional entropy H(X^-|X) over
training, and loss forward+backward time).

Rows are losses, split by the config keys the shipped suites vary on purpose (their grid keys: batch size,
views, projection size, ...). Any other config key whose value differs between a task's runs makes a separate
setting; by default each task shows the setting with the most runs and counts the runs left out, and
``--all-settings`` shows every setting (the history), one row per loss and setting. Claims pair rows of one
task, data set, setting and grid-key values, and their evidence names the rows used.
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import json
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.claims import RULE_TEXT, Verdict, mean_std, std
from benchmarks.tables import committed
from suite.registry import Registry, markdown_table, open_registry

RESULTS = Path(__file__).resolve().parent / "results"

# (modality, task prefix) -> candidate (metric, split) headline metrics, first present wins
HEADLINES: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("graph", "tu-graphcl", [("acc", "test")]),
    ("graph", "molnet-finetune", [("rocauc_last", "test")]),
    ("text", "simcse", [("avg", "test"), ("stsb", "test"), ("best_stsb_dev", "dev")]),
    ("text", "senteval", [("avg", "test"), ("stsb", "test")]),
    ("vision", "", [("knn_acc", "test"), ("linear_acc", "test")]),
]
LABELS = {"acc": "SVM accuracy (%)", "rocauc_last": "test ROC-AUC, last epoch (%)", "avg": "STS average Spearman (%)",
          "stsb": "STS-B test Spearman (%)", "best_stsb_dev": "STS-B dev Spearman, best step (%)",
          "knn_acc": "kNN accuracy (%)", "linear_acc": "linear-probe accuracy (%)"}
SKIP_TASKS = ("loss-bench", "mol-pretrain", "tu-graphcl-speed")
# benchmark modules whose pictures (``figures(registry)``) the report shows beside the task tables (their claims are
# in benchmarks/catalogue.py)
SECTIONS = ("benchmarks.graph_tu", "benchmarks.graph_molnet", "benchmarks.text_sts", "benchmarks.vision_cifar",
            "benchmarks.gmm", "benchmarks.xclr")


# every table rendered from the registry: (module, its output file attribute); `suite bench report --check` rebuilds
# them all from the committed snapshot and compares them with the committed files
TABLES = (("benchmarks.graph_tu", "OUT"), ("benchmarks.graph_molnet", "OUT"), ("benchmarks.text_sts", "OUT"),
          ("benchmarks.vision_cifar", "OUT"), ("benchmarks.gmm", "OUT"), ("benchmarks.fidelity", "RESULTS"),
          ("benchmarks.xclr", "OUT"))
SNAPSHOT = RESULTS / "registry.jsonl"


def _sections() -> list[Any]:
    import importlib

    return [importlib.import_module(name) for name in SECTIONS]


@dataclass
class Cell:
    values: list[float]
    loss: str = ""
    setting: int = 1  # index into the task's settings (1 = the one with most runs)
    rowkey: str = ""  # values of the suites' grid keys that vary in this task ("batch_size=64, views=5")
    name: str = ""  # the row label in the table
    hpkey: str = ""  # the loss hyper-parameters that vary between this loss's runs ("temperature=0.05")

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        """Sample std over seeds (NaN for one seed)."""
        return std(self.values)

    @property
    def err(self) -> float:
        """Error bar: the std, 0 for one seed."""
        return 0.0 if len(self.values) < 2 else self.std


# A run's setting is its recorded config (the experiment: run options are recorded apart, in run_options; runs
# recorded before that split are converted by `suite bench migrate`) less the keys that say which row and seed it
# is: its seed(s) (and nested ``*_seed`` keys), its loss, data set, and what a transfer or evaluation run starts
# from (the training data file, the pretrained encoder). Runs of one task that differ in any other key (batch size,
# views, epochs, profile, ...) are different settings: their numbers are never pooled as if they were seeds, and
# claims compare losses within one setting.
ROW_IDENTITY = frozenset({"seed", "seeds", "loss", "loss_hparams", "resolved", "dataset", "data", "init", "init_spec"})


@dataclass
class Table:
    """One task's headline metric: {dataset: {row label: Cell}} plus the legend of its settings."""
    by_ds: dict[str, dict[str, Cell]]
    settings: list[tuple[int, str]]  # (number of runs, "key=value, ...") for settings 1, 2, ... (with --all-settings)
    latest: str = ""  # the setting shown (by default: the one with the most runs), "" if the task has one
    hidden: int = 0  # runs of earlier settings left out (shown with --all-settings)


def row_keys() -> frozenset[str]:
    """Config keys the shipped suites vary on purpose (their ``grid`` keys, e.g. batch size, views): runs that
    differ in them are rows of one table, not settings. Any other key that differs is a setting."""
    import yaml

    from benchmarks.run import SUITES

    keys: set[str] = set()
    for f in sorted(SUITES.glob("*.yaml")):
        try:
            spec = yaml.safe_load(f.read_text()) or {}
        except yaml.YAMLError:
            continue
        for g in spec.get("jobs") or []:
            if isinstance(g, dict) and isinstance(g.get("grid"), dict):
                keys |= {str(k).replace("-", "_") for k in g["grid"]}
    return frozenset(keys - ROW_IDENTITY)


def _pct(v: float) -> float:
    return 100.0 * v if abs(v) <= 1.0 else v


def published() -> dict[tuple[str, str, str], float]:
    """(task prefix, dataset, loss) -> published number (%), from the front-end benchmarks' tables."""
    out: dict[tuple[str, str, str], float] = {}
    try:
        from benchmarks.graph_tu import PUBLISHED as TU

        for ds, ((g, _), (m, _)) in TU.items():
            out[("tu-graphcl", ds, "graphcl")] = g
            out[("tu-graphcl", ds, "macl")] = m
    except Exception:  # a front-end extra missing: report without its published numbers
        pass
    try:
        from benchmarks.graph_molnet import PUBLISHED as MOL

        for loss, row in MOL.items():
            for ds, v in row.items():
                out[("molnet-finetune", ds, loss)] = v
    except Exception:
        pass
    try:
        from benchmarks.text_sts import PUBLISHED as TXT, STS_COLS

        for name, vals in TXT:
            loss = "macl" if "MACL" in name else "infonce"
            for col, v in zip(STS_COLS, vals):
                out[("simcse", col, loss)] = v
    except Exception:
        pass
    return out


def _setting(config: Any, prefix: str = "") -> dict[str, str]:
    """The run's setting: its config without ROW_IDENTITY keys, nested dicts flattened to ``a.b`` keys (a
    nested seed such as ``protocol.fold_seed`` is a seed too)."""
    cfg = config if isinstance(config, dict) else json.loads(config or "{}")
    if not isinstance(cfg, dict):
        return {}
    out: dict[str, str] = {}
    for k, v in cfg.items():
        if k in ROW_IDENTITY or k.endswith("_seed"):
            continue
        if isinstance(v, dict):
            out.update(_setting(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = json.dumps(v, sort_keys=True)
    return out


def collect(reg: Registry, all_settings: bool = False) -> dict[tuple[str, str, str], Table]:
    """{(modality, task, metric label): Table} of the headline metric over finished runs: the setting of each task
    with the most runs, or every setting with ``all_settings``."""
    hits: dict[tuple[str, str, str], list[tuple[str, str, dict[str, str], float, str]]] = defaultdict(list)
    # an evaluation run of a trained sentence model records the model as a run option; its training run (same job
    # hash) names the start model and the training mode, which are part of the evaluation's setting (an evaluation of
    # a supervised model is never pooled with those of unsupervised ones, nor across start models)
    trained = {r["config_hash"]: {k: json.loads(r["config"]).get(k) for k in ("backbone", "mode")}
               for r in reg.runs(status="finished", modality="text") if r["task"].startswith("simcse")}
    for r in reg.runs(status="finished"):
        if r["modality"] == "core" or r["task"].startswith(SKIP_TASKS) or not committed(r):
            continue
        fm = reg.final_metrics(r["id"])
        for mod, prefix, cands in HEADLINES:
            if r["modality"] != mod or not r["task"].startswith(prefix):
                continue
            hit = next(((m, s) for m, s in cands if (m, s) in fm), None)
            if hit is None:
                break
            label = f"{LABELS.get(hit[0], hit[0])} [{hit[0]}, {hit[1]}]"
            setting = _setting(r["config"])
            if r["task"].startswith("senteval"):
                setting.update({k: str(v) for k, v in trained.get(r["config_hash"], {}).items() if v})
            hits[(mod, r["task"], label)].append((r["dataset"], r["loss"], setting, _pct(fm[hit]),
                                                  r["started_at"], _setting(r["loss_hparams"]), r["seed"]))
            break
    keys = row_keys()
    return {key: _table(_newest(rows), keys, all_settings) for key, rows in hits.items()}


def _newest(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One run per (data set, loss, setting, hyper-parameters, seed): the newest. A setting run again (under newer
    code, by another suite) supersedes its older runs in every table; they stay in the registry."""
    latest: dict[str, tuple[Any, ...]] = {}
    for r in rows:
        ds, loss, setting, _, started, hp, seed = r
        key = json.dumps([ds, loss, setting, hp, seed], sort_keys=True, default=str)
        if key not in latest or str(started) > str(latest[key][4]):
            latest[key] = r
    return list(latest.values())


def _table(rows: list[tuple[Any, ...]], keys: frozenset[str] = frozenset(), all_settings: bool = True) -> Table:
    """Group one task's runs into cells by (data set, loss, row keys, setting). A key is a row key when the suites
    vary it on purpose (``keys``), else part of the setting, in both cases only when its value differs between
    runs of one data set (a key fixed per data set, e.g. the imbalance rule that names the column, is already
    told apart by the column). A loss hyper-parameter (rows may carry them as a sixth element) whose value
    differs between runs of one loss and data set is a row key of that loss's rows: runs with other
    hyper-parameters are never pooled as seeds. Without ``all_settings`` only the setting with the most runs (ties:
    the newest) is kept."""
    rows = [tuple(r) + (({},) * (6 - len(r))) + ((None,) if len(r) < 7 else ()) for r in rows]
    names = sorted({k for _, _, st, *_ in rows for k in st})
    per_ds: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    per_loss: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    hp_names = sorted({k for r in rows for k in r[5]})
    for ds, loss, st, _, _, hp, _ in rows:
        for k in names:
            per_ds[ds][k].add(st.get(k, "unset"))
        for k in hp_names:
            per_loss[(ds, loss)][k].add(hp.get(k, "unset"))
    varying = [k for k in names if any(len(v[k]) > 1 for v in per_ds.values())]
    hp_varying: dict[str, set[str]] = defaultdict(set)  # per loss: hyper-parameters that differ in one data set
    for (_, loss), vals in per_loss.items():
        hp_varying[loss] |= {k for k in hp_names if len(vals[k]) > 1}
    row_part = [k for k in varying if k in keys]
    set_part = [k for k in varying if k not in keys]
    sig = [tuple((k, st.get(k, "unset")) for k in set_part) for _, _, st, *_ in rows]
    rk = [", ".join(f"{k}={st.get(k, 'unset')}" for k in row_part) for _, _, st, *_ in rows]
    hk = [", ".join(f"{k}={hp.get(k, 'unset')}" for k in sorted(hp_varying[loss])) for _, loss, _, _, _, hp, _ in rows]
    counts = Counter(sig)
    hidden, latest = 0, ""
    if not all_settings and len(counts) > 1:
        # the setting with the most runs (a task's main grid, not a one-off check run after it); ties: the newest
        newest = max(range(len(rows)), key=lambda i: (counts[sig[i]], rows[i][4]))
        keep = [i for i in range(len(rows)) if sig[i] == sig[newest]]
        hidden = len(rows) - len(keep)
        latest = ", ".join(f"{k}={v}" for k, v in sig[newest])
        rows, sig, rk, hk = [rows[i] for i in keep], [sig[i] for i in keep], [rk[i] for i in keep], [hk[i] for i in keep]
        counts = Counter(sig)
    order = sorted(counts, key=lambda sg: (-counts[sg], sg))
    index = {sg: i for i, sg in enumerate(order, 1)}
    by_ds: dict[str, dict[str, Cell]] = defaultdict(dict)
    # one value per seed of a cell: the latest run (two suites running one setting with the same seed numbers, or a
    # re-run, are not independent seeds); runs without a seed each count
    latest_of: dict[tuple[str, str, Any], tuple[str, float]] = {}
    for i, ((ds, loss, _, v, started, _, seed), sg, key, hpk) in enumerate(zip(rows, sig, rk, hk)):
        both = ", ".join(x for x in (key, hpk) if x)
        name = loss + (f" [{both}]" if both else "") + (f" [s{index[sg]}]" if len(order) > 1 else "")
        by_ds[ds].setdefault(name, Cell([], loss, index[sg], key, name, hpk))
        slot = (ds, name, seed if seed is not None else ("run", i))
        if slot not in latest_of or str(started) >= latest_of[slot][0]:
            latest_of[slot] = (str(started), v)
    for (ds, name, _), (_, v) in latest_of.items():
        by_ds[ds][name].values.append(v)
    legend = [(counts[sg], ", ".join(f"{k}={v}" for k, v in sg)) for sg in order] if len(order) > 1 else []
    return Table(dict(by_ds), legend, latest, hidden)


def _fmt(c: Cell | None) -> str:
    return "–" if c is None else mean_std(c.values)


def _rows(by_ds: dict[str, dict[str, Cell]]) -> list[str]:
    cells = {name: c for d in by_ds.values() for name, c in d.items()}
    return sorted(cells, key=lambda n: (cells[n].loss, cells[n].rowkey, cells[n].setting))


def markdown_tables(table: dict[tuple[str, str, str], Table], pub: dict[tuple[str, str, str], float]) -> str:
    parts = []
    for (mod, task, label), t in sorted(table.items()):
        by_ds = t.by_ds
        datasets = sorted(by_ds)
        names = _rows(by_ds)
        best = {d: max(by_ds[d].values(), key=lambda c: c.mean) for d in datasets}
        rows = []
        for name in names:
            row = [name]
            for d in datasets:
                c = by_ds[d].get(name)
                s = _fmt(c)
                row.append(f"**{s}**" if c is best[d] and len(by_ds[d]) > 1 else s)
            rows.append(row)
        pub_rows = []
        for loss in sorted({c.loss for d in by_ds.values() for c in d.values()}):
            vals = [next((v for (tp, ds, l), v in pub.items() if task.startswith(tp) and ds.lower() == d.lower()
                          and l == loss), None) for d in datasets]
            if any(v is not None for v in vals):
                pub_rows.append([f"{loss} (published)"] + [f"{v:.2f}" if v is not None else "–" for v in vals])
        part = f"### {mod} / {task}: {label}\n\n" + markdown_table(["loss"] + datasets, rows + pub_rows)
        if t.settings:
            part += ("\nSettings (the config keys whose values differ between this task's runs of one data set; "
                     "cells never pool settings):\n\n" + "\n".join(f"- s{i} ({n} runs): {desc}"
                                                               for i, (n, desc) in enumerate(t.settings, 1)) + "\n")
        if t.hidden:
            part += (f"\nShown: the setting of this task with the most runs ({t.latest}); {t.hidden} runs of other settings "
                     f"are left out (`suite bench report --all-settings` shows them).\n")
        parts.append(part)
    return "\n".join(parts) if parts else "_No finished runs in the registry yet: run `suite bench run quick`._\n"


# ----------------------------------------------------------------------------- plots

def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def plots(reg: Registry, table: dict) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figs: list[tuple[str, str]] = []
    # 1. headline metric per loss per data set, error bars = std over seeds
    for (mod, task, label), t in sorted(table.items()):
        by_ds = t.by_ds
        datasets = sorted(by_ds)
        losses = _rows(by_ds)
        fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(datasets) * max(1, len(losses)) / 3), 3.2))
        w = 0.8 / max(1, len(losses))
        for i, loss in enumerate(losses):
            xs = [j + i * w for j, d in enumerate(datasets) if loss in by_ds[d]]
            ms = [by_ds[d][loss].mean for d in datasets if loss in by_ds[d]]
            ss = [by_ds[d][loss].err for d in datasets if loss in by_ds[d]]
            ax.bar(xs, ms, w, yerr=ss, capsize=2, label=loss)
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(datasets))], datasets, rotation=20)
        ax.set_ylabel(label.split(" [")[0])
        ax.set_title(f"{mod} / {task}")
        lo = min(c.mean - c.err for d in by_ds.values() for c in d.values())
        ax.set_ylim(max(0, lo - 5), None)
        ax.legend(fontsize=6, bbox_to_anchor=(1.01, 1.0), loc="upper left")  # beside the bars, never over them
        figs.append((f"{mod} / {task}: {label}", _png(fig)))
    # 2. loss x modality mean rank (losses ranked within each data set and setting)
    ranks: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (mod, _task, _), t in table.items():
        for cells in t.by_ds.values():
            for st in {c.setting for c in cells.values()}:
                order = sorted((c for c in cells.values() if c.setting == st), key=lambda c: -c.mean)
                if len(order) < 2:
                    continue  # a loss alone in its setting has no rank
                for r, c in enumerate(order, 1):
                    ranks[(c.loss, mod)].append(r)
    if ranks:
        losses = sorted({l for l, _ in ranks})
        mods = sorted({m for _, m in ranks})
        mat = np.full((len(losses), len(mods)), np.nan)
        for (l, m), rs in ranks.items():
            mat[losses.index(l), mods.index(m)] = statistics.fmean(rs)
        fig, ax = plt.subplots(figsize=(1.5 + 1.3 * len(mods), 0.9 + 0.35 * len(losses)))
        im = ax.imshow(mat, cmap="viridis_r", aspect="auto")
        ax.set_xticks(range(len(mods)), mods)
        ax.set_yticks(range(len(losses)), losses)
        for i in range(len(losses)):
            for j in range(len(mods)):
                if not math.isnan(mat[i, j]):
                    ax.text(j, i, f"{mat[i, j]:.1f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(im, ax=ax, label="mean rank (1 = best)")
        ax.set_title("loss x modality: mean rank over data sets")
        figs.append(("Loss x modality rank heat-map", _png(fig)))
    # 3-5. curves over training steps from the runs' train metrics
    for metric, title, only in (("loss", "Training loss", None), ("tau", "MACL temperature τ_a", "macl"),
                                ("cond_entropy", "CACR conditional entropy H(X⁻|X)", None)):
        series = _series(reg, metric, only)
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for name, (xs, ys) in sorted(series.items())[:16]:
            ax.plot(xs, ys, label=name, lw=1.2)
        ax.set_xlabel("step / epoch")
        ax.set_ylabel(metric)
        ax.set_title(title)
        ax.legend(fontsize=6, bbox_to_anchor=(1.01, 1.0), loc="upper left")
        figs.append((title, _png(fig)))
    # 6. loss forward+backward time
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for r in reg.runs(status="finished", task="loss-bench"):
        if json.loads(r["config"] or "{}").get("path", "dense") != "dense":  # the tiled timings: losses.md has them
            continue
        v = reg.final_metrics(r["id"]).get(("fwd_bwd_ms", "bench"))
        if v is not None:
            times[r["dataset"]][r["loss"]] = v
    if times:
        ds = sorted(times, key=lambda s: int("".join(ch for ch in s.split("-")[1] if ch.isdigit()) or 0))
        losses = sorted({l for d in times.values() for l in d})
        fig, ax = plt.subplots(figsize=(7, 3.2))
        w = 0.8 / len(ds)
        for i, d in enumerate(ds):
            ax.bar([j + i * w for j in range(len(losses))], [times[d].get(l, 0) for l in losses], w, label=d)
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(losses))], losses, rotation=30)
        ax.set_yscale("log")
        ax.set_ylabel("forward+backward ms")
        ax.set_title("Loss forward+backward time, dense path (CPU)")
        ax.legend(fontsize=7)
        figs.append(("Loss forward+backward time", _png(fig)))
    for mod in _sections():
        figs += [(title, _png(fig)) for title, fig in getattr(mod, "figures", lambda r: [])(reg)]
    return figs


def _series(reg: Registry, metric: str, only_loss: str | None) -> dict[str, tuple[list[int], list[float]]]:
    """Per (modality/task/dataset/loss), the metric over steps of the lowest-seed finished run."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    seen: dict[str, int] = {}
    for r in reg.runs(status="finished"):
        if only_loss and r["loss"] != only_loss:
            continue
        pts = sorted((m["step"], m["value"]) for m in reg.metrics(r["id"], name=metric)
                     if m["step"] is not None and m["split"] in ("train", None, "test"))
        if len(pts) < 2:
            continue
        key = f"{r['modality']}/{r['dataset']}/{r['loss']}"
        seed = r["seed"] if r["seed"] is not None else 0
        if key not in seen or seed < seen[key]:
            seen[key] = seed
            out[key] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def build(reg: Registry, out_dir: Path = RESULTS, all_settings: bool = False) -> tuple[Path, Path, str]:
    """``README.md`` and ``report.html`` from ``reg``: first the findings (every claim of the catalogue, judged once,
    benchmarks/catalogue.py, and their forest plot), then the task tables and the plots."""
    from benchmarks.catalogue import findings, findings_table, forest

    table = collect(reg, all_settings)
    pub = published()
    md_tables = markdown_tables(table, pub)
    judged = findings(reg)
    found_md = findings_table(judged)
    n_runs = len(reg.runs(status="finished"))
    held = sum(j.verdict is Verdict.CONFIRMED for _, j in judged)
    measured = sum(j.verdict not in (Verdict.NOT_MEASURED, Verdict.NOT_JUDGED) for _, j in judged)
    lead = (f"Of the {len(judged)} claims declared in `benchmarks/catalogue.py`, {measured} are measured here and "
            f"{held} hold up at this scale (confirmed); the rest are listed with the gap our seeds could have "
            f"detected, so that a \"not confirmed\" can be read.")
    evidence = "\n".join(f"- **{e.id}**: {j.evidence}" for e, j in judged)
    md = (f"# Cross-modality results (generated by `suite bench report` from the registry)\n\n"
          f"Registry: `{reg.source}`; {n_runs} finished runs.\n\n## Findings\n\n{lead}\n\n{found_md}\n"
          f"{RULE_TEXT}\n\n"
          f"## Tables\n\nCells: mean ± std over seeds (n = seeds) of each "
          f"task's headline metric over runs that differ only in seed; rows are losses, split by the keys the suites "
          f"vary (batch size, views, ...) where they differ. Each task shows its setting with the most runs (other "
          f"config differences are other settings, counted below the table); `--all-settings` shows every setting, "
          f"one row per loss and setting, listed below its table. Best per column in bold; published rows are the papers' numbers at full "
          f"scale (GPU, full data), ours are at this repository's CPU profiles, so gaps are expected.\n\n"
          f"{md_tables}\n## Evidence of each claim\n\n{evidence}\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / "README.md"
    md_path.write_text(md)
    figs = plots(reg, table)
    body = "".join(_figure_html(t, b) for t, b in figs)
    forest_png = _png(forest(judged))
    forest_alt = ("Forest plot: for each claim, our gap with its 95 % confidence interval (line) and the paper's gap "
                  "(red diamond); zero marked")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>contrastive-suite report</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<style>body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 8px}"
            "figure{display:inline-block;margin:8px;max-width:100%}img{max-width:100%;height:auto}"
            ".scroll{overflow-x:auto;max-width:100%}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style></head>"
            f"<body><h1>contrastive-suite: cross-modality report</h1><p>{n_runs} finished runs in the registry.</p>"
            f"<h2>Findings</h2><p>{html.escape(lead)}</p><div class=\"scroll\">{md_tables_to_html(found_md)}</div>"
            f"{_figure_html(forest_alt, forest_png)}<p>{html.escape(RULE_TEXT.replace('**', ''))}</p>"
            f"<h2>Tables</h2><div class=\"scroll\">{md_tables_to_html(md_tables)}</div><h2>Plots</h2>{body}"
            f"<h2>Evidence of each claim</h2><ul>"
            + "".join(f"<li><b>{html.escape(e.id)}</b>: {html.escape(j.evidence)}</li>" for e, j in judged)
            + "</ul></body></html>\n")
    html_path = out_dir / "report.html"
    html_path.write_text(page)
    return md_path, html_path, found_md + "\n" + md_tables


def _figure_html(title: str, png: str) -> str:
    alt = html.escape(title)
    return f"<figure><img alt=\"{alt}\" src=\"data:image/png;base64,{png}\"/><figcaption>{alt}</figcaption></figure>\n"


def md_tables_to_html(md: str) -> str:
    out, rows = [], []

    def flush() -> None:
        if rows:
            head, *body = rows
            out.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>" + "".join(
                "<tr>" + "".join(f"<td>{html.escape(c.replace('**', ''))}</td>" for c in r) + "</tr>" for r in body)
                + "</table>")
            rows.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
        else:
            flush()
            if line.startswith("### "):
                out.append(f"<h3>{html.escape(line[4:])}</h3>")
            elif line.strip():
                out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)


def check(reg: Registry, out_dir: Path = RESULTS) -> list[str]:
    """Rebuild every registry table and the report's Markdown from ``reg`` and compare them with the files in
    ``out_dir``; returns the names of the files that differ (or are missing)."""
    import difflib
    import importlib
    import tempfile

    rendered: dict[str, str] = {}
    for name, attr in TABLES:
        mod = importlib.import_module(name)
        rendered[Path(getattr(mod, attr)).name] = mod.table(reg)
    with tempfile.TemporaryDirectory() as tmp:
        md_path, _, _ = build(reg, Path(tmp))
        rendered["README.md"] = md_path.read_text()
    bad = []
    for fname, text in rendered.items():
        path = out_dir / fname
        have = path.read_text() if path.exists() else ""
        if have != text:
            bad.append(fname)
            diff = list(difflib.unified_diff(have.splitlines(), text.splitlines(), f"{path} (committed)",
                                             f"{fname} (rebuilt)", lineterm="", n=1))
            print("\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else ""))
    return bad


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="build benchmarks/results/README.md and report.html from the registry")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY), or a "
                                                    ".jsonl snapshot (suite results export --format jsonl)")
    p.add_argument("--out-dir", type=Path, default=RESULTS)
    p.add_argument("--all-settings", action="store_true",
                   help="every setting of each task (history), not only its setting with the most runs")
    p.add_argument("--check", action="store_true",
                   help=f"rebuild every table and README.md from the registry (default: the committed snapshot "
                        f"{SNAPSHOT.name}) and exit 1 if any differs from the file in --out-dir; writes nothing")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.check:
        import os

        bad = check(open_registry(args.registry or os.path.relpath(SNAPSHOT)), args.out_dir)
        print("every table rebuilds from the registry as committed" if not bad else
              f"{len(bad)} file(s) differ from a rebuild: {', '.join(bad)}")
        return 1 if bad else 0
    md, page, summary = build(open_registry(args.registry), args.out_dir, args.all_settings)
    print(summary)
    print(f"wrote {md}\nwrote {page}  (open it in a browser)")
    return 0
