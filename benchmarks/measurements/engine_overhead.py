"""Step overhead of the training driver on the smallest step of the suite (MUTAG GraphCL, batch 128).

The drivers run the same pre-collated batches and the same step (two views, GIN 3 x 32, GraphCL
loss): a bare hand-written loop, :class:`suite.train.Engine` without a registry run, the Engine writing its step
curves to a real SQLite registry run every ``log_every`` (50) steps (the cost of the curves), and Hugging Face
Accelerate (if installed; Lightning Fabric is not). Prints ms per step (median of ``--repeats`` rounds).

    python -m benchmarks.measurements.engine_overhead --steps 200
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

import torch


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dataset", default="MUTAG")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from graph.augment import build_augmentation
    from graph.tu.data import load_tu
    from graph.tu.graphcl import MultiViewModel, collate
    from graph.tu.presets import resolve
    from graph.tu.model import GraphCLModel
    from suite.losses import apply_loss
    from suite.train import Engine, epoch_batches

    data = load_tu(args.dataset)
    loss, mode, _ = resolve("graphcl", {}, None)
    aug = build_augmentation("random4", 0.2)
    batches = [collate(data, idx) for idx in epoch_batches(len(data.graphs), 128, 0, 0)]
    gen = torch.Generator().manual_seed(0)
    views = [[b] + [aug(b, gen)] for b in batches]  # fixed views: only the driver differs

    def fresh() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        mv = MultiViewModel(GraphCLModel(data.num_features, 32, 3))
        return mv, torch.optim.Adam(mv.parameters(), lr=0.01)

    def bare() -> float:
        mv, opt = fresh()
        t = time.perf_counter()
        for i in range(args.steps):
            value = apply_loss(loss, mv(views[i % len(views)]))
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
            float(value.detach())  # the loss is logged in every driver
        return (time.perf_counter() - t) / args.steps * 1e3

    def engine() -> float:
        mv, opt = fresh()
        eng = Engine(mv, opt, device="cpu", loss=loss)
        t = time.perf_counter()
        eng.fit(lambda ep: list(range(len(views))), lambda i: apply_loss(loss, eng.ddp(views[i])),
                max_steps=args.steps, size=lambda i: 128, log_epochs=False)
        return (time.perf_counter() - t) / args.steps * 1e3

    def engine_curves() -> float:  # the Engine as a run drives it: a point of the step curves every log_every steps
        import tempfile

        from suite.registry import Registry
        from suite.registry.store import Run

        mv, opt = fresh()
        reg = Registry(str(Path(tempfile.mkdtemp()) / "r.sqlite"))
        run = Run(reg, reg.start_run(modality="graph", task="overhead", dataset=args.dataset, loss="graphcl"))
        eng = Engine(mv, opt, device="cpu", loss=loss, run=run)
        t = time.perf_counter()
        eng.fit(lambda ep: list(range(len(views))), lambda i: apply_loss(loss, eng.ddp(views[i])),
                max_steps=args.steps, size=lambda i: 128, log_epochs=False)
        return (time.perf_counter() - t) / args.steps * 1e3

    def accelerate() -> float:
        from accelerate import Accelerator

        mv, opt = fresh()
        acc = Accelerator(cpu=True)
        mv, opt = acc.prepare(mv, opt)
        t = time.perf_counter()
        for i in range(args.steps):
            value = apply_loss(loss, mv(views[i % len(views)]))
            opt.zero_grad(set_to_none=True)
            acc.backward(value)
            opt.step()
            float(value.detach())
        return (time.perf_counter() - t) / args.steps * 1e3

    drivers: dict[str, Callable[[], float]] = {"bare loop": bare, "suite Engine": engine,
                                               "Engine + curves": engine_curves}
    try:
        import accelerate as _  # noqa: F401
        drivers["accelerate"] = accelerate
    except ImportError:
        pass
    res: dict[str, list[float]] = {k: [] for k in drivers}
    for _r in range(args.repeats):  # interleaved rounds: drift of the machine hits every driver alike
        for k, f in drivers.items():
            res[k].append(f())
    out = {k: statistics.median(v) for k, v in res.items()}
    base = out["bare loop"]
    for k, v in out.items():
        print(f"{k:15s} {v:7.3f} ms/step  ({(v - base) / base * 100:+.1f} % vs bare)")
    return out


if __name__ == "__main__":  # pragma: no cover
    main()
