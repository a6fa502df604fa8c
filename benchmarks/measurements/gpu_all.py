"""``make gpu-all`` (``python -m benchmarks.measurements.gpu_all``): every GPU measurement in one prepared call, in order
of value, written into the registry, so that the next GPU at hand spends its minutes measuring (issue 68).

1. ``gpu-check``: the losses on the device against the CPU and every front-end a few steps (task ``gpu-check``);
2. ``gpu-bench`` at the issue's sizes: the front-ends beside their fair plain loops, then the loss core (2N = 8,192
   and 32,768);
3. the fused kernels (``fused_bench``) at 2N = 8,192, 32,768 and 131,072, within ``--fused-budget-s``;
4. optional: the streamed image loader feeding ResNet-50 (``benchmarks.measurements.image_loader --gpu``), only where
   that module exists.

On one GPU it is meant to end within 10 minutes. It prints one summary line per step (exit status, seconds) and exits
1 if a step failed. ``--tiny`` runs the same steps at sizes the CPU finishes in seconds (the losses of gpu-check,
one front-end, the loss core at 2N = 256, the kernels' loop under Triton's interpreter): a test runs it in ``make
test``.
"""
from __future__ import annotations

import argparse
import importlib.util
import time
import traceback
from typing import Callable, Sequence

IMAGE_LOADER = "benchmarks.measurements.image_loader"


def steps(registry: str | None, tiny: bool) -> list[tuple[str, Callable[[], int]]]:
    """(name, call returning an exit status) of each step, in order of value."""
    from benchmarks.measurements import fused_bench, gpu_bench
    from suite import gpu_check

    reg = ["--registry", registry] if registry else []
    dev = ["--device", "cpu"] if tiny else []
    fronts = "graph-tu" if tiny else "vision-simclr,vision-moco,graph-tu,graph-mol,text-simcse"
    size = ["--size", "tiny", "--repeats", "1"] if tiny else ["--size", "full"]
    out: list[tuple[str, Callable[[], int]]] = [
        ("gpu-check", lambda: gpu_check.main([*dev, *reg, *(["--only", "none"] if tiny else [])])),
        ("gpu-bench front-ends", lambda: gpu_bench.main([*dev, *size, *reg, "--only", fronts])),
        ("gpu-bench loss core", lambda: gpu_bench.main([*dev, *size, *reg, "--only", "losses"])),
        ("fused kernels", lambda: fused_bench.main(
            ["--dry-run", "--sizes", "48", "--losses", "infonce", "--no-errors", "--paths", "dense,fused"] if tiny
            else ["--sizes", "8192,32768,131072", "--budget-s", "150", *reg])),
    ]
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
    args = ap.parse_args(argv)
    summary = []
    for name, call in steps(args.registry, args.tiny):
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
        print(f"  {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'}, {s:.0f} s")
    return 1 if any(rc for _, rc, _ in summary) else 0


if __name__ == "__main__":
    raise SystemExit(main())
