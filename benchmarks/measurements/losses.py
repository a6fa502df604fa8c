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
``--large``: :data:`~benchmarks.measurements.loss_tables.LARGE_TASKS`), then ``benchmarks/results/losses.md`` and
``losses_large.md`` are rendered from the registry alone (:mod:`benchmarks.measurements.loss_tables`).
"""
from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import suite.losses as L
from benchmarks.measurements.loss_tables import LARGE_TASKS, OPS_TASK, RESULTS, RESULTS_LARGE, table, table_large
from benchmarks.measurements.measured import Measurement, record
from suite.losses.examples import example_inputs
from suite.measure import Case, median_time, peak_tensor_bytes, round_robin, time_interleaved
from suite.registry import Registry

PML_N = 128
D = 128
V = 5


def _inputs(name: str, n: int, gen: torch.Generator, chunk_size: int | str | None = None) -> Case:
    """(forward, leaves) of ``name`` at N = ``n``, d = :data:`D` (multi-view: :data:`V` views), built with
    ``chunk_size``: its example inputs (:func:`suite.losses.examples.example_inputs`), X-CLR's graph as embeddings on
    the tiled path (never (N, N))."""
    ex = example_inputs(name, n, D, views=V, graph="matrix" if chunk_size is None else "embeddings", generator=gen)
    return ex.call(L.build(name, chunk_size=chunk_size)), ex.leaves


def _tiles(name: str, n: int) -> int:
    """Rows per tile of the tiled timings: about 2^22 entries per tile, at least 4 tiles."""
    from suite.losses.tiling import AUTO_TILE_ELEMENTS

    rows = (V if L.loss_class(name).multi_view else 2) * n
    return max(1, min(AUTO_TILE_ELEMENTS // rows, rows // 4))


def _floor_inputs(n: int, gen: torch.Generator) -> Case:
    e = F.normalize(torch.randn(2 * n, D, generator=gen), dim=1).requires_grad_()
    return (lambda: (e @ e.T).sum()), [e]


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
    t_pml = median_time(lambda: pml(torch.cat([a, b]), lab), [a, b], 5)
    t_ours = median_time(lambda: L.build("infonce")(a, b), [a, b], 5)
    return {"ours": ours, "pml": theirs, "abs_diff": abs(ours - theirs), "t_pml_ms": 1e3 * t_pml, "t_ours_ms": 1e3 * t_ours}


def run(sizes: tuple[int, ...] = (256, 1024, 4096), repeats: int = 0, losses: list[str] | None = None,
        registry: Registry | None = None, out: Path = RESULTS, seed: int = 0, pml_check: bool = True) -> str:
    """Time and measure every loss at ``sizes``, record every number in ``registry`` (None: a temporary one, for a
    try-out's table), then write :func:`table` of it to ``out``; ``pml_check``: also compare InfoNCE with
    pytorch-metric-learning's NTXentLoss where it is installed (about 15 s: its pair-based loss is slow)."""
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
            mem = peak_tensor_bytes(fn, leaves) if "@" not in k else 0
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
    pml = check_pml(gen) if pml_check else None
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


# ----------------------------------------------------------------------------- --large: the tiled path

_RSS_SCRIPT = r"""
import json, sys, torch
torch.set_num_threads(int(sys.argv[4]))
from benchmarks.measurements.losses import _inputs
from suite.measure import rss_growth, step
name, n, chunk = sys.argv[1], int(sys.argv[2]), sys.argv[3]
chunk = None if chunk == "none" else ("auto" if chunk == "auto" else int(chunk))
fn, leaves = _inputs(name, n, torch.Generator().manual_seed(0), chunk)
out = rss_growth(lambda: fn().backward())
out["s_warm"] = out["s"]
if len(sys.argv) > 5 and sys.argv[5] == "warm":  # a second call: the time without first-call costs
    out["s_warm"] = step(fn, leaves)[0]
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


def _interleaved_ratio(cases: dict[str, Case], repeats: int) -> tuple[dict[str, float], float]:
    """Median times of two cases timed in alternating rounds, and the median over rounds of second / first."""
    (k0, r0), (k1, r1) = round_robin(cases, repeats).items()
    return ({k0: statistics.median(r0), k1: statistics.median(r1)},
            statistics.median(b / a for a, b in zip(r0, r1)))


def _samples(name: str, two_n: int) -> tuple[int, int]:
    """(N samples, similarity entries) of a measurement at 2N = ``two_n`` (multi-view: V views, N <= 8192)."""
    if L.loss_class(name).multi_view:
        n = min(two_n // 2, 8192)
        return n, (V * n) ** 2
    return two_n // 2, two_n ** 2




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


# ----------------------------------------------------------------------------- --ops: operations eager and compiled

# no work of their own (metadata, allocation): not counted; and ops counted by what they call (a copy, or nothing)
_NOT_LAUNCHES = frozenset({
    "aten::view", "aten::t", "aten::transpose", "aten::permute", "aten::slice", "aten::select", "aten::expand",
    "aten::as_strided", "aten::unsqueeze", "aten::squeeze", "aten::alias", "aten::detach", "aten::_unsafe_view",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resolve_conj", "aten::resolve_neg",
    "aten::lift_fresh", "aten::unbind", "aten::split", "aten::narrow", "aten::diagonal", "aten::unflatten",
    "aten::to", "aten::reshape", "aten::contiguous", "aten::flatten", "aten::view_as", "aten::expand_as",
    "aten::split_with_sizes", "aten::chunk", "aten::_reshape_alias"})


def count_launches(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> int:
    """Operations launched by one forward + backward of ``fn`` (torch.profiler, CPU): the outermost ATen operators and
    Inductor's fused kernels (``cpp_fused_*``, recorded with ``torch._inductor.config.cpp.enable_kernel_profile``),
    views and allocations left out (what is inside a counted one is its own work). On a GPU each is about one kernel
    launch and its host time."""
    from torch.profiler import ProfilerActivity, profile

    for x in leaves:
        x.grad = None
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn().backward()
    for x in leaves:
        x.grad = None

    def counted(e: Any) -> bool:
        return ("cpp_fused" in e.name or e.name.startswith("aten::")) and e.name not in _NOT_LAUNCHES

    n = 0
    for e in prof.events():
        if not counted(e):
            continue
        p = e.cpu_parent
        while p is not None and not counted(p):
            p = p.cpu_parent
        n += p is None
    return n


def run_ops(two_n: int = 256, losses: list[str] | None = None, repeats: int = 9, registry: Registry | None = None,
            out: Path = RESULTS, seed: int = 0) -> str:
    """Per loss on its dense path at 2N = ``two_n`` (d = :data:`D`, multi-view V = :data:`V`), as the engine calls it
    (checks deferred): the operations launched by a forward + backward (:func:`count_launches`) eager and compiled
    whole (``torch.compile(fullgraph=True)``, Inductor), and the time of each as a ratio to the plain InfoNCE loop
    (``gpu_loops.nt_xent``, eager; timed in the same rounds, the ratio of the medians). Recorded under
    :data:`OPS_TASK`, then the table written as :func:`run` writes it (its "operations per loss" section)."""
    import torch._inductor.config as inductor_config

    from benchmarks.measurements.gpu_loops import nt_xent
    from suite.losses.checks import DeferredChecks, deferred
    from suite.measure import median_ratio

    inductor_config.cpp.enable_kernel_profile = True  # the fused kernels appear in the profile
    torch.manual_seed(seed)
    names = losses or sorted(set(L.available()) - set(L.plugins()))
    threads = torch.get_num_threads()
    n = two_n // 2
    gen = torch.Generator().manual_seed(seed)
    a, b = (torch.randn(n, D, generator=gen).requires_grad_() for _ in range(2))
    plain: Case = (lambda: nt_xent(a, b), [a, b])
    taken: list[Measurement] = []
    checks = DeferredChecks()
    with deferred(checks):
        plain_ops = count_launches(*plain)
        for name in names:
            ex = example_inputs(name, n, D, views=V, generator=torch.Generator().manual_seed(seed))
            loss = L.build(name, chunk_size=None)
            compiled = torch.compile(loss, fullgraph=True)
            cases = {"plain": plain, "eager": (ex.call(loss), ex.leaves), "compiled": (ex.call(compiled), ex.leaves)}
            rounds = round_robin(cases, repeats)  # (its warm-up call compiles)
            ops = {k: count_launches(*cases[k]) for k in ("eager", "compiled")}
            checks.pending.clear()
            metrics = {"ops_eager": float(ops["eager"]), "ops_compiled": float(ops["compiled"]),
                       "ops_plain": float(plain_ops),
                       "eager_ms": 1e3 * statistics.median(rounds["eager"]),
                       "compiled_ms": 1e3 * statistics.median(rounds["compiled"]),
                       "plain_ms": 1e3 * statistics.median(rounds["plain"]),
                       "eager_x_plain": median_ratio(rounds["eager"], rounds["plain"])["ratio"],
                       "compiled_x_plain": median_ratio(rounds["compiled"], rounds["plain"])["ratio"]}
            print(f"  ops {name:14s} eager {ops['eager']:4d} compiled {ops['compiled']:4d} (plain {plain_ops}); "
                  f"x plain eager {metrics['eager_x_plain']:.2f} compiled {metrics['compiled_x_plain']:.2f}", flush=True)
            taken.append(Measurement(
                OPS_TASK, f"random-2N{two_n}-d{D}", name,
                {"two_n": two_n, "d": D, "views": V if loss.multi_view else 2, "threads": threads, "path": "dense",
                 "repeats": repeats, "compiler": "inductor", "fullgraph": True}, metrics, "ops_compiled",
                loss_hparams=L.defaults(name), seed=seed))
            torch._dynamo.reset()
    return _record_and_write(taken, registry, out, table)


def register(sub: Any) -> None:
    p = sub.add_parser("losses", help="time forward+backward and memory of every loss; write benchmarks/results/losses.md")
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096], help="2N values")
    p.add_argument("--repeats", type=int, default=0, help="repeats per measurement (0: by size)")
    p.add_argument("--losses", nargs="+", default=None)
    p.add_argument("--out", type=Path, default=None, help="default: results/tables/losses.md (losses_large.md with "
                   "--large; the committed ones are rebuilt from the snapshot by suite bench report)")
    p.add_argument("--no-registry", action="store_true")
    p.add_argument("--pml-check", action=argparse.BooleanOptionalAction, default=True,
                   help="compare InfoNCE with pytorch-metric-learning's NTXentLoss where it is installed (default: on)")
    p.add_argument("--large", action="store_true", help="the tiled path: speed vs dense, peak RSS, time growth "
                                                         "(writes benchmarks/results/losses_large.md)")
    p.add_argument("--huge", nargs="*", default=[], help="--large: losses also measured at 2N = 65,536 ('all': every loss)")
    p.add_argument("--ops", action="store_true", help="operations launched and time per loss, eager and compiled whole "
                                                       "(torch.compile, Inductor), at 2N = the first --sizes value")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    bad = [n for n in args.sizes if n < 4 or n % 2]
    if bad:  # 2N embeddings of N >= 2 pairs
        raise ValueError(f"--sizes are 2N values (two views of N >= 2 samples): even numbers >= 4, got {bad}")
    if args.repeats < 0:
        raise ValueError(f"--repeats must be >= 0, got {args.repeats}")
    from benchmarks.paths import results_target

    if args.out is not None and not Path(args.out).parent.is_dir():
        raise ValueError(f"--out {args.out}: folder {Path(args.out).parent} not found")
    reg = None if args.no_registry else Registry()
    out = results_target(args.out, RESULTS_LARGE if args.large else RESULTS, reg)  # never the committed table
    if args.large:
        sizes = tuple(args.sizes) if args.sizes != [256, 1024, 4096] else (4096, 16384)
        print(run_large(sizes, args.losses, args.repeats or 5, out=out, huge=tuple(args.huge), registry=reg))
        return 0
    if getattr(args, "ops", False):
        print(run_ops(args.sizes[0], args.losses, args.repeats or 9, reg, out))
        return 0
    print(run(tuple(args.sizes), args.repeats, args.losses, reg, out, pml_check=args.pml_check))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["losses", *__import__("sys").argv[1:]])))
