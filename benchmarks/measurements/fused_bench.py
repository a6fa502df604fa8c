"""The tiled path on a GPU: dense, today's PyTorch tiles and the fused Triton kernels, forward + backward, recorded in
the registry (task ``loss-bench-gpu``) for the GPU section of ``benchmarks/results/losses_large.md``.

    python -m benchmarks.measurements.fused_bench [--sizes 8192,32768,131072,1048576] [--budget-s 300]

For every loss whose tiled path takes the kernels (``fused_tiles`` yes or part) and each 2N: the dense path, the
PyTorch tiles (``SUITE_FUSED=off``), and the kernels in fp32 and bf16 (InfoNCE in tf32 too), d = 128; InfoNCE,
t-SimCLR and CMC also on the kernels' general path (``fused-general``: without the symmetric and pair paths); beside them Inf-CL's kernel
(``inf_cl.cal_flash_loss``, where the package is installed: it is run, not copied) on the same 2N x 2N problem, and the
FLOP floor at the rate this device reaches in a large matrix product of each precision (measured here, cuBLAS). At
1,048,576 only the kernels run (one call each): InfoNCE in every precision, the other losses (X-CLR with its graph as
embeddings) in bf16, which shows their memory. Time: the median of ``--repeats`` calls after one warm-up call (the
kernels' autotuning happens in the warm-up call of each size class, 2N = 32,768 and above sharing one); memory:
the peak allocated above the inputs. ``--budget-s``: cells past the budget are skipped, and said so, not
recorded. It needs CUDA; elsewhere it says so and exits 0.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time
import traceback
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.measurements.loss_tables import LARGE_TASKS
from suite.losses.examples import example_inputs
from suite.losses.tiling import auto_rows  # the tiled paths' rows per tile, given explicitly: a loss whose own matrix
# is smaller (the uniformity term's N x N) still takes the tiles it is measured on
from suite.measure import device_info, step, sync

TASK = LARGE_TASKS["gpu"]
D = 128
SIZES = (8192, 32768, 131072, 1048576)
PRECISIONS = ("fp32", "tf32", "bf16")
HUGE = 1048576
GENERAL = ("infonce", "tsimclr", "cmc")  # measured on the general path too: a dot and a distance kernel, view pairs
MODE_OF_PATH = {"tiled": "off", "fused-general": "general"}  # fused.use's mode per path (else "auto")


def fused_losses() -> list[str]:
    import suite.losses as L

    return [n for n in L.available() if n not in L.plugins() and L.loss_class(n).fused_tiles != "no"]


def matmul_rates(device: torch.device, size: int = 8192) -> dict[str, float]:
    """TFLOP/s of a ``size``^3 matrix product in each precision on this device (the floor's rate)."""
    out = {}
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for prec in PRECISIONS:
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            x, y = (a.bfloat16(), b.bfloat16()) if prec == "bf16" else (a, b)
            x @ y
            sync(device)
            t0 = time.perf_counter()
            for _ in range(5):
                x @ y
            sync(device)
            out[prec] = 5 * 2 * size**3 / (time.perf_counter() - t0) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return out


def call(name: str, n: int, device: torch.device, path: str, precision: str
         ) -> tuple[Callable[[], Tensor], list[Tensor]]:
    """(forward, leaves) of ``name`` at 2N = ``n`` on ``path``: dense, tiled (PyTorch tiles), fused or inf-cl."""
    import suite.losses as L

    gen = torch.Generator().manual_seed(0)
    if path == "inf-cl":
        from inf_cl import cal_flash_loss

        a, b = example_inputs("infonce", n // 2, D, generator=gen, device=device).args

        def infcl() -> Tensor:  # InfoNCE over the 2N x 2N problem (its kernels: one direction, every column)
            z = F.normalize(torch.cat([a, b]), dim=1)
            labels = torch.cat([torch.arange(n // 2, n), torch.arange(n // 2)]).to(device)
            return cal_flash_loss(z, z, labels, scale=10.0, head_dim=D).mean()
        return infcl, [a, b]
    loss = L.build(name, chunk_size=None if path == "dense" else auto_rows(n), precision=precision).to(device)
    ex = example_inputs(name, n // 2, D, views=3, classes=100, graph="matrix" if path == "dense" else "embeddings",
                        generator=gen, device=device)
    return ex.call(loss), ex.leaves


def measure(fn: Callable[[], Tensor], leaves: list[Tensor], device: torch.device, repeats: int,
            fused_mode: str, warm_up: bool = True) -> dict[str, float]:
    from suite.losses import fused

    times, peak = [], 0.0
    for i in range(int(not warm_up), 1 + repeats):
        dt, above = step(fn, leaves, device, lambda: fused.use(fused_mode))
        if i:  # the warm-up call's peak is left out: it holds the autotuner's 256 MB buffer, not the loss's memory
            times.append(dt)
            peak = max(peak, above)
    return {"ms": 1e3 * statistics.median(times or [math.nan]), "peak_mb": peak}


def precision_errors(device: torch.device, n: int = 8192) -> dict[str, dict[str, float]]:
    """Relative error of InfoNCE's value and gradient on the kernels, per precision, against float64 dense."""
    import suite.losses as L

    gen = torch.Generator().manual_seed(4)
    a64, b64 = (torch.randn(n // 2, D, generator=gen, dtype=torch.float64).to(device).requires_grad_()
                for _ in range(2))
    ref = L.build("infonce", chunk_size=None)(a64, b64)
    ref_g = torch.autograd.grad(ref, [a64, b64])
    out = {}
    for prec in PRECISIONS:
        a, b = (t.detach().float().requires_grad_() for t in (a64, b64))
        v = L.build("infonce", chunk_size=auto_rows(n), precision=prec)(a, b)
        g = torch.autograd.grad(v, [a, b])
        out[prec] = {"loss_rel_err": abs(float(v) - float(ref)) / abs(float(ref)),
                     "grad_rel_err": max(float((x.double() - y).norm() / y.norm()) for x, y in zip(g, ref_g))}
    return out


def flops(name: str, n: int) -> float:
    """The products of InfoNCE's kernels at 2N = n: four passes over the 2N x 2N matrix (NaN for other losses)."""
    return 4 * 2.0 * n * n * D if name in ("infonce", "inf-cl") else math.nan


def _record(registry: Any, name: str, config: dict[str, Any], metrics: dict[str, float]) -> None:
    from benchmarks.measurements.measured import Measurement, record

    record(registry, Measurement(TASK, f"{name}-{config['path']}-{config['precision']}", name, config,
                                 {k: float(v) for k, v in metrics.items()}, next(iter(metrics))))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.measurements.fused_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--losses", default="", help="comma-separated (default: every loss that takes the kernels)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--paths", default="dense,tiled,fused,fused-general,inf-cl", help="comma-separated: the paths to run")
    ap.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated: the kernels' precisions")
    ap.add_argument("--no-errors", action="store_true", help="skip the precision errors against float64")
    ap.add_argument("--registry", default=None, help="registry (default: $SUITE_REGISTRY)")
    ap.add_argument("--dry-run", action="store_true", help="the same cells on the CPU, the kernels under Triton's "
                    "interpreter, nothing recorded: tiny sizes only (the tests run the loop that a GPU runs)")
    args = ap.parse_args(argv)
    paths, wanted = set(args.paths.split(",")), set(args.precisions.split(","))
    names = [s for s in args.losses.split(",") if s] or fused_losses()
    unknown = [s for s in names if s not in fused_losses()]
    if unknown:
        ap.error(f"--losses: {', '.join(unknown)} do not take the kernels (those that do: {', '.join(fused_losses())})")
    if not (torch.cuda.is_available() or args.dry_run):
        print("fused-bench: no CUDA device here; nothing measured")
        return 0
    import triton

    from suite.losses import fused
    from suite.registry import Registry

    device = torch.device("cpu" if args.dry_run else "cuda")
    reg = None if args.dry_run else Registry(args.registry)
    info = {**device_info(device), "triton": triton.__version__, "d": D}
    with fused.interpret() if args.dry_run else contextlib.nullcontext():
        return _run(args, names, paths, wanted, device, reg, info)


def _run(args: argparse.Namespace, names: list[str], paths: set[str], wanted: set[str], device: torch.device,
         reg: Any, info: dict[str, Any]) -> int:
    """Every cell of :func:`main` (``reg`` None: printed, not recorded)."""
    dry = device.type == "cpu"
    rates = matmul_rates(device, 256 if dry else 8192)
    print("matmul TFLOP/s: " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()), flush=True)
    try:
        errs = {} if args.no_errors else precision_errors(device)
    except Exception:  # noqa: BLE001 - said, and the timings still run
        traceback.print_exc()
        errs = {}
    for prec, e in errs.items():
        print(f"precision {prec}: loss rel err {e['loss_rel_err']:.1e}, grad rel err {e['grad_rel_err']:.1e}", flush=True)
        if reg is not None:
            _record(reg, "infonce", {**info, "two_n": 8192, "path": "precision-error", "precision": prec}, e)
    try:
        import inf_cl  # noqa: F401
        has_infcl = not dry  # its kernels need CUDA
    except ImportError:
        has_infcl = False
        print("fused-bench: inf_cl is not installed: no Inf-CL column")
    t_start, skipped, failed = time.perf_counter(), [], []
    for n in (int(s) for s in args.sizes.split(",")):
        cells: list[tuple[str, str, str]] = []
        for name in names:
            precs = PRECISIONS if name == "infonce" else ("fp32", "bf16") if n < HUGE else ("bf16",)
            if n < HUGE:
                cells += [(name, "dense", "fp32"), (name, "tiled", "fp32")]
            cells += [(name, "fused", p) for p in precs]
            if name in GENERAL:  # the same kernels without the symmetric path (fused.use("general")): its gain
                cells += [(name, "fused-general", p) for p in precs]
        if has_infcl:
            cells.append(("inf-cl", "inf-cl", "tf32"))
        if n == HUGE:  # InfoNCE in fp32 first, then every loss's memory, then the other precisions and Inf-CL
            cells.sort(key=lambda c: (c != ("infonce", "fused", "fp32"), c[0] in ("infonce", "inf-cl")))
        for name, path, prec in cells:
            if path not in paths or (path.startswith("fused") and prec not in wanted):
                continue
            if time.perf_counter() - t_start > args.budget_s:
                skipped.append(f"{name} {path} {prec} 2N={n}")
                continue
            big = n > 32768
            reps = 1 if n == HUGE or (big and path == "tiled") else 2 if big else args.repeats
            warm = not big or (path == "fused" and n < HUGE)  # the kernels compile and tune at the first size
            cfg = {**info, "two_n": n, "path": path, "precision": prec, "repeats": reps}
            try:
                mode = MODE_OF_PATH.get(path, "interpret" if dry else "auto")
                m = measure(*call(name, n, device, path, prec), device, reps, mode, warm)
            except torch.cuda.OutOfMemoryError:
                m = {"ms": math.nan, "peak_mb": math.nan, "oom": 1.0}
            except Exception:  # noqa: BLE001 - a cell that fails is reported; the others are still measured
                failed.append(f"{name} {path} {prec} 2N={n}")
                traceback.print_exc()
                continue
            finally:
                torch.cuda.empty_cache()
            rate = rates["tf32" if path == "inf-cl" else prec if path.startswith("fused") else "fp32"]
            m["floor_ms"] = flops(name, n) / (rate * 1e12) * 1e3
            m["matmul_tflops"] = rate
            print(f"2N={n} {name} {path} {prec}: {m['ms']:.1f} ms, {m['peak_mb']:.0f} MB"
                  + (" (out of memory)" if m.get("oom") else ""), flush=True)
            if reg is not None:
                _record(reg, name, cfg, m)
    if skipped:
        print(f"fused-bench: {len(skipped)} cells past the budget, not measured: {'; '.join(skipped)}")
    if failed:
        print(f"fused-bench: {len(failed)} cells failed (tracebacks above): {'; '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
