"""``benchmarks/results/gpu_bench.md`` from the registry alone: the rows of ``make gpu-bench``
(:mod:`benchmarks.measurements.gpu_bench`; tasks :data:`TASK` per front-end, :data:`LOSS_TASK` per loss case), each
naming its code version and machine, with the targets of issue 47 and the runs left out (:func:`table`)."""
from __future__ import annotations

import math
from typing import Any

from benchmarks.measurements.gpu_loops import PLAIN_VERSION

TASK, LOSS_TASK = "gpu-bench", "gpu-bench-loss"
FRONT_END_TARGET = 0.9  # the suite's rate / the plain loop's (issue 47)
# the loss core's targets: time / the plain InfoNCE's (three-view: / three plain pairs'); issue 47: the dense paths,
# issue 78: every loss compiled whole, as the engine runs it on one GPU, <= 1.1x
_SEED_LOSSES = ("dcl", "macl", "supcon", "xclr", "tsimclr", "cacr", "cmc", "uaur")
LOSS_TARGETS = {"infonce-dense": 1.1, **{f"{n}-dense": 1.5 for n in _SEED_LOSSES},
                **{f"{n}-compiled": 1.1 for n in ("infonce", *_SEED_LOSSES)}}
RATIO_TEXT = ("ratio = the median over interleaved rounds of one side's rate / the median of the other's (front-ends: "
              "suite / plain, >= 0.9 the target; the loss core: time / the plain InfoNCE's time, lower is better), "
              "its lowest and highest per-round ratio beside it in brackets")

# code versions whose GPU rows timed the plain loops with their targets copied from the host each step (from pageable
# memory: a wait for the device): their ratios may favour the suite by an amount not measured
PLAIN_WAITED = {"acf966b5329e", "b6dde2f308c1", "1a8b50dc6148", "6e37ede529db"}


def _fmt(v: float, digits: int = 0) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:,.{digits}f}"


def _range(m: dict[str, float]) -> str:
    """" (lowest-highest)" of a row's per-round ratios, where its run recorded them under :data:`RATIO_TEXT`'s
    definition (issue 68 on)."""
    if "ratio_min" not in m:
        return ""
    return f" ({_fmt(m['ratio_min'], 2)}-{_fmt(m['ratio_max'], 2)})"


def _env(c: dict[str, Any]) -> str:
    """The versions and machine a row names (those it recorded: rows before issue 68 have no driver or machine)."""
    parts = [f"{label} {c[k]}" for k, label in (("torch", "torch"), ("cuda", "CUDA"), ("driver", "driver"),
                                                ("triton", "Triton"), ("machine", "machine")) if c.get(k)]
    return ", ".join(parts)


def reference_case(case: str) -> str:
    """The plain case a loss-core case is timed against: three plain pairs for a multi-view loss."""
    import suite.losses as L

    name = case.rsplit("-", 1)[0]
    multi = case == "plain-infonce-3pairs" or (name in L.available() and L.loss_class(name).multi_view)
    return "plain-infonce-3pairs" if multi else "plain-infonce"


def fair_front_end(r: Any) -> bool:
    """A front-end row timed against issue 68's plain loops (:data:`PLAIN_VERSION` recorded with it)."""
    return int(r.config.get("plain", 1)) >= PLAIN_VERSION


def front_end_ratio(m: dict[str, float]) -> float:
    """:data:`RATIO_TEXT` from a row's median rates (a row before issue 68 recorded the median of per-round ratios as
    its ``ratio``: the table never shows that one)."""
    return m["suite_steps_per_s"] / m["plain_steps_per_s"]


def table(registry: Any, allow_dirty: bool = False) -> str:
    """``gpu_bench.md`` from the registry alone: the newest fair run of each front-end and loss case per device and
    size (front-ends: :func:`fair_front_end`; the loss core: not at :data:`PLAIN_WAITED`), each row naming its code
    version and machine; the runs left out named by their code versions."""
    from benchmarks.measurements.measured import every

    def fe_key(r: Any) -> tuple[Any, ...]:
        return (r.config.get("device"), r.config.get("size"),
                r.row["dataset"] + (" (compiled)" if r.config.get("compile") else ""))

    fe_every = every(registry, TASK, fe_key, allow_dirty)
    fe_all = {k: [r for r in runs if fair_front_end(r)] for k, runs in fe_every.items()}
    fe = {k: runs[-1] for k, runs in fe_all.items() if runs}
    ls_every = every(registry, LOSS_TASK, lambda r: (r.config.get("device"), r.config.get("size"), r.row["dataset"],
                                                     int(r.config.get("n", 0))), allow_dirty)
    ls = {k: [r for r in runs if r.code_version not in PLAIN_WAITED] for k, runs in ls_every.items()}
    ls = {k: runs[-1] for k, runs in ls.items() if runs}
    plain_ms = {(k[0], k[1], k[3], r.code_version, k[2]): r.metrics.get("ms", math.nan)
                for k, runs in ls_every.items() if k[2].startswith("plain-") for r in runs}
    lines = ["# The suite beside plain PyTorch loops (`make gpu-bench`)", "",
             "Made by `python -m benchmarks.measurements.gpu_bench` from the registry alone (tasks `gpu-bench`, "
             "`gpu-bench-loss`). Each front-end's training step (the front-end's own task driven by the engine) "
             "beside a plain loop of the same model, batch, precision, augmentation and optimiser, interleaved on "
             f"one device, whole batches on both sides; {RATIO_TEXT}. Each row names its code version and the "
             "machine it ran on. Peak memory: the most allocated above the round's start (CUDA only). `tiny` is the "
             "CI size on the CPU: it checks the plumbing, its ratios say little.", ""]
    left = sorted({r.code_version[:7] for runs in fe_every.values() for r in runs if not fair_front_end(r)})
    if left:
        lines += [f"Front-end runs at code {', '.join(left)} are left out: they timed plain loops before issue 68's "
                  "fixes (SimCSE tokenising every step in the training thread, the molecule views and SimCSE's "
                  "tokens copied from pageable memory, the vision encoder not converted to channels_last, PyG's "
                  "prefetch depth of 2 against the suite's 4, and at the older codes InfoNCE's targets built on the "
                  "host), which favoured the suite by amounts not measured.", ""]
    waited = sorted({r.code_version[:7] for runs in ls_every.values() for r in runs} & {v[:7] for v in PLAIN_WAITED})
    if waited:
        lines += [f"Loss-core runs at code {', '.join(waited)} are left out: their plain InfoNCE built its targets on "
                  "the host and copied them from pageable memory every step (a wait for the device).", ""]
    for dev, sz in sorted({(k[0], k[1]) for k in fe_every} | {(k[0], k[1]) for k in ls_every}, key=str):
        rows = sorted((k, r) for k, r in fe.items() if k[:2] == (dev, sz))
        lines += [f"## {dev}, size `{sz}`", ""]
        if not rows:
            lines += [f"No front-end run against the fair plain loops yet: the target (>= {FRONT_END_TARGET} of the "
                      "plain loop for every front-end) is open, with no fair value.", ""]
        else:
            lines += ["| front-end | batch | suite steps/s | plain steps/s | suite examples/s | plain examples/s | "
                      "ratio (per-round range) | suite peak MB | plain peak MB | host reads / step | code | versions, "
                      "machine | earlier fair runs: ratio (code) |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for k, r in rows:
                m = r.metrics
                lines.append(f"| {k[2]} | {int(m.get('batch', 0))} | {_fmt(m['suite_steps_per_s'], 1)} | "
                             f"{_fmt(m['plain_steps_per_s'], 1)} | {_fmt(m['suite_examples_per_s'])} | "
                             f"{_fmt(m['plain_examples_per_s'])} | **{_fmt(front_end_ratio(m), 2)}**{_range(m)} | "
                             f"{_fmt(m.get('suite_peak_mb', math.nan))} | {_fmt(m.get('plain_peak_mb', math.nan))} | "
                             f"{_fmt(m.get('host_reads_per_step', math.nan), 2)} | {r.code_version[:7]} | "
                             f"{_env(r.config)} | "
                             + (", ".join(f"{_fmt(front_end_ratio(e.metrics), 2)} ({e.code_version[:7]})"
                                          for e in fe_all[k][:-1]) or "-") + " |")
            short = [f"{k[2]} {front_end_ratio(r.metrics):.2f}" for k, r in rows
                     if front_end_ratio(r.metrics) < FRONT_END_TARGET]
            lines += ["", f"Short of the target ({FRONT_END_TARGET}): " + (", ".join(short) if short else "none") + "."]
            lines.append("")
        lrows = sorted(((k, r) for k, r in ls.items() if k[:2] == (dev, sz)), key=lambda kr: (kr[0][3], kr[0][2]))
        if lrows:
            lines += [f"### The loss core on {dev}, size `{sz}`: forward + backward, d = 128, fp32", "",
                      "Ratio: the case's median time / the plain InfoNCE's (normalise, matrix product, cross-entropy) "
                      "in the same interleaved call; three-view losses (cacr, cmc, uaur) against three plain pairs. "
                      "Targets: dense InfoNCE <= 1.1, two-view seed losses <= 1.5, three-view <= 1.5; each loss "
                      "compiled whole as the engine runs it on one GPU (`-compiled`) <= 1.1 (issue 78), "
                      "`plain-infonce-compiled` the plain loss compiled beside them. A case that could not run "
                      "names why, at its code version (a later one may have mended it: `docs/gpu.md`).", "",
                      "| 2N | case | ms | ratio (per-round range) | peak MB | code | versions, machine |",
                      "|---|---|---|---|---|---|---|"]
            ratios = {}
            for k, r in lrows:
                m = r.metrics
                ref = plain_ms.get((k[0], k[1], k[3], r.code_version, reference_case(k[2])), math.nan)
                ratios[k] = m.get("ms", math.nan) / ref
                failed = f"`{r.config['failed']}`" if r.config.get("failed") else ""  # a code span: no HTML
                lines.append(f"| {int(r.config.get('n', 0)):,} | {k[2]} | {failed or _fmt(m.get('ms', math.nan), 2)} | "
                             f"{_fmt(ratios[k], 2)}{_range(m)} | {_fmt(m.get('peak_mb', math.nan))} | "
                             f"{r.code_version[:7]} | {_env(r.config)} |")
            short = [f"{k[2]} at 2N = {k[3]:,}: "
                     + (r.config["failed"].split(" (")[0] if r.config.get("failed") else f"{ratios[k]:.2f}")
                     + f" ({r.code_version[:7]}; target {LOSS_TARGETS[k[2]]})"
                     for k, r in lrows if k[2] in LOSS_TARGETS and not ratios[k] <= LOSS_TARGETS[k[2]]]
            lines += ["", "Short of the targets (dense and compiled paths), open at their last fair value: "
                      + ("; ".join(short) if short else "none") + "."]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
