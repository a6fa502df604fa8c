"""The report's figures as (caption, base64 PNG): each benchmark module's own pictures (``figures(registry)``, drawn
in its modality's section), and the pictures across modalities: the loss x modality rank heat-map, MACL's
temperature and CACR's conditional entropy over training, and the losses' forward+backward time; the forest plot of
every claim's verdict (:func:`forest`); and a suite's step curves (:func:`suite_curves`), where a suite file's
``report:`` asks for them. No figure has more than :data:`MAX_SERIES` series; every caption doubles as the image's
alt text."""
from __future__ import annotations

import base64
import contextlib
import contextvars
import importlib
import io
import json
import math
import statistics
from collections import defaultdict
from typing import Any, Iterator

from benchmarks.report.cells import Table
from benchmarks.tables import suite_runs
from benchmarks.tables.catalogue import Entry
from benchmarks.tables.claims import Judged, Verdict
from benchmarks.tables.findings import against_paper, family, shown
from suite.registry import Registry, step_curve
from suite.registry.queries import committed

MAX_SERIES = 8
DPI = 80
_pixels: contextvars.ContextVar[bool] = contextvars.ContextVar("report_pixels", default=True)


@contextlib.contextmanager
def without_pixels() -> Iterator[None]:
    """Within the block :func:`png` draws nothing and gives an empty image: for a check that compares the page's text
    (the pixels depend on the fonts installed), which then skips most of the page's build time."""
    token = _pixels.set(False)
    try:
        yield
    finally:
        _pixels.reset(token)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any) -> str:
    if not _pixels.get():
        _plt().close(fig)
        return ""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def module_figures(reg: Registry, modules: tuple[str, ...]) -> list[tuple[str, str]]:
    """The pictures of the benchmark modules ``modules`` (their ``figures(registry)``: (caption, figure))."""
    _plt()
    out = []
    for name in modules:
        out += [(title, png(fig)) for title, fig in getattr(importlib.import_module(name), "figures",
                                                            lambda r: [])(reg)]
    return out


def forest(judged: list[tuple[Entry, Judged]]) -> Any:
    """One line per measured claim on its own scale: the gap in units of its interval's half-width (so every 95 %
    interval spans [x - 1, x + 1]), the minimum effect ±m of the claim on the same scale (grey ticks: the interval
    beyond +m confirms, inside ±m is equivalent), the paper's gap (red diamond), zero marked. The label names the
    verdict after Holm's correction and the paper's-gap case. ``judged``: (entry, judged) pairs of the catalogue's
    claims (:func:`benchmarks.tables.findings.findings`)."""
    plt = _plt()
    adjusted = family(judged)
    drawn = [(e, j) for e, j in judged if j.summary is not None and j.summary.gap == j.summary.gap
             and j.summary.ci[0] == j.summary.ci[0]]
    fig, ax = plt.subplots(figsize=(9.0, 0.42 * len(drawn) + 1.4))
    colours = {Verdict.CONFIRMED: "tab:green", Verdict.CONTRADICTED: "tab:red", Verdict.EQUIVALENT: "tab:blue"}
    for i, (e, j) in enumerate(drawn):
        y = len(drawn) - 1 - i
        r = j.summary
        assert r is not None
        half = (r.ci[1] - r.ci[0]) / 2 or 1.0  # a zero-width interval (no spread): drawn in points
        v = shown(j, adjusted[e.id])
        c = colours.get(v, "tab:olive" if v.name.startswith("NOMINAL") else "tab:gray")
        ax.plot([r.ci[0] / half, r.ci[1] / half], [y, y], color=c, lw=2)
        ax.plot([r.gap / half], [y], "o", color=c, ms=5)
        ax.plot([-r.min_effect / half, r.min_effect / half], [y, y], "|", color="gray", ms=9)
        if e.paper_gap is not None:
            ax.plot([e.paper_gap / half], [y], "D", color="red", ms=5, mfc="none")
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_xscale("symlog", linthresh=10.0)
    labels = [f"{e.id}: {shown(j, adjusted[e.id])}"
              f"{'' if against_paper(e, j) in ('-', 'detectable') else ', ' + against_paper(e, j).split(' (')[0]}"
              for e, j in reversed(drawn)]
    ax.set_yticks(range(len(drawn)), labels, fontsize=7)
    ax.set_xlabel("gap in units of its 95 % interval's half-width: ours (dot, interval line), the paper's (red "
                  "diamond), "
                  "the minimum effect +-m (grey ticks)\ngreen confirmed, red contradicted, blue equivalent, olive "
                  "nominal (not after Holm)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def rank_heatmap(table: dict[tuple[str, str, str], Table]) -> list[tuple[str, str]]:
    """Mean rank of each loss per modality (losses ranked within each data set and setting of every task)."""
    import numpy as np

    ranks: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (mod, _task, _), t in table.items():
        for cells in t.by_ds.values():
            for st in {c.setting for c in cells.values()}:
                order = sorted((c for c in cells.values() if c.setting == st), key=lambda c: -c.mean)
                if len(order) < 2:
                    continue  # a loss alone in its setting has no rank
                for r, c in enumerate(order, 1):
                    ranks[(c.loss, mod)].append(r)
    if not ranks:
        return []
    plt = _plt()
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
    ax.set_title("loss x modality: mean rank over data sets and settings")
    return [("Loss x modality: mean rank of each loss over the data sets and settings of every task (1 = best)",
             png(fig))]


def trajectories(reg: Registry) -> list[tuple[str, str]]:
    """MACL's adaptive temperature and CACR's conditional entropy over training: the lowest-seed run of each
    (modality, data set), at most :data:`MAX_SERIES` series per plot."""
    plt = _plt()
    out = []
    for metric, loss, title, ylabel in (("tau", "macl", "MACL's temperature tau_a over training", "tau_a"),
                                        ("cond_entropy", "cacr", "CACR's conditional entropy H(X-|X) over training",
                                         "H(X-|X)")):
        series = _series(reg, metric, loss)
        if not series:
            continue
        shown = sorted(series.items())[:MAX_SERIES]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for name, (xs, ys) in shown:
            ax.plot(xs, ys, label=name, lw=1.2)
        ax.set_xlabel("step / epoch")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=6, bbox_to_anchor=(1.01, 1.0), loc="upper left")
        more = f" ({len(shown)} of {len(series)} series)" if len(series) > len(shown) else ""
        out.append((f"{title}: the lowest-seed run of each modality and data set{more}", png(fig)))
    return out


def _series(reg: Registry, metric: str, loss: str) -> dict[str, tuple[list[int], list[float]]]:
    """Per modality/data set, the metric over steps of the lowest-seed finished run of ``loss``."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    seen: dict[str, int] = {}
    for r in reg.runs(status="finished", loss=loss):
        if not committed(r):
            continue
        pts = sorted((m["step"], m["value"]) for m in reg.metrics(r["id"], name=metric)
                     if m["step"] is not None and m["split"] in ("train", None, "test"))
        if len(pts) < 2:
            continue
        key = f"{r['modality']}/{r['dataset']}"
        seed = r["seed"] if r["seed"] is not None else 0
        if key not in seen or seed < seen[key]:
            seen[key] = seed
            out[key] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def loss_time(reg: Registry) -> list[tuple[str, str]]:
    """Forward+backward time of every loss on its dense path, one series per batch size (losses.md has the rest)."""
    times: dict[str, dict[str, float]] = defaultdict(dict)
    for r in reg.runs(status="finished", task="loss-bench"):
        if not committed(r) or json.loads(r["config"] or "{}").get("path", "dense") != "dense" or r["loss"] == "floor":
            continue
        v = reg.final_metrics(r["id"]).get(("fwd_bwd_ms", "bench"))
        if v is not None:
            times[r["dataset"]][r["loss"]] = v
    if not times:
        return []
    plt = _plt()
    ds = sorted(times, key=lambda s: int("".join(ch for ch in s.split("-")[1] if ch.isdigit()) or 0))[:MAX_SERIES]
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
    return [("Forward+backward time of every loss on its dense path (CPU, log scale), per batch size", png(fig))]


def suite_curves(reg: Registry, suite: str, metric: str, modality: str) -> tuple[str, Any] | None:
    """The step curves of ``metric`` (split ``train-step``) of the suite's runs of ``modality``, as (caption, figure):
    one series per setting (a job's arguments less its seed), the mean over its seeds at each step and a band from the
    lowest to the highest seed's value (min-max); each job's newest finished run with a curve counts. At most
    :data:`MAX_SERIES` settings (in the suite's order), the caption saying how many were left out; None when no run
    of the suite and modality logged the curve."""
    jrs = [jr for jr in suite_runs(reg, suite) if any(r.row["modality"] == modality for r in jr.runs)]
    logged = reg.metrics_for([r.row["id"] for jr in jrs for r in jr.runs if r.row["modality"] == modality])
    settings: dict[tuple[Any, ...], list[dict[int, float]]] = {}
    args_of: dict[tuple[Any, ...], dict[str, Any]] = {}
    for jr in jrs:
        curves = [c for c in (step_curve(logged[r.row["id"]], metric) for r in jr.runs if r.row["id"] in logged) if c]
        if not curves:
            continue
        key = (jr.job.frontend, jr.job.command, jr.job.args)
        settings.setdefault(key, []).append(dict(curves[-1]))
        args_of[key] = {"command": f"{jr.job.frontend} {jr.job.command}", **dict(jr.job.args)}
    if not settings:
        return None
    varying = [k for k in dict.fromkeys(k for a in args_of.values() for k in a)
               if len({repr(a.get(k)) for a in args_of.values()}) > 1]
    shown = list(settings)[:MAX_SERIES]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for key in shown:
        seeds = settings[key]
        steps = sorted({s for c in seeds for s in c})
        at = [[c[s] for c in seeds if s in c] for s in steps]
        label = ", ".join(f"{k}={args_of[key].get(k)}" for k in varying) or args_of[key]["command"]
        (line,) = ax.plot(steps, [statistics.fmean(v) for v in at], lw=1.2, label=f"{label} (n={len(seeds)})")
        ax.fill_between(steps, [min(v) for v in at], [max(v) for v in at], color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("optimiser step", fontsize=9)
    ax.set_ylabel(metric, fontsize=9)
    ax.legend(fontsize=6, bbox_to_anchor=(1.01, 1.0), loc="upper left")
    more = f"; {len(settings) - len(shown)} more settings left out" if len(settings) > len(shown) else ""
    caption = (f"{metric} over training (step curves, every log_every steps) of suite `{suite}`, {modality}: the mean "
               f"over seeds and a min-max band, one series per setting ({len(shown)} of {len(settings)}{more})")
    return caption, fig
