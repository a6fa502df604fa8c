"""Loss benchmark: forward+backward time and peak tensor memory of every loss.

2N in {256, 1024, 4096} embeddings, d = 128 (multi-view losses: V = 5 views of N samples),
float32 on CPU, median over repeats. Each loss's time is reported as a ratio to ``infonce`` at the
same N (multi-view losses also to ``cmc``), and ``infonce`` as a ratio to the floor every
implementation pays: the bare similarity product ``e @ e.T`` of the 2N normalised embeddings,
forward and backward. Where ``pytorch-metric-learning`` is installed, ``infonce`` is checked against
its ``NTXentLoss`` for equal values (timed only at N <= 128: its cost grows cubically).

Run: ``suite bench losses`` (or ``python -m benchmarks.measurements.losses``; the suite ``benchmarks/suites/losses.yaml``
runs both). Every number is recorded as a registry row first (modality "core"; task "loss-bench": per loss, path
and 2N the median time, peak and per-round ratio to infonce; "loss-bench-pml": the pytorch-metric-learning check;
``--large``: :data:`LARGE_TASKS`), then ``benchmarks/results/losses.md`` (:func:`table`) and ``losses_large.md``
(:func:`table_large`) are rendered from the registry alone: the newest committed run per cell.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import suite.losses as L
from benchmarks.measurements.measured import Measurement, latest, one, record, versions_line
from suite.memory import PeakTensorMemory
from suite.registry import Registry, markdown_table

RESULTS = Path(__file__).resolve().parents[1] / "results" / "losses.md"
OUT = RESULTS  # the file :func:`table` renders (benchmarks/report.py: TABLES)
RESULTS_LARGE = RESULTS.with_name("losses_large.md")  # :func:`table_large` (module benchmarks.measurements.losses_large)
PML_N = 128
D = 128
V = 5


def _inputs(name: str, n: int, gen: torch.Generator, chunk_size: int | str | None = None
            ) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
    loss = L.build(name, chunk_size=chunk_size)
    cls = type(loss)
    if cls.multi_view:
        views = torch.randn(V, n, D, generator=gen).requires_grad_()
        return (lambda: loss(views)), [views]
    a = torch.randn(n, D, generator=gen).requires_grad_()
    b = torch.randn(n, D, generator=gen).requires_grad_()
    extra: dict[str, Any] = {}
    labels = torch.randint(0, 10, (n,), generator=gen)
    if "labels" in cls.requires:
        extra["labels"] = labels
    if "similarity" in cls.requires:
        cg = torch.rand(10, 10, generator=gen)
        cg = (cg + cg.T) / 2
        cg.fill_diagonal_(1.0)
        if chunk_size is None:
            extra["similarity"] = cg[labels][:, labels]
        else:  # the graph as embeddings: never (N, N) (class graph ~ one-hot class embeddings, G = E E^T)
            extra["similarity_embeddings"] = torch.nn.functional.one_hot(labels, 10).float() + 0.3
    return (lambda: loss(a, b, **extra)), [a, b]


# Why these losses cannot reach 1.5x InfoNCE's faster path (issue 15 asks the table to say so by counts).
OPERATION_COUNTS = {
    "hard_negative": "two log-sum-exps per row (of beta s / t and (1 + beta) s / t) whose gradients enter "
                     "non-uniformly (through log N_g and the debiasing term), so each takes 4 products (logits, "
                     "anchors' gradient, and the candidates' recomputed) and 2 exp passes: 8 products against 3",
    "macl": "the reweighting V_i makes the per-row gradient non-uniform, so the candidates' gradient recomputes the "
            "tile: 4 products and 2 exp passes against 3 and 1, plus the softplus and reweighting per row",
    "tsimclr": "the same 3 products as InfoNCE, but about 12 elementwise passes over each tile (squared distance "
               "and clamp, the log1p kernel, its exp, its derivative, the masks, row and column sums) against "
               "InfoNCE's 4 (max, exp, sum, scale); at d = 128 these memory-bound passes, not the products, set "
               "the time",
    "xclr": "InfoNCE's log-sum-exp plus the target term: the targets' exp pass over an (N, M) block, done twice "
            "(forward, and again for the candidates' gradient), and two (N, M) x d products",
    "infonce": "at 2N = 256 the bare product takes well under a millisecond and fixed per-call costs (normalising, "
               "indexing the positives) dominate",
}


def _tiles(name: str, n: int) -> int:
    """Rows per tile of the tiled timings: about 2^22 entries per tile, at least 4 tiles."""
    from suite.losses.tiling import AUTO_TILE_ELEMENTS

    rows = (V if L.loss_class(name).multi_view else 2) * n
    return max(1, min(AUTO_TILE_ELEMENTS // rows, rows // 4))


def _floor_inputs(n: int, gen: torch.Generator) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
    e = F.normalize(torch.randn(2 * n, D, generator=gen), dim=1).requires_grad_()
    return (lambda: (e @ e.T).sum()), [e]


def _step(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> float:
    for t in leaves:
        t.grad = None
    t0 = time.perf_counter()
    fn().backward()
    return time.perf_counter() - t0


def _time(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor], repeats: int) -> float:
    _step(fn, leaves)  # warm-up
    return statistics.median(_step(fn, leaves) for _ in range(repeats))


def time_interleaved(cases: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]], repeats: int
                      ) -> tuple[dict[str, float], dict[str, float]]:
    """Round-robin timing: every round times each case once, so load changes on a shared machine
    hit all cases alike. Returns median times and, per case, the median over rounds of its time
    divided by infonce's time in the same round."""
    for fn, leaves in cases.values():
        _step(fn, leaves)  # warm-up
    rounds: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for k, (fn, leaves) in cases.items():
            rounds[k].append(_step(fn, leaves))
    ref = rounds.get("infonce")
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = {k: statistics.median(a / b for a, b in zip(v, ref)) if ref else float("nan") for k, v in rounds.items()}
    return med, ratio


def peak_memory(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> int:
    for t in leaves:
        t.grad = None
    with PeakTensorMemory() as m:
        fn().backward()
    return m.peak


def check_pml(gen: torch.Generator) -> dict[str, float] | None:
    try:
        from pytorch_metric_learning.losses import NTXentLoss
    except ImportError:
        return None
    n = PML_N
    a, b = torch.randn(n, D, generator=gen), torch.randn(n, D, generator=gen)
    ours = float(L.build("infonce", temperature=0.1)(a, b))
    emb = torch.cat([a, b])
    lab = torch.arange(n).repeat(2)
    pml = NTXentLoss(temperature=0.1)
    theirs = float(pml(emb, lab))
    a.requires_grad_(), b.requires_grad_()
    t_pml = _time(lambda: pml(torch.cat([a, b]), lab), [a, b], 5)
    t_ours = _time(lambda: L.build("infonce")(a, b), [a, b], 5)
    return {"ours": ours, "pml": theirs, "abs_diff": abs(ours - theirs), "t_pml_ms": 1e3 * t_pml, "t_ours_ms": 1e3 * t_ours}


def run(sizes: tuple[int, ...] = (256, 1024, 4096), repeats: int = 0, losses: list[str] | None = None,
        registry: Registry | None = None, out: Path = RESULTS, seed: int = 0) -> str:
    """Time and measure every loss at ``sizes``, record every number in ``registry`` (None: a temporary one, for a
    try-out's table), then write :func:`table` of it to ``out``."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    names = losses or L.available()
    threads = torch.get_num_threads()
    taken: list[Measurement] = []
    for two_n in sizes:
        n = two_n // 2
        reps = repeats or (21 if two_n <= 256 else 9 if two_n <= 1024 else 5)
        cases = {"floor": _floor_inputs(n, gen), **{name: _inputs(name, n, gen) for name in names},
                 **{f"{name}@tiled": _inputs(name, n, gen, _tiles(name, n)) for name in names}}
        med, ratio = time_interleaved(cases, reps)
        for k, (fn, leaves) in cases.items():
            mem = peak_memory(fn, leaves) if "@" not in k else 0
            print(f"  2N={two_n:5d} {k:20s} {1e3 * med[k]:9.2f} ms  {ratio[k]:5.2f}x infonce", flush=True)
            name, _, path = k.partition("@")
            multi = name != "floor" and L.loss_class(name).multi_view
            metrics = {"fwd_bwd_ms": 1e3 * med[k], **({"peak_mib": mem / 2**20} if not path else {}),
                       **({"ratio_infonce": ratio[k]} if math.isfinite(ratio[k]) else {})}
            taken.append(Measurement(
                "loss-bench", f"random-2N{two_n}-d{D}", name,
                {"two_n": two_n, "d": D, "views": V if multi else 2, "threads": threads, "path": path or "dense",
                 "repeats": reps}, metrics, "fwd_bwd_ms", loss_hparams=L.defaults(name) if name != "floor" else {},
                seed=seed))
    pml = check_pml(gen)
    if pml:
        taken.append(Measurement("loss-bench-pml", f"random-N{PML_N}-d{D}", "infonce",
                                 {"n": PML_N, "d": D, "temperature": 0.1, "threads": threads, "repeats": 5}, pml,
                                 "abs_diff", loss_hparams={**L.defaults("infonce"), "temperature": 0.1}, seed=seed))
    return _record_and_write(taken, registry, out, table)


def _record_and_write(taken: list[Measurement], registry: Registry | None, out: Path,
                      render: Callable[..., str]) -> str:
    """Record every measurement (after all are taken: recording seeds the global generator), then render the table
    from the registry and write it; without a registry, from a temporary one holding only these rows."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        reg = registry if registry is not None else Registry(str(Path(tmp) / "registry.sqlite"))
        for m in taken:
            record(reg, m)
        text = render(reg, allow_dirty=registry is None)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(registry: Registry, allow_dirty: bool = False) -> str:
    """``losses.md`` from the registry alone: the newest committed ``loss-bench`` run per (loss, path, 2N) and the
    newest ``loss-bench-pml`` check. Every number shown is a recorded metric (times, peaks, per-round ratios to
    infonce); the verdicts are computed here from them."""
    cells = latest(registry, "loss-bench", lambda m: (m.row["loss"], m.config.get("path", "dense"),
                                                      m.config.get("two_n")), allow_dirty)
    pmls = latest(registry, "loss-bench-pml", lambda m: "pml", allow_dirty)
    head = "# Loss benchmark (generated by `suite bench losses`)"
    if not cells:
        return f"{head}\n\nNo committed `loss-bench` runs in the registry yet: `suite bench run losses` records them.\n"
    sizes = sorted({s for _, _, s in cells})
    names = sorted({name for name, _, _ in cells} - {"floor"})

    def get(name: str, path: str, two_n: int, metric: str) -> float | None:
        m = cells.get((name, path, two_n))
        return None if m is None else m.metrics.get(metric)

    def multi(name: str) -> bool:
        return any(m.config.get("views", 2) > 2 for (l, _, _), m in cells.items() if l == name)

    def best(name: str, two_n: int) -> tuple[float, str] | None:  # the faster path's ratio to dense infonce, and its name
        d, t = get(name, "dense", two_n, "ratio_infonce"), get(name, "tiled", two_n, "ratio_infonce")
        if d is None or t is None:
            return None if d is None and t is None else ((d, "dense") if t is None else (t, "tiled"))  # type: ignore[return-value]
        return (d, "dense") if d <= t else (t, "tiled")

    rows = []
    verdicts: list[bool] = []
    judged = []
    for name in names:
        for two_n in sizes:
            t = get(name, "dense", two_n, "fwd_bwd_ms")
            if t is None and get(name, "tiled", two_n, "fwd_bwd_ms") is None:
                continue
            ratio = get(name, "dense", two_n, "ratio_infonce")  # median over rounds of t / t_infonce (same round)
            ref = "cmc" if multi(name) else "infonce"
            b, rb = best(name, two_n), best(ref, two_n)
            ok: bool | None = None
            note = "-"
            if name == "infonce":
                fr = get("floor", "dense", two_n, "ratio_infonce")
                if fr:
                    ok, note = 1.0 / fr <= 2.0, f"{1.0 / fr:.2f}x floor"
            elif name == "cmc":
                ok, note = True, "(multi-view reference)"
            elif b is not None and rb is not None:
                target_ratio = b[0] / rb[0]  # each at its faster path
                ok, note = target_ratio <= 1.5, f"{target_ratio:.2f}x {ref}"
            mem = get(name, "dense", two_n, "peak_mib")
            rows.append([name, "V=5" if multi(name) else "V=2", two_n, _fmt(t, ".2f"),
                         _fmt(get(name, "tiled", two_n, "fwd_bwd_ms"), ".2f"), _fmt(ratio, ".2f"),
                         b[1] if b else "-", note, "-" if ok is None else "yes" if ok else "**no**", _fmt(mem, ".1f")])
            if ok is not None:
                verdicts.append(ok)
                judged.append(rows[-1])
    floor_rows = [["bare e@e.T (floor)", "-", s, _fmt(get("floor", "dense", s, "fwd_bwd_ms"), ".2f"), "-", "-", "-",
                   "-", "-", _fmt(get("floor", "dense", s, "peak_mib"), ".1f")]
                  for s in sizes if ("floor", "dense", s) in cells]
    md = markdown_table(["loss", "views", "2N", "dense ms (median)", "tiled ms", "dense x infonce dense",
                         "faster path", "target measure (faster paths)", "target met", "dense peak tensor MiB"],
                        floor_rows + rows)
    mem_note = _memory_scaling({(name, s): get(name, "dense", s, "peak_mib") for name in names for s in sizes},
                               names, tuple(sizes))
    runs = list(cells.values()) + list(pmls.values())
    views = one(m.config.get("views") for m in cells.values() if m.config.get("views", 2) > 2) or str(V)
    lines = [
        head,
        "",
        f"CPU float32, d = {one(m.config.get('d') for m in cells.values())}, multi-view losses V = {views} views of "
        f"N = 2N/2 samples; median of repeated "
        f"forward+backward passes, timed round-robin (each round times every loss once; ratios are medians of "
        f"per-round ratios, so machine load hits all losses alike); peak = live tensor memory during forward+backward (suite.memory). "
        f"Torch threads: {one(m.config.get('threads') for m in cells.values())}. Every loss on its dense path (`chunk_size=None`) and its tiled "
        f"path (tiles of about 2^22 entries and at most a quarter of the rows, so small batches are tiled too; "
        f"`losses_large.md` has the tiled path at large batches and the default `\"auto\"` rule). Targets: every "
        f"two-view loss within 1.5x of `infonce` and multi-view losses within 1.5x of `cmc` at the same V, each "
        f"on its faster path; `infonce` (dense) within 2x of the bare similarity product.",
        "",
        versions_line(runs),
        "",
        md,
        mem_note,
    ]
    if pmls:
        p = pmls["pml"].metrics
        n = pmls["pml"].config.get("n")
        lines += ["", f"`infonce` vs pytorch-metric-learning `NTXentLoss` (N = {n}, tau = 0.1): ours {p['ours']:.6f}, "
                      f"theirs {p['pml']:.6f}, |diff| = {p['abs_diff']:.2e}; fwd+bwd {p['t_ours_ms']:.2f} ms vs "
                      f"{p['t_pml_ms']:.2f} ms."]
    misses = [r for r, ok in zip(judged, verdicts) if not ok]
    lines += ["", f"Targets met: {sum(verdicts)}/{len(verdicts)}." + (
        " Missed: " + "; ".join(f"{r[0]} at 2N={r[2]} ({r[7]})" for r in misses) + "." if misses else "")]
    why = [f"- `{name}`: {OPERATION_COUNTS[name]}" for name in dict.fromkeys(r[0] for r in misses) if name in OPERATION_COUNTS]
    if why:
        lines += ["", "Why a miss is not closed, by operation counts per tile of the (anchors x candidates) similarities "
                      "(InfoNCE on its tiled path: 3 matrix products, one exp per pair; at d = 128 a product costs "
                      "about 128 multiply-adds per pair):", "", *why]
    return "\n".join(lines) + "\n"


def _memory_scaling(peak: dict[tuple[str, int], float | None], names: list[str], sizes: tuple[int, ...]) -> str:
    """Fit the exponent of peak memory (MiB, None: not measured) in N between the two largest sizes (2 = O(N^2))."""
    if len(sizes) < 2:
        return ""
    s0, s1 = sizes[-2], sizes[-1]
    parts = []
    for name in names:
        m0, m1 = peak.get((name, s0)), peak.get((name, s1))
        if m0 and m1:
            parts.append(f"{name} {math.log(m1 / m0) / math.log(s1 / s0):.2f}")
    return f"\nPeak-memory growth exponent in N between 2N = {s0} and {s1} (2.0 = O(N^2)): " + ", ".join(parts) + "."


# ----------------------------------------------------------------------------- --large: the tiled path

_RSS_SCRIPT = r"""
import json, resource, sys, torch
torch.set_num_threads(int(sys.argv[4]))
from benchmarks.measurements.losses import _inputs
name, n, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
chunk = None if chunk == "none" else ("auto" if chunk == "auto" else int(chunk))
fn, leaves = _inputs(name, n, torch.Generator().manual_seed(0), chunk)
from suite.memory import peak_rss, reset_peak_rss
before = reset_peak_rss()
import time
t0 = time.perf_counter()
fn().backward()
dt = time.perf_counter() - t0
out = {"rss_growth_mib": peak_rss() - before, "s": dt, "s_warm": dt}
if len(sys.argv) > 5 and sys.argv[5] == "warm":  # a second call: the time without first-call costs
    for t in leaves:
        t.grad = None
    t0 = time.perf_counter()
    fn().backward()
    out["s_warm"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def _rss_growth(name: str, n: int, chunk: int | str | None, threads: int, warm: bool = False) -> dict[str, float]:
    """Peak RSS growth (MiB) and time of one forward+backward in a fresh process (``warm``: also the time of a
    second call, ``s_warm``)."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, name, str(n), str(chunk), str(threads)] + (["warm"] if warm else []),
                         capture_output=True, text=True, env=env, cwd=root)
    if out.returncode != 0:
        return {"rss_growth_mib": float("nan"), "s": float("nan"), "s_warm": float("nan"),
                "error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _interleaved_ratio(cases: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]], repeats: int
                       ) -> tuple[dict[str, float], float]:
    """Median times of two cases timed in alternating rounds, and the median over rounds of second / first."""
    (k0, c0), (k1, c1) = cases.items()
    for fn, leaves in (c0, c1):
        _step(fn, leaves)
    r: dict[str, list[float]] = {k0: [], k1: []}
    for _ in range(repeats):
        r[k0].append(_step(*c0))
        r[k1].append(_step(*c1))
    return {k: statistics.median(v) for k, v in r.items()}, statistics.median(b / a for a, b in zip(r[k0], r[k1]))


def _samples(name: str, two_n: int) -> tuple[int, int]:
    """(N samples, similarity entries) of a measurement at 2N = ``two_n`` (multi-view: V views, N <= 8192)."""
    if L.loss_class(name).multi_view:
        n = min(two_n // 2, 8192)
        return n, (V * n) ** 2
    return two_n // 2, two_n ** 2


LARGE_TASKS = {"speed": "loss-bench-tiled", "auto": "loss-bench-auto", "rss": "loss-bench-rss"}


def run_large(sizes: tuple[int, ...] = (4096, 16384), losses: list[str] | None = None, repeats: int = 5,
              out: Path = RESULTS_LARGE, auto_sizes: tuple[int, ...] = (2048, 4096, 8192),
              huge: tuple[str, ...] = (), huge_size: int = 65536, registry: Registry | None = None) -> str:
    """The tiled path (``chunk_size``): speed against the dense path at 2N = sizes[0] (interleaved rounds,
    median ratio), the ``"auto"`` rule against dense at ``auto_sizes``, peak RSS growth per loss in fresh
    processes at ``sizes`` (and ``huge_size`` for the losses in ``huge``; ``("all",)``: every loss), and the
    time per similarity entry as 2N grows, from the same processes. Every cell is recorded in ``registry`` (tasks
    :data:`LARGE_TASKS`; None: a temporary one), then :func:`table_large` of it is written to ``out``."""
    from suite.losses.tiling import AUTO_DENSE_ELEMENTS, AUTO_TILE_ELEMENTS

    threads = torch.get_num_threads()
    names = losses or L.available()
    huge = tuple(names) if "all" in huge else huge
    gen = torch.Generator().manual_seed(0)
    base = sizes[0]
    taken: list[Measurement] = []

    def setting(name: str, two_n: int, n: int, **more: Any) -> dict[str, Any]:
        return {"two_n": two_n, "n": n, "d": D, "views": V if L.loss_class(name).multi_view else 2,
                "threads": threads, **more}

    # 1. speed against dense at the base size (same process, interleaved)
    for name in names:
        n, entries = _samples(name, base)
        chunk = max(1, AUTO_TILE_ELEMENTS // math.isqrt(entries))
        med, ratio = _interleaved_ratio({"dense": _inputs(name, n, gen), "tiled": _inputs(name, n, gen, chunk)}, repeats)
        taken.append(Measurement(LARGE_TASKS["speed"], f"random-2N{base}-d{D}", name,
                                 setting(name, base, n, chunk_size=chunk, repeats=repeats),
                                 {"dense_ms": 1e3 * med["dense"], "tiled_ms": 1e3 * med["tiled"], "tiled_over_dense": ratio},
                                 "tiled_over_dense", loss_hparams=L.defaults(name)))
        print(f"  speed {name:14s} tiled/dense {ratio:.2f}", flush=True)
    # 2. the "auto" rule against dense (the default must never be more than 10 % slower)
    for name in names:
        for two_n in auto_sizes:
            n, entries = _samples(name, two_n)
            cfg = setting(name, two_n, n, entries=entries, auto_dense_limit=AUTO_DENSE_ELEMENTS)
            if entries <= AUTO_DENSE_ELEMENTS:  # auto is the dense path: the ratio is 1 by construction, not timed
                taken.append(Measurement(LARGE_TASKS["auto"], f"random-2N{two_n}-d{D}", name, cfg,
                                         {"auto_is_dense": 1.0}, "auto_is_dense", loss_hparams=L.defaults(name)))
                continue
            reps = max(3, repeats // 2)
            med, ratio = _interleaved_ratio({"dense": _inputs(name, n, gen), "auto": _inputs(name, n, gen, "auto")}, reps)
            taken.append(Measurement(LARGE_TASKS["auto"], f"random-2N{two_n}-d{D}", name, {**cfg, "repeats": reps},
                                     {"auto_is_dense": 0.0, "dense_ms": 1e3 * med["dense"], "auto_ms": 1e3 * med["auto"],
                                      "auto_over_dense": ratio}, "auto_over_dense", loss_hparams=L.defaults(name)))
            print(f"  auto  {name:14s} 2N={two_n} auto/dense {ratio:.2f}", flush=True)
    # 3. peak RSS growth and time in fresh processes
    all_sizes = tuple(sizes) + ((huge_size,) if huge else ())
    for name in names:
        last: tuple[int, int, dict[str, float]] | None = None  # (2N, N, metrics) of the last measurement
        for two_n in all_sizes:
            if two_n == huge_size and name not in huge:
                continue  # not run
            n, entries = _samples(name, two_n)
            chunk = max(1, AUTO_TILE_ELEMENTS // math.isqrt(entries))
            cfg = setting(name, two_n, n, entries=entries, chunk_size=chunk, warm=two_n <= 16384)
            if last is not None and last[1] == n:  # a multi-view loss at its N cap: the same measurement, said so
                taken.append(Measurement(LARGE_TASKS["rss"], f"random-2N{two_n}-d{D}", name,
                                         {**cfg, "warm": last[0] <= 16384, "measured_at_two_n": last[0]}, last[2],
                                         "rss_growth_mib", loss_hparams=L.defaults(name)))
                continue
            res = _rss_growth(name, n, chunk, threads, warm=two_n <= 16384)
            print(f"  memory {name:14s} 2N={two_n:6d} {res}", flush=True)
            metrics = ({"ok": 0.0} if "error" in res else
                       {"ok": 1.0, **{k: float(res[k]) for k in ("rss_growth_mib", "s", "s_warm")}})
            taken.append(Measurement(LARGE_TASKS["rss"], f"random-2N{two_n}-d{D}", name, cfg, metrics,
                                     "rss_growth_mib" if "error" not in res else "ok", loss_hparams=L.defaults(name)))
            last = (two_n, n, metrics)
    return _record_and_write(taken, registry, out, table_large)


def table_large(registry: Registry, allow_dirty: bool = False) -> str:
    """``losses_large.md`` from the registry alone: the newest committed run per cell of :data:`LARGE_TASKS`
    (speed: per loss; auto and peak RSS: per loss and 2N). Verdicts, the memory exponent and the time per
    similarity entry are computed here from the recorded metrics."""
    def key(m: Any) -> tuple[str, int]:
        return m.row["loss"], m.config.get("two_n")

    speed, auto, rss = (latest(registry, LARGE_TASKS[k], key, allow_dirty) for k in ("speed", "auto", "rss"))
    runs = [*speed.values(), *auto.values(), *rss.values()]
    lines = ["# Tiled (memory-bounded) losses (generated by `suite bench losses --large`)", ""]
    if not runs:
        return "\n".join(lines + ["No committed tiled-path runs in the registry yet: `suite bench run losses` records "
                                   "them.", ""])
    lines += [f"CPU float32, d = {one(m.config.get('d') for m in runs)}, torch threads "
              f"{one(m.config.get('threads') for m in runs)}, one measuring process (on the shared 2-core machine "
              f"another single-threaded job may use the second core); multi-view losses "
              f"V = {V} views of N samples, two-view losses 2N embeddings. Tiles: `chunk_size` = rows per tile such "
              f"that a tile holds about 2^22 entries (what `\"auto\"` uses above its dense limit of 2^24 entries). "
              f"X-CLR's tiled rows get its graph as `similarity_embeddings` (never N x N), the dense rows the "
              f"(N, N) graph. Ratios are medians over rounds that time both paths back to back.", "",
              versions_line(runs), ""]
    # 1. speed against dense
    rows = []
    for (name, two_n), m in sorted(speed.items()):
        ratio = m.metrics["tiled_over_dense"]
        rows.append([name, two_n, m.config.get("chunk_size"), f"{m.metrics['dense_ms']:.1f}", f"{m.metrics['tiled_ms']:.1f}",
                     f"{ratio:.2f}", "yes" if ratio <= 1.3 else "**no**"])
    if rows:
        lines += [f"## Speed at 2N = {one(s for _, s in speed)}: tiled against dense (target <= 1.3x)", "",
                  markdown_table(["loss", "2N", "rows per tile", "dense ms", "tiled ms", "tiled / dense", "target met"],
                                 rows), ""]
    # 2. the "auto" rule against dense
    if auto:
        cols = sorted({s for _, s in auto})
        measured = [m.metrics["auto_over_dense"] for m in auto.values() if "auto_over_dense" in m.metrics]
        worst = max([0.0, *measured])

        def auto_cell(m: Any) -> str:
            if m is None:
                return "not run"
            if m.metrics.get("auto_is_dense") == 1.0:
                return "1.00 (dense)"
            return f"{m.metrics['auto_over_dense']:.2f}"

        arows = [[name] + [auto_cell(auto.get((name, s))) for s in cols] for name in sorted({l for l, _ in auto})]
        lines += ['## `chunk_size="auto"` (the default) against dense (target: never more than 1.10x)', "",
                  f"Auto is the dense path up to 2^24 similarity entries (then the ratio is 1 by construction) and tiles "
                  f"above. Worst ratio measured: {worst:.2f} ({'target met' if worst <= 1.10 else '**target missed**'}).", "",
                  markdown_table(["loss"] + [f"2N={s}" for s in cols], arows), ""]
    # 3. peak RSS growth and time per entry
    if rss:
        cols = sorted({s for _, s in rss})
        mrows, trows = [], []
        for name in sorted({l for l, _ in rss}):
            cells = [rss.get((name, s)) for s in cols]
            ok = [m for m in cells if m is not None and m.metrics.get("ok") == 1.0]
            multi = any(m.config.get("views", 2) > 2 for m in cells if m is not None)

            def show(m: Any, value: str) -> str:
                return "not run" if m is None else "failed" if m.metrics.get("ok") != 1.0 else value

            e, top, spread = float("nan"), float("nan"), float("nan")
            if ok:
                (n0, m0), (n1, m1) = [(m.config["n"], m.metrics["rss_growth_mib"]) for m in (ok[0], ok[-1])]
                if m0 > 0 and m1 > 0 and n1 != n0:
                    e = math.log(m1 / m0) / math.log(n1 / n0)
                top = max(m.metrics["rss_growth_mib"] for m in ok)
                per = [m.metrics["s_warm"] / m.config["entries"] * 1e9 for m in ok]
                spread = max(per) / min(per)
            mrows.append([name, f"V={V}" if multi else "V=2"] +
                         [show(m, f"{m.metrics['rss_growth_mib']:.0f}" if m else "") for m in cells] +
                         [f"{e:.2f}", "yes" if top <= 512 and e <= 1.1 else "**no**"])
            trows.append([name] + [show(m, f"{m.metrics['s_warm'] / m.config['entries'] * 1e9:.2f}"
                                         if m and m.metrics.get("ok") == 1.0 else "") for m in cells] +
                         [f"{spread:.2f}", "yes" if spread <= 1.5 else "**no**"])
        head = [f"2N={s}" for s in cols]
        lines += ["## Peak RSS growth (MiB) of one forward+backward, tiled (target <= 512 MiB; exponent <= 1.1)", "",
                  f"Multi-view losses: N capped at 8,192 samples (V = {V}), so their 2N = {cols[-1]} column repeats N = 8,192.", "",
                  "RSS growth is the process's peak resident memory during the call minus its resident memory just "
                  "before (the peak reset there: `suite.memory.reset_peak_rss`), allocator pools included, in a fresh "
                  "process per cell; the exponent is fitted between the first and last measured sizes.", "",
                  markdown_table(["loss", "views"] + head + ["exponent in N", "target met"], mrows), "",
                  "## Time per similarity entry (ns) of the tiled path as 2N grows (target: within 1.5x)", "",
                  f"From the same processes: a second call's time up to 2N = 16,384 (the first carries one-off costs), "
                  f"the only call's above.", "",
                  markdown_table(["loss"] + head + ["max / min", "target met"], trows), ""]
    return "\n".join(lines)


def register(sub: Any) -> None:
    p = sub.add_parser("losses", help="time forward+backward and memory of every loss; write benchmarks/results/losses.md")
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096], help="2N values")
    p.add_argument("--repeats", type=int, default=0, help="repeats per measurement (0: by size)")
    p.add_argument("--losses", nargs="+", default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-registry", action="store_true")
    p.add_argument("--large", action="store_true", help="the tiled path: speed vs dense, peak RSS, time growth "
                                                         "(writes benchmarks/results/losses_large.md)")
    p.add_argument("--huge", nargs="*", default=[], help="--large: losses also measured at 2N = 65,536 ('all': every loss)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    bad = [n for n in args.sizes if n < 4 or n % 2]
    if bad:  # 2N embeddings of N >= 2 pairs
        raise ValueError(f"--sizes are 2N values (two views of N >= 2 samples): even numbers >= 4, got {bad}")
    if args.repeats < 0:
        raise ValueError(f"--repeats must be >= 0, got {args.repeats}")
    if args.out is not None and not Path(args.out).parent.is_dir():
        raise ValueError(f"--out {args.out}: folder {Path(args.out).parent} not found")
    if args.large:
        sizes = tuple(args.sizes) if args.sizes != [256, 1024, 4096] else (4096, 16384)
        reg = None if args.no_registry else Registry()
        print(run_large(sizes, args.losses, args.repeats or 5, huge=tuple(args.huge), registry=reg))
        return 0
    reg = None if args.no_registry else Registry()
    print(run(tuple(args.sizes), args.repeats, args.losses, reg, args.out))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["losses", *__import__("sys").argv[1:]])))
