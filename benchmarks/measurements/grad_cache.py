"""``suite bench grad-cache``: peak memory and step time with and without gradient caching
(``grad_cache_chunk``), one optimiser step per fresh process, at several batch sizes, for unsupervised SimCSE
on the packaged MiniLM (max length 32, two dropout views, infonce) and SimCLR with the CIFAR ResNet-18 (32 x 32
images, two augmented views, infonce). Every cell is recorded in the registry (task ``grad-cache``) and ``benchmarks/results/grad_cache.md`` is rendered
from those rows alone (:func:`table`).

Peak memory is the process's peak RSS growth during the step (peak reset before it, ``suite.memory``; model and
data already loaded); time is the step's wall time after one warm-up step at a small batch. Every cell runs
under an address-space limit (``--limit-gib``, default 18 GiB on this 24 GB machine, so a cell that does not
fit fails with an allocation error instead of taking the machine down); such cells are reported as not
fitting. Targets (issue): at batch 1024, chunk 64 uses at most a quarter of the full batch's memory at most
1.4x its time (two forward passes: 1.33x); batch 4096 trains with caching where the full batch does not fit.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.measurements.measured import Measurement, latest, one, record, versions_line
from benchmarks.paths import LOCAL
from suite.registry import markdown_table

RESULTS = Path(__file__).resolve().parents[1] / "results" / "grad_cache.md"
OUT = RESULTS  # the file :func:`table` renders (benchmarks/report.py: TABLES)
ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json, sys, torch
torch.set_num_threads(int(sys.argv[4]))
from suite.train import Engine
model, batch, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if model == "simcse":
    from suite.presets import make_loss
    from text.methods.simcse import SimCSEConfig, simcse_step as _step
    from text.models.encoder import build_encoder
    cfg = SimCSEConfig(batch_size=batch, grad_cache_chunk=chunk, pooling="mean", dropout=0.1)
    enc = build_encoder("default", "mean", True, False, 0.1)
    loss = make_loss("text", "infonce").loss
    words = ("the a cat dog sat on mat ran fast slow red blue green house tree car road city river hill man woman "
             "child book read wrote sang song long short day night").split()
    g = torch.Generator().manual_seed(0)
    data = [" ".join(words[i] for i in torch.randint(0, len(words), (24,), generator=g).tolist()) for _ in range(batch)]
    eng = Engine(enc, torch.optim.AdamW(enc.parameters(), lr=3e-5), device="cpu")
    small = SimCSEConfig(batch_size=8, grad_cache_chunk=0)
    step = lambda idx, c: _step(eng.ddp, enc, loss, data, idx, c, 2, None, torch.device("cpu"))
    args = (torch.arange(min(8, batch)), small), (torch.arange(batch), cfg)
else:
    from vision.config import PretrainConfig
    from vision.data import ImageData
    from vision.transforms import ViewAugment, get_recipe
    from vision.train import build_method, step_output
    cfg = PretrainConfig(dataset="cifar10", encoder="resnet18", batch_size=batch, grad_cache_chunk=chunk, loss="infonce")
    recipe = get_recipe("cifar", 0)
    x = torch.randint(0, 256, (batch, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    y = torch.arange(batch) % 10
    method = build_method(cfg, ImageData("cifar10", x[:2], y[:2], x[:2], y[:2], [str(i) for i in range(10)]), recipe)
    augment = ViewAugment(recipe, 2)
    eng = Engine(method, torch.optim.Adam(method.parameters(), lr=1e-3), device="cpu")
    step = lambda idx, c: step_output(eng.ddp, method, augment(x[idx]), y[idx], c)
    args = (torch.arange(min(8, batch)), 0), (torch.arange(batch), chunk)
eng.backward(step(*args[0]))  # warm-up
from suite.measure import rss_growth
print(json.dumps(rss_growth(lambda: eng.backward(step(*args[1])))))
"""


def measure(model: str, batch: int, chunk: int, threads: int, limit_gib: float) -> dict[str, Any]:
    """One step of ``model`` ("simcse" | "resnet18") in a fresh process under an address-space limit."""
    import resource

    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    cap = int(limit_gib * 2**30)
    out = subprocess.run([sys.executable, "-c", _SCRIPT, model, str(batch), str(chunk), str(threads)],
                         capture_output=True, text=True, env=env, cwd=ROOT,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["killed"])[-1]
        fits = not any(k in last.lower() for k in ("alloc", "memory", "killed"))
        return {"error": last, "oom": not fits}
    return json.loads(out.stdout.strip().splitlines()[-1])


MODELS = {"simcse": "Unsupervised SimCSE, packaged all-MiniLM-L6-v2, max length 32 (24-word sentences), two dropout "
                    "views, infonce, AdamW",
          "resnet18": "SimCLR, CIFAR ResNet-18 on 32 x 32 images (random pixels), two augmented views (the cifar "
                      "recipe), infonce, Adam; BatchNorm sees chunks under caching"}


def check_args(models: tuple[str, ...], batches: tuple[int, ...], chunk: int, threads: int, limit_gib: float,
               out: Path) -> None:
    """Every setting of a measurement checked before any process starts (a ValueError naming the flag): batches
    >= 1, a chunk >= 1 below every batch (chunk 0 is the full batch, so both columns would be one measurement; a
    chunk of the whole batch caches nothing), threads >= 1, a finite address-space limit > 0, known models, and an
    --out file whose folder exists (a missing folder used to fail after every measurement)."""
    import math

    unknown = [m for m in models if m not in MODELS]
    if not models or unknown:
        raise ValueError(f"--models: unknown {unknown or 'none given'}; choose from {', '.join(MODELS)}")
    if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
        raise ValueError(f"--batches must be integers >= 1, got {' '.join(map(str, batches)) or 'none'}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"--chunk must be an integer >= 1 (samples per chunk under caching), got {chunk}")
    if chunk >= min(batches):
        raise ValueError(f"--chunk {chunk} must be smaller than every batch (a chunk of the whole batch caches "
                         f"nothing), got --batches {' '.join(map(str, batches))}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"--threads must be an integer >= 1, got {threads}")
    if not isinstance(limit_gib, (int, float)) or not math.isfinite(limit_gib) or limit_gib <= 0:
        raise ValueError(f"--limit-gib must be a number of GiB > 0, got {limit_gib}")
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give the table's file name")
    if not out.parent.is_dir() and out.parent != LOCAL:  # the default folder is made when the table is written
        raise ValueError(f"--out {out}: folder {out.parent} not found")


def run(models: tuple[str, ...], batches: tuple[int, ...], chunk: int, threads: int, limit_gib: float,
        out: Path = RESULTS, registry: Any = None) -> str:
    """Measure every (model, batch, chunk) cell, record each in ``registry`` (task ``grad-cache``; None: a temporary
    registry, for a try-out's own table), then write :func:`table` of it to ``out``."""
    import tempfile

    from suite.registry import Registry

    check_args(models, batches, chunk, threads, limit_gib, out)
    with tempfile.TemporaryDirectory() as tmp:
        reg = registry if registry is not None else Registry(str(Path(tmp) / "registry.sqlite"))
        for model in models:
            for b in batches:
                for c in (0, chunk):
                    r = measure(model, b, c, threads, limit_gib)
                    print(f"  {model} batch {b:5d} chunk {c or 'none':>4} {r}", flush=True)
                    record(reg, Measurement(  # recorded before the table is written
                        "grad-cache", f"{model}-batch{b}", "infonce",
                        {"model": model, "batch": b, "chunk": c, "threads": threads, "limit_gib": limit_gib},
                        {"fits": float("error" not in r), "oom": float(bool(r.get("oom"))),
                         **{k: float(r[k]) for k in ("rss_growth_mib", "s") if k in r}},
                        "rss_growth_mib" if "error" not in r else "fits"))
        text = table(reg, allow_dirty=registry is None)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def table(registry: Any, allow_dirty: bool = False) -> str:
    """``grad_cache.md`` from the registry alone: per model, the newest committed ``grad-cache`` run per (batch,
    chunk); the full batch (chunk 0) beside the newest chunk measured for that model. Ratios are computed here."""
    cells = latest(registry, "grad-cache", lambda m: (m.config["model"], m.config["batch"], m.config["chunk"]),
                   allow_dirty)
    lines = ["# Gradient caching (generated by `suite bench grad-cache`)", ""]
    if not cells:
        return "\n".join(lines + ["No committed `grad-cache` runs in the registry yet: `suite bench run grad-cache` "
                                   "records them.", ""])
    runs = list(cells.values())
    newest = {}  # model -> the chunk of its newest cached run
    for (model, _, c), m in sorted(cells.items(), key=lambda kv: kv[1].row["started_at"]):
        if c:
            newest[model] = c
    chunks = one(newest.values()) or "-"
    limits = one(f"{m.config['limit_gib']:g}" for m in runs)
    lines += [f"One optimiser step per fresh process on the CPU, torch threads {one(m.config['threads'] for m in runs)}, "
              f"chunk = {chunks} samples "
              f"(all views of a sample in its chunk), every process under a {limits} GiB address-space limit "
              f"(the machine has 24 GB). Peak RSS growth of the step (MiB) and its wall time (s). Targets at batch "
              f"1024: memory ratio <= 0.25, time ratio <= 1.4; at 4096 caching trains where the full batch does not "
              f"fit.", "", versions_line(runs), ""]

    def cell(m: Any, key: str, fmt: str) -> str:
        if m is None:
            return "not run"
        if not m.metrics.get("fits"):
            return f"does not fit in {m.config['limit_gib']:g} GiB" if m.metrics.get("oom") else "failed"
        return format(m.metrics[key], fmt)

    order = [m for m in MODELS if any(k[0] == m for k in cells)] + sorted({k[0] for k in cells} - set(MODELS))
    for model in order:
        chunk = newest.get(model, 0)
        rows = []
        for b in sorted({k[1] for k in cells if k[0] == model}):
            full, cached = cells.get((model, b, 0)), cells.get((model, b, chunk)) if chunk else None
            mem_ratio = time_ratio = "-"
            if full and cached and full.metrics.get("fits") and cached.metrics.get("fits") and \
                    full.metrics["rss_growth_mib"] > 0:
                mem_ratio = f"{cached.metrics['rss_growth_mib'] / full.metrics['rss_growth_mib']:.2f}"
                time_ratio = f"{cached.metrics['s'] / full.metrics['s']:.2f}"
            rows.append([b, cell(full, "rss_growth_mib", ".0f"), cell(cached, "rss_growth_mib", ".0f"), mem_ratio,
                         cell(full, "s", ".1f"), cell(cached, "s", ".1f"), time_ratio])
        lines += [f"## {model}", "", MODELS.get(model, model) + ".", "",
                  markdown_table(["batch", "full MiB", f"chunk {chunk} MiB", "memory ratio", "full s", f"chunk {chunk} s",
                                  "time ratio"], rows), ""]
    return "\n".join(lines)


def register(sub: Any) -> None:
    p = sub.add_parser("grad-cache", help="step memory and time with and without gradient caching (SimCSE, ResNet-18)")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--threads", type=int, default=max(1, torch.get_num_threads()))
    p.add_argument("--limit-gib", type=float, default=18.0, help="address-space limit of every measured process")
    p.add_argument("--out", type=Path, default=None, help="default: results/tables/grad_cache.md (the committed one "
                   "is rebuilt from the snapshot by suite bench report)")
    p.add_argument("--no-registry", action="store_true", help="do not record the measurements in the registry")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from benchmarks.paths import results_target
    from suite.registry import Registry

    reg = None if args.no_registry else Registry()
    out = results_target(args.out, RESULTS, reg)
    print(run(tuple(args.models), tuple(args.batches), args.chunk, args.threads, args.limit_gib, out, reg))
    return 0
