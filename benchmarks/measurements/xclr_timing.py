"""Time per training step of X-CLR against SimCLR, side by side in one process (X-CLR Table 4).

Both methods train the same encoder (the ``cpu`` vision profile: small ConvNet, CIFAR-sized images, batch 256,
Adam) on the same uint8 batch, augmented on every step as in training; X-CLR's class graph (the caption graph
of the packaged sentence-transformers model) is computed once before timing, as the paper precomputes it. Rounds
alternate the two methods (in ABBA order), so drift of a shared machine hits both alike; each round gives each method's mean
seconds per step over ``--steps`` steps (after one warm-up step). The result is a registry row (task
``xclr-step-time``, headline ``ratio`` = X-CLR / SimCLR median seconds per step, every round's value kept) that
``benchmarks/tables/xclr.py`` renders and judges.

    suite bench xclr-timing --steps 4 --repeats 16 --seed 0
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

import torch

TASK = "xclr-step-time"
XCLR_HPARAMS = {"temperature": 0.5, "target_temperature": 0.1}  # the grid's X-CLR (benchmarks/suites/xclr.yaml)


def measure(steps: int = 8, repeats: int = 5, batch_size: int = 256, width: int = 16, seed: int = 0,
            xclr_hparams: dict[str, Any] | None = None, text_model: str = "") -> dict[str, float]:
    """{"simclr_s_per_step", "xclr_s_per_step" (medians over rounds), "ratio", "simclr_round_<k>",
    "xclr_round_<k>"} in seconds per step."""
    from suite.presets import make_loss
    from vision.data import CIFAR10_CLASSES
    from vision.graph import class_graph
    from vision.methods import SimCLR
    from vision.models import build_encoder
    from vision.transforms import ViewAugment, get_recipe

    if steps < 1 or repeats < 1 or batch_size < 2:
        raise ValueError(f"steps and repeats must be >= 1 and batch_size >= 2, got {steps}, {repeats}, {batch_size}")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    recipe = get_recipe("cifar", 0)
    augment = ViewAugment(recipe, views=2)
    x = torch.randint(0, 256, (batch_size, 3, 32, 32), dtype=torch.uint8, generator=gen)
    y = torch.randint(0, len(CIFAR10_CLASSES), (batch_size,), generator=gen)
    graph = class_graph(CIFAR10_CLASSES, text_model)  # precomputed once (X-CLR App. A.3.2)
    enc = build_encoder("convnet", width, recipe.size, 128)
    methods = {
        "simclr": SimCLR(copy.deepcopy(enc), make_loss("simclr", "infonce", {}).loss),
        "xclr": SimCLR(copy.deepcopy(enc), make_loss("simclr", "xclr", dict(xclr_hparams or XCLR_HPARAMS)).loss, graph),
    }
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=1e-6) for k, m in methods.items()}

    def step(name: str) -> None:
        out = augment(x)  # views (2, N, 3, 32, 32), as in training
        value = methods[name](out.views, labels=y, iou=out.iou)
        opts[name].zero_grad(set_to_none=True)
        value.backward()
        opts[name].step()
        float(value.detach())

    for name in methods:  # warm-up
        step(name)
    rounds: dict[str, list[float]] = {k: [] for k in methods}
    for r in range(repeats):  # ABBA order: a drift of the machine's speed within a round hits both alike
        for name in (list(methods) if r % 2 == 0 else list(methods)[::-1]):
            t0 = time.perf_counter()
            for _ in range(steps):
                step(name)
            rounds[name].append((time.perf_counter() - t0) / steps)
    out = {f"{k}_s_per_step": statistics.median(v) for k, v in rounds.items()}
    out["ratio"] = out["xclr_s_per_step"] / out["simclr_s_per_step"]
    out.update({f"{k}_round_{i}": v for k, vs in rounds.items() for i, v in enumerate(vs)})
    return out


def main(args: argparse.Namespace) -> int:
    from benchmarks.measurements.measured import Measurement, record
    from suite.registry import Registry

    torch.set_num_threads(max(1, torch.get_num_threads()))
    m = measure(args.steps, args.repeats, args.batch_size, args.width, args.seed)
    config = {"steps": args.steps, "repeats": args.repeats, "batch_size": args.batch_size, "encoder": "convnet",
              "width": args.width, "framework": "simclr", "xclr_hparams": XCLR_HPARAMS, "graph": "captions",
              "threads": torch.get_num_threads(), "seed": args.seed}
    if not args.no_registry:
        record(Registry(), Measurement(TASK, "cifar10", "xclr", config, m, "ratio", seed=args.seed,
                                       loss_hparams=XCLR_HPARAMS))
    print(f"SimCLR {m['simclr_s_per_step']:.3f} s/step, X-CLR {m['xclr_s_per_step']:.3f} s/step, "
          f"ratio {m['ratio']:.3f} (batch {args.batch_size}, {torch.get_num_threads()} thread(s))")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("xclr-timing", help="time per step of X-CLR against SimCLR in one process (X-CLR Table 4); "
                                            "records a registry row")
    p.add_argument("--steps", type=int, default=8, help="timed steps per method per round")
    p.add_argument("--repeats", type=int, default=5, help="rounds (the methods alternate)")
    p.add_argument("--batch-size", dest="batch_size", type=int, default=256)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-registry", dest="no_registry", action="store_true")
    p.set_defaults(func=main)
