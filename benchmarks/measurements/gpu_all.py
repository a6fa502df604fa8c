"""``make gpu-all`` (``python -m benchmarks.measurements.gpu_all``): every GPU measurement in one prepared call, in order
of value, written into the registry, so that the next GPU at hand spends its minutes measuring (issue 68).

1. ``gpu-check`` of the losses: each loss on the device against the CPU (task ``gpu-check``, dataset ``losses``);
2. ``gpu-bench`` of the loss core: 2N = 8,192 (eager, and compiled whole as the engine runs it: issue 78) and 32,768;
3. ``gpu-bench`` of the front-ends at the issue's sizes, beside their fair plain loops;
4. the fused kernels (``fused_bench``) at 2N = 8,192, 32,768 and 131,072, within ``--fused-budget-s``;
5. ``gpu-check`` of the front-ends: each a few steps on tiny data (task ``gpu-check``; not in ``--tiny``);
6. optional: the streamed image loader feeding ResNet-50 (``benchmarks.measurements.image_loader --gpu``), only where
   that module exists.

On one GPU it is meant to end within 10 minutes; ``--deadline-s`` skips the steps not begun by then (a device lent for
a fixed time returns what it measured, each step's rows already in the registry). It prints one summary line per step
(exit status, seconds, or skipped) and exits 1 if a step failed. ``--tiny`` runs the same steps at sizes the CPU
finishes in seconds (the losses of gpu-check, one front-end, the loss core at 2N = 256, the kernels' loop under
Triton's interpreter): a test runs it in ``make test``.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import time
import traceback
from typing import Callable, Sequence

IMAGE_LOADER = "benchmarks.measurements.image_loader"


def steps(registry: str | None, tiny: bool, text_backbone: str = "default") -> list[tuple[str, Callable[[], int]]]:
    """(name, call returning an exit status) of each step, in order of value."""
    from benchmarks.measurements import fused_bench, gpu_bench
    from suite import gpu_check

    reg = ["--registry", registry] if registry else []
    dev = ["--device", "cpu"] if tiny else []
    fronts = "graph-tu" if tiny else "vision-simclr,vision-moco,graph-tu,graph-mol,text-simcse"
    size = ["--size", "tiny", "--repeats", "1"] if tiny else ["--size", "full"]
    out: list[tuple[str, Callable[[], int]]] = [
        ("gpu-check losses", lambda: gpu_check.main([*dev, *reg, "--only", "none"])),
        ("gpu-bench loss core", lambda: gpu_bench.main([*dev, *size, *reg, "--only", "losses"])),
        ("gpu-bench front-ends", lambda: gpu_bench.main([*dev, *size, *reg, "--only", fronts])),
        ("fused kernels", lambda: fused_bench.main(
            ["--dry-run", "--sizes", "48", "--losses", "infonce", "--no-errors", "--paths", "dense,fused"] if tiny
            else ["--sizes", "8192,32768,131072", "--budget-s", "150", *reg])),
    ]
    if not tiny:  # subprocesses of the suite's commands: on the CPU the test of gpu_check covers them
        out.append(("gpu-check front-ends", lambda: gpu_check.main([*reg, "--skip-losses", "--text-backbone",
                                                                     text_backbone])))
    if importlib.util.find_spec(IMAGE_LOADER) is not None:  # OPTIONAL: the streamed image loader (vision/stream.py)
        def image_loader() -> int:
            import runpy
            import sys

            argv, sys.argv = sys.argv, [IMAGE_LOADER, "--gpu", *reg]
            try:
                runpy.run_module(IMAGE_LOADER, run_name="__main__")
            except SystemExit as exc:
                return int(exc.code or 0)
            finally:
                sys.argv = argv
            return 0
        if not tiny:
            out.append(("image loader + ResNet-50 (optional)", image_loader))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.measurements.gpu_all", description=__doc__.split("\n")[0])
    ap.add_argument("--registry", default=None, help="the registry every step writes to (default: $SUITE_REGISTRY)")
    ap.add_argument("--tiny", action="store_true", help="every step at a size the CPU runs in seconds (the test)")
    ap.add_argument("--deadline-s", type=float, default=math.inf,
                    help="a step not begun this many seconds after the start is skipped (default: none)")
    ap.add_argument("--text-backbone", default="default", help="SimCSE's start model in gpu-check (a local Hugging "
                    "Face model folder where the packaged all-MiniLM-L6-v2 is not installed)")
    args = ap.parse_args(argv)
    summary: list[tuple[str, int | None, float]] = []
    start = time.perf_counter()
    for name, call in steps(args.registry, args.tiny, args.text_backbone):
        if time.perf_counter() - start > args.deadline_s:
            summary.append((name, None, 0.0))
            continue
        print(f"\n=== gpu-all: {name}", flush=True)
        t0 = time.perf_counter()
        try:
            rc = call()
        except Exception:  # noqa: BLE001 - a step's fault is reported; the later steps still run
            traceback.print_exc()
            rc = 1
        summary.append((name, rc, time.perf_counter() - t0))
    print("\ngpu-all summary:")
    for name, rc, s in summary:
        print(f"  {name}: " + (f"skipped (the deadline of {args.deadline_s:.0f} s had passed)" if rc is None else
                               f"{'ok' if rc == 0 else f'FAILED (exit {rc})'}, {s:.0f} s"))
    return 1 if any(rc for _, rc, _ in summary) else 0


if __name__ == "__main__":
    raise SystemExit(main())
