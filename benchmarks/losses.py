"""Loss benchmark: forward+backward time and peak tensor memory of every loss.

2N in {256, 1024, 4096} embeddings, d = 128 (multi-view losses: V = 5 views of N samples),
float32 on CPU, median over repeats. Each loss's time is reported as a ratio to ``infonce`` at the
same N (multi-view losses also to ``cmc``), and ``infonce`` as a ratio to the floor every
implementation pays: the bare similarity product ``e @ e.T`` of the 2N normalised embeddings,
forward and backward. Where ``pytorch-metric-learning`` is installed, ``infonce`` is checked against
its ``NTXentLoss`` for equal values (timed only at N <= 128: its cost grows cubically).

Run: ``suite bench losses`` (or ``python -m benchmarks.losses``). Writes
``benchmarks/results/losses.md`` and registry entries (modality "core", task "loss-bench").
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import suite.losses as L
from suite.memory import PeakTensorMemory
from suite.registry import Registry, markdown_table

RESULTS = Path(__file__).resolve().parent / "results" / "losses.md"
D = 128
V = 5


def _inputs(name: str, n: int, gen: torch.Generator) -> tuple[Callable[[], torch.Tensor], list[torch.Tensor]]:
    loss = L.build(name)
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
        extra["similarity"] = cg[labels][:, labels]
    return (lambda: loss(a, b, **extra)), [a, b]


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


def _time_interleaved(cases: dict[str, tuple[Callable[[], torch.Tensor], list[torch.Tensor]]], repeats: int
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


def _peak(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> int:
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
    n = 128
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
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    names = losses or L.available()
    res: dict[tuple[str, int], tuple[float, int]] = {}
    ratios: dict[tuple[str, int], float] = {}
    for two_n in sizes:
        n = two_n // 2
        reps = repeats or (21 if two_n <= 256 else 9 if two_n <= 1024 else 5)
        cases = {"floor": _floor_inputs(n, gen), **{name: _inputs(name, n, gen) for name in names}}
        med, ratio = _time_interleaved(cases, reps)
        for k, (fn, leaves) in cases.items():
            res[(k, two_n)] = (med[k], _peak(fn, leaves))
            ratios[(k, two_n)] = ratio[k]
            print(f"  2N={two_n:5d} {k:14s} {1e3 * med[k]:9.2f} ms  {ratio[k]:5.2f}x infonce", flush=True)
    pml = check_pml(gen)

    rows = []
    verdicts = []
    for name in names:
        cls = L.loss_class(name)
        for two_n in sizes:
            t, mem = res[(name, two_n)]
            ratio = ratios[(name, two_n)]  # median over rounds of t / t_infonce (same round)
            ref = "cmc" if cls.multi_view else "infonce"
            target_ratio = ratio / ratios.get(("cmc", two_n), float("nan")) if cls.multi_view else ratio
            if name == "infonce":
                floor_ratio = 1.0 / ratios[("floor", two_n)]
                ok = floor_ratio <= 2.0
                note = f"{floor_ratio:.2f}x floor"
            elif name == "cmc":
                ok, note = True, "(multi-view reference)"
            else:
                ok = target_ratio <= 1.5
                note = f"{target_ratio:.2f}x {ref}"
            verdicts.append(ok)
            rows.append([name, "V=5" if cls.multi_view else "V=2", two_n, f"{1e3 * t:.2f}", f"{ratio:.2f}",
                         note, "yes" if ok else "**no**", f"{mem / 2**20:.1f}"])
    floor_rows = [["bare e@e.T (floor)", "-", s, f"{1e3 * res[('floor', s)][0]:.2f}", "-", "-", "-",
                   f"{res[('floor', s)][1] / 2**20:.1f}"] for s in sizes]
    table = markdown_table(["loss", "views", "2N", "fwd+bwd ms (median)", "x infonce", "target measure", "target met",
                            "peak tensor MiB"], floor_rows + rows)
    mem_note = _memory_scaling(res, names, sizes)
    lines = [
        "# Loss benchmark (generated by `suite bench losses`)",
        "",
        f"CPU float32, d = {D}, multi-view losses V = {V} views of N = 2N/2 samples; median of repeated "
        f"forward+backward passes, timed round-robin (each round times every loss once; ratios are medians of "
        f"per-round ratios, so machine load hits all losses alike); peak = live tensor memory during forward+backward (suite.memory). "
        f"Torch threads: {torch.get_num_threads()}. Targets: every two-view loss within 1.5x of `infonce`, "
        f"multi-view losses within 1.5x of `cmc` at the same V, `infonce` within 2x of the bare similarity product.",
        "",
        table,
        mem_note,
    ]
    if pml:
        lines += ["", f"`infonce` vs pytorch-metric-learning `NTXentLoss` (N = 128, tau = 0.1): ours {pml['ours']:.6f}, "
                      f"theirs {pml['pml']:.6f}, |diff| = {pml['abs_diff']:.2e}; fwd+bwd {pml['t_ours_ms']:.2f} ms vs "
                      f"{pml['t_pml_ms']:.2f} ms."]
    misses = [r for r, ok in zip(rows, verdicts) if not ok]
    lines += ["", f"Targets met: {sum(verdicts)}/{len(verdicts)}." + (
        " Missed: " + "; ".join(f"{r[0]} at 2N={r[2]} ({r[5]})" for r in misses) + "." if misses else "")]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if registry is not None:
        for (name, two_n), (t, mem) in res.items():
            with registry.run(modality="core", task="loss-bench", dataset=f"random-2N{two_n}-d{D}", loss=name,
                              loss_hparams=L.defaults(name) if name != "floor" else {},
                              config={"two_n": two_n, "d": D, "views": V, "threads": torch.get_num_threads()},
                              seed=seed) as r:
                r.log_many({"fwd_bwd_ms": 1e3 * t, "peak_mib": mem / 2**20}, split="bench")
    return text


def _memory_scaling(res: dict[tuple[str, int], tuple[float, int]], names: list[str], sizes: tuple[int, ...]) -> str:
    """Fit the exponent of peak memory in N between the two largest sizes (2 = O(N^2))."""
    if len(sizes) < 2:
        return ""
    import math

    s0, s1 = sizes[-2], sizes[-1]
    parts = []
    for name in names:
        m0, m1 = res[(name, s0)][1], res[(name, s1)][1]
        if m0 > 0:
            parts.append(f"{name} {math.log(m1 / m0) / math.log(s1 / s0):.2f}")
    return f"\nPeak-memory growth exponent in N between 2N = {s0} and {s1} (2.0 = O(N^2)): " + ", ".join(parts) + "."


def register(sub: Any) -> None:
    p = sub.add_parser("losses", help="time forward+backward and memory of every loss; write benchmarks/results/losses.md")
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096], help="2N values")
    p.add_argument("--repeats", type=int, default=0, help="repeats per measurement (0: by size)")
    p.add_argument("--losses", nargs="+", default=None)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-registry", action="store_true")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    reg = None if args.no_registry else Registry()
    print(run(tuple(args.sizes), args.repeats, args.losses, reg, args.out))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["losses", *__import__("sys").argv[1:]])))
