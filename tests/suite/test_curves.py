"""Step curves (issue 51): the engine logs a point every ``log_every`` optimiser steps from the values it reads anyway
(no extra host read), a resumed run continues its curve without a duplicate or a gap, `suite results plot` draws them,
and a 100-epoch CIFAR-10 run at the default interval adds well under 5 MB to the registry."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from suite.losses import build as build_loss
from suite.registry import Registry
from suite.train.engine import LOG_EVERY
from suite.train.run import Task, Training, run


@dataclass
class CurveConfig:
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every")
    epochs: int = 2
    seed: int = 0
    out: str = ""
    device: str = "cpu"
    checkpoint_every: int = 1
    lr: float = 0.05


class CurveTask(Task[CurveConfig]):
    modality, name, primary = "toy", "toy-curves", ("alignment", "test")

    def __init__(self, stop_at_step: int | None = None) -> None:
        self.stop_at_step, self.losses = stop_at_step, {}

    def build(self, cfg: CurveConfig, ctx: Any) -> Training:
        x = torch.randn(64, 8, generator=ctx.generator("data", per_rank=False))
        model, loss = nn.Linear(8, 4), build_loss("macl")
        engine = lambda: ctx.engine  # noqa: E731

        def step(idx: torch.Tensor) -> torch.Tensor:
            value = loss(model(x[idx]), model(x[idx] + 0.1))
            self.losses[engine().step + 1] = (float(value.detach()), float(loss.tau_a))
            return value

        def on_step() -> None:
            if engine().step == self.stop_at_step:
                raise KeyboardInterrupt("stopped")

        return Training(model, torch.optim.SGD(model.parameters(), lr=cfg.lr), lambda ep: ctx.epoch_batches(64, 16, ep),
                        step, epochs=cfg.epochs, loss=loss, log_every=3, on_step=on_step)

    def evaluate(self, cfg: CurveConfig, ctx: Any, training: Training) -> dict[str, float]:
        return {"alignment": 0.5}


def _curve(reg: Registry, run_id: str, name: str) -> list[tuple[int, float]]:
    return sorted((m["step"], m["value"]) for m in reg.metrics(run_id, name) if m["split"] == "train-step")


def test_a_point_every_interval_from_the_read_values(tmp_path: Path) -> None:
    """8 steps (2 epochs of 4), log_every 3 -> points at steps 3, 6 (across the epochs' boundary) and 8 (the training's
    end); each the mean of the losses and of MACL's temperature over its steps; the learning rate, the rate and the
    gradient norm beside them"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    task = CurveTask()
    res = run(task, CurveConfig(out=str(tmp_path / "run")), registry=reg)
    loss = _curve(reg, res.run_id, "loss")
    assert [s for s, _ in loss] == [3, 6, 8]
    windows = {3: (1, 2, 3), 6: (4, 5, 6), 8: (7, 8)}
    for step, value in loss:
        want = sum(task.losses[i][0] for i in windows[step]) / len(windows[step])
        assert math.isclose(value, want, rel_tol=1e-6), step
    tau = dict(_curve(reg, res.run_id, "tau"))
    assert math.isclose(tau[6], sum(task.losses[i][1] for i in (4, 5, 6)) / 3, rel_tol=1e-6)
    for name in ("lr", "items_per_s", "grad_norm"):
        assert [s for s, _ in _curve(reg, res.run_id, name)] == ([3, 6] if name == "grad_norm" else [3, 6, 8]), name
    assert all(v == 0.05 for _, v in _curve(reg, res.run_id, "lr"))


def test_a_resumed_run_continues_its_curve(tmp_path: Path) -> None:
    """interrupted at step 7 (its checkpoint: step 4, the first epoch's end; points logged at 3 and 6), then resumed
    -> the curve holds each of 3, 6 and 8 once: the interrupted process's point at 6 was dropped and logged again (the
    mean of steps 5 and 6: the checkpoint holds no open interval)"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    cfg = CurveConfig(out=str(tmp_path / "run"))
    try:
        run(CurveTask(stop_at_step=7), cfg, registry=reg)
    except KeyboardInterrupt:
        pass
    (first,) = reg.runs(task="toy-curves")
    assert [s for s, _ in _curve(reg, first["id"], "loss")] == [3, 6]
    task = CurveTask()
    res = run(task, cfg, registry=reg)
    assert res.run_id == first["id"] and res.resumed_from == 1
    curve = dict(_curve(reg, res.run_id, "loss"))
    assert list(curve) == [3, 6, 8]
    assert math.isclose(curve[6], (task.losses[5][0] + task.losses[6][0]) / 2, rel_tol=1e-6)


def test_results_plot_draws_the_curves(tmp_path: Path) -> None:
    """two runs -> one PNG and one SVG figure; a run without step curves is one clear line"""
    import pytest

    from suite.cli import main

    reg_path = tmp_path / "r.sqlite"
    reg = Registry(str(reg_path))
    ids = [run(CurveTask(), CurveConfig(out=str(tmp_path / f"run{s}"), seed=s), registry=reg).run_id for s in (0, 1)]
    for ext in ("png", "svg"):
        out = tmp_path / f"curves.{ext}"
        assert main(["results", "plot", *ids, "--metric", "loss", "--out", str(out), "--registry", str(reg_path)]) == 0
        assert out.stat().st_size > 1000
    with pytest.raises(ValueError, match="no 'acc' curve"):
        from suite.cli import _plot

        import argparse
        _plot(argparse.Namespace(out=str(tmp_path / "x.png"), registry=str(reg_path), split=None, metric="acc"), ids[:1])


def test_a_long_run_adds_little_to_the_registry(tmp_path: Path) -> None:
    """a point of 8 metrics (loss, 3 diagnostics, lr, rate, gradient norm, memory) measured in a real registry: the
    points of a 100-epoch CIFAR-10 run (97 steps an epoch at batch 512) at the default interval stay under 5 MB"""
    path = tmp_path / "r.sqlite"
    reg = Registry(str(path))
    with reg.run(modality="toy", task="t", dataset="d", loss="l", seed=0) as r:
        before = path.stat().st_size
        for step in range(1, 501):
            r.log_many({k: 1.0 / step for k in ("loss", "tau", "alignment", "tau_clamped", "lr", "images_per_s",
                                                 "grad_norm", "gpu_mem_mb")}, split="train-step", step=step)
        per_point = (path.stat().st_size - before) / 500
    points = 100 * math.ceil(97 / LOG_EVERY) + 100  # an interval's points and each epoch's last
    assert points * per_point < 5 * 2**20, (points, per_point)


@dataclass
class TrackedConfig(CurveConfig):
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every", "log_to")
    log_to: str = ""


def test_tensorboard_reads_back_the_curves(tmp_path: Path) -> None:
    """--log-to tensorboard -> event files in the run folder that TensorBoard's own EventAccumulator reads: the same
    loss points as the registry's, at the same steps"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reg = Registry(str(tmp_path / "r.sqlite"))
    res = run(CurveTask(), TrackedConfig(out=str(tmp_path / "run"), log_to="tensorboard"), registry=reg)
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    got = [(e.step, e.value) for e in acc.Scalars("train-step/loss")]
    want = _curve(reg, res.run_id, "loss")
    assert [s for s, _ in got] == [s for s, _ in want] == [3, 6, 8]
    assert all(math.isclose(a, b, rel_tol=1e-6) for (_, a), (_, b) in zip(got, want))
    assert "train-step/tau" in acc.Tags()["scalars"]


def test_a_failing_tracker_costs_a_warning_not_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    """the tracker's writer raises (a full disk) at its first point -> one warning naming it; the run finishes and
    its registry row holds the whole curve"""
    import pytest

    from suite.train import trackers

    def broken(self: Any, point: dict, step: int, split: str | None = None) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(trackers.TensorBoard, "log", broken)
    reg = Registry(str(tmp_path / "r.sqlite"))
    with pytest.warns(UserWarning, match="tracker tensorboard failed .*No space left"):
        res = run(CurveTask(), TrackedConfig(out=str(tmp_path / "run"), log_to="tensorboard"), registry=reg)
    assert reg.get(res.run_id)["status"] == "finished"
    assert [s for s, _ in _curve(reg, res.run_id, "loss")] == [3, 6, 8]


def test_an_unknown_or_missing_tracker_is_one_line_before_anything_is_built(tmp_path: Path, monkeypatch: Any) -> None:
    import builtins

    import pytest

    with pytest.raises(ValueError, match="unknown tracker 'mlflw'"):
        run(CurveTask(), TrackedConfig(out=str(tmp_path / "a"), log_to="mlflw"), registry=False)
    real = builtins.__import__

    def no_tensorboard(name: str, *a: Any, **k: Any) -> Any:
        if name == "tensorboard":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ValueError, match=r"pip install 'contrastive-suite\[tensorboard\]'"):
        run(CurveTask(), TrackedConfig(out=str(tmp_path / "b"), log_to="tensorboard"), registry=False)
    assert not (tmp_path / "b" / "checkpoints").exists()


def test_tensorboard_receives_every_point_the_registry_logs(tmp_path: Path) -> None:
    """issue 69, case 4: a 3-epoch run -> TensorBoard holds every (split, metric) the registry logged, each under its
    split and at the registry's steps: the three epochs' training loss (``train/loss`` at 1, 2, 3: a curve even for a
    run shorter than log_every steps), the step points and the evaluation (``test/alignment``)"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reg = Registry(str(tmp_path / "r.sqlite"))
    res = run(CurveTask(), TrackedConfig(epochs=3, out=str(tmp_path / "run"), log_to="tensorboard"), registry=reg)
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    logged: dict[str, list[tuple[int, float]]] = {}
    for m in reg.metrics(res.run_id):
        logged.setdefault(f"{m['split']}/{m['name']}", []).append((m["step"], m["value"]))
    assert {"train/loss", "train-step/loss", "test/alignment"} <= set(logged)
    assert set(logged) <= set(acc.Tags()["scalars"])
    for tag, points in logged.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == sorted(s for s, _ in points), tag
        assert all(math.isclose(a, b, rel_tol=1e-6) for (_, a), (_, b) in zip(got, sorted(points))), tag
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3]
