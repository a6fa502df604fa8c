"""Reliability round five (issue 52): a user's loss at run time (class 1), GPU faults simulated on the CPU by raising
torch's own exception types from a patched call (class 2), damaged stores (class 4), and the issue's two named cases
(SimCSE without the STS-B dev file; a batch that does not fit on the GPU). Each fault ends in one line naming the loss,
file or value and the step; no finished row; the checkpoint before the fault kept; nothing overwritten."""
from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from suite.cli import main
from suite.registry import Registry
from tests.reliability.test_round_four import _one_line, _rows, tu  # noqa: F401 (fixture)
from tests.suite.test_user_losses import installed_package

ROOT = Path(__file__).resolve().parents[2]
STEP5 = "step 5 (epoch 2, batch 2)"  # 40 graphs in batches of 16: 3 steps an epoch, so step 5 is in the second

USER_LOSSES = textwrap.dedent('''
    import time

    import torch
    import torch.nn.functional as F
    from torch import nn

    K = 5  # the step at which each loss below goes wrong (its 5th call in training; the self-check runs a copy)


    class Good(nn.Module):
        def __init__(self, temperature: float = 0.5):
            super().__init__()
            self.temperature, self.calls = temperature, 0

        def value(self, z_a, z_b):
            a, b = F.normalize(z_a, dim=1), F.normalize(z_b, dim=1)
            logits = a @ b.T / self.temperature
            return F.cross_entropy(logits, torch.arange(len(a), device=a.device))

        def forward(self, z_a, z_b):
            self.calls += 1
            out = self.value(z_a, z_b)
            return self.fault(out, z_a, z_b) if self.calls == K else out

        def fault(self, out, z_a, z_b):
            return out


    class NaNAt(Good):
        def fault(self, out, z_a, z_b):
            return out * float("nan")


    class RaiseAt(Good):
        def fault(self, out, z_a, z_b):
            table = [0, 1, 2]
            return out * table[7]


    class IntAt(Good):
        def fault(self, out, z_a, z_b):
            return out.long()


    class VectorAt(Good):
        def fault(self, out, z_a, z_b):
            return (z_a - z_b).pow(2).sum(1)


    class NumberAt(Good):
        def fault(self, out, z_a, z_b):
            return float(out)


    class MetaAt(Good):
        def fault(self, out, z_a, z_b):
            return out.to("meta")


    class DetachedAt(Good):
        def fault(self, out, z_a, z_b):
            return out.detach()


    class InPlaceAt(Good):
        def fault(self, out, z_a, z_b):
            with torch.no_grad():
                z_a.clamp_(-1, 1)  # "harmless": but the encoder's backward reads z_a
            return out


    class Float64(Good):
        def value(self, z_a, z_b):
            return super().value(z_a.double(), z_b.double())


    class BadDiagnosticAt(Good):
        def diagnostics(self):
            return {"margin": "high" if self.calls == K else 0.5}


    class SlowAt(Good):
        def fault(self, out, z_a, z_b):
            time.sleep(60)
            return out
''')


@pytest.fixture()
def user_tu(tu, tmp_path):  # noqa: F811
    """The tiny `suite graph tu` run of round four for two epochs (3 steps each), with a user's loss file beside it."""
    args, db, folder = tu
    f = tmp_path / "my_losses.py"
    f.write_text(USER_LOSSES + f"# {tmp_path.name}\n")  # a file of its own (the suite caches a module by its sha)
    args = [a if a != "1" or args[i - 1] != "--epochs" else "2" for i, a in enumerate(args)]
    return args, db, folder, f


def _with_loss(args: list[str], spec: str) -> list[str]:
    return [*args, "--loss", spec]


def _kept_epoch_one(folder: Path) -> None:
    """The checkpoint of epoch 1 (step 3) is there and whole; none was written after the fault."""
    from suite.train.checkpoint import load_checkpoint

    names = sorted(p.name for p in (folder / "checkpoints").iterdir())
    assert names == ["step-000000003.pt"], names
    assert load_checkpoint(folder / "checkpoints" / names[0])["step"] == 3


def _failed_row(db: Path) -> dict:
    rows = _rows(db)
    assert [r["status"] for r in rows] == ["failed"], rows
    return rows[0]


# ----------------------------------------------------------------------------- class 1: a user's loss at run time

def test_user_loss_non_finite_at_step_k(user_tu, capsys):
    """a user's loss (file.py:Class) that passes its self-check and turns NaN at step 5 of `suite graph tu` -> exit 1,
    one line naming the loss and step 5 (epoch 2, batch 2), no traceback; the row failed, the epoch-1 checkpoint kept
    and nothing written after it (it was a FloatingPointError traceback, exit 1, without the loss's name)"""
    args, db, folder, f = user_tu
    assert main(_with_loss(args, f"{f}:NaNAt")) == 1
    err = _one_line(capsys)
    assert "loss became nan at " + STEP5 in err and f"{f}:NaNAt" in err, err
    _failed_row(db)
    _kept_epoch_one(folder)


def test_user_loss_raising_at_step_k(user_tu, capsys):
    """a user's loss that raises IndexError at step 5 -> exit 2; stderr ends with one line naming the loss, the error
    and step 5, and above it only the user's own traceback lines (their file and line), none of the suite's or torch's;
    the row failed, the epoch-1 checkpoint kept (it was the whole traceback through the engine, exit 1)"""
    args, db, folder, f = user_tu
    assert main(_with_loss(args, f"{f}:RaiseAt")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    last = err[-1]
    assert last.startswith("error: ") and f"{f}:RaiseAt" in last and "IndexError: list index out of range" in last, last
    assert STEP5 in last, last
    shown = "\n".join(err[:-1])
    assert str(f) in shown and "table[7]" in shown, shown
    assert "suite/" not in shown.replace(str(f), "") and "torch/" not in shown, shown
    _failed_row(db)
    _kept_epoch_one(folder)


@pytest.mark.parametrize("cls,needle", [("IntAt", "returned dtype torch.int64"),
                                        ("VectorAt", "returned a tensor of shape (16,)"),
                                        ("NumberAt", "returned float, not a tensor"),
                                        ("MetaAt", "returned a tensor on meta, but its inputs are on cpu"),
                                        ("DetachedAt", "without a gradient")])
def test_user_loss_returning_something_else_at_step_k(user_tu, capsys, cls, needle):
    """a user's loss that returns, at step 5 only, an integer tensor, a vector, a Python float, a tensor on another
    device (meta) or a detached value -> exit 2, one line naming the loss, what it returned and step 5; the row failed,
    the epoch-1 checkpoint kept (they were tracebacks from backward, or a detached value trained nothing silently)"""
    args, db, folder, f = user_tu
    assert main(_with_loss(args, f"{f}:{cls}")) == 2
    err = _one_line(capsys)
    assert needle in err and f"{f}:{cls}" in err and STEP5 in err, err
    _failed_row(db)
    _kept_epoch_one(folder)


def test_user_loss_returning_float64_trains(user_tu, capsys):
    """a user's loss computed in float64 on float32 embeddings (another dtype, a floating one) -> the run finishes;
    the model and its checkpoints stay float32"""
    from suite.train.checkpoint import load_checkpoint

    args, db, folder, f = user_tu
    assert main([*_with_loss(args, f"{f}:Float64"), "--keep-checkpoints", "1"]) == 0
    assert [r["status"] for r in _rows(db)] == ["finished"]
    state = load_checkpoint(sorted((folder / "checkpoints").iterdir())[-1])["model"]
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float32}


def test_user_loss_changing_its_input_in_place(user_tu, capsys):
    """a user's loss that clamps z_a in place under no_grad at step 5 (the self-check's leaf inputs allow it) -> exit 2,
    one line naming the loss, 'changed its input z_a ... in place' and step 5 (z_b too where the two views share one
    tensor); the row failed, the epoch-1 checkpoint kept
    (autograd's 'modified by an inplace operation' traceback, or silently wrong gradients where nothing saved z_a)"""
    args, db, folder, f = user_tu
    assert main(_with_loss(args, f"{f}:InPlaceAt")) == 2
    err = _one_line(capsys)
    assert "changed its input z_a" in err and "in place" in err and f"{f}:InPlaceAt" in err and STEP5 in err, err
    _failed_row(db)
    _kept_epoch_one(folder)


def test_user_loss_diagnostic_that_is_not_a_number(user_tu, capsys):
    """a user's loss whose diagnostics() (logged beside the loss) gives the string 'high' at step 5 -> exit 2, one line
    naming the loss, the diagnostic 'margin', its value and step 5; the row failed, the epoch-1 checkpoint kept (it was
    a traceback from torch.as_tensor at the engine's next read, after the step had been taken)"""
    args, db, folder, f = user_tu
    assert main(_with_loss(args, f"{f}:BadDiagnosticAt")) == 2
    err = _one_line(capsys)
    assert "'high' for 'margin'" in err and f"{f}:BadDiagnosticAt" in err and STEP5 in err, err
    _failed_row(db)
    _kept_epoch_one(folder)


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_slow_user_loss_is_interrupted_cleanly(user_tu, tmp_path):
    """a user's loss that hangs (sleeps 60 s) at step 5, and the user (or a scheduler) sends SIGTERM -> the process ends
    within seconds with exit 130 and one line saying where the run resumes; the row is 'interrupted' (not finished);
    the epoch-1 checkpoint kept; the same command then resumes from step 3"""
    args, db, folder, f = user_tu
    env = {**os.environ, "SUITE_REGISTRY": str(db), "SUITE_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, "-m", "suite", *_with_loss(args, f"{f}:SlowAt")], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (folder / "checkpoints" / "step-000000003.pt").exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # into the sleeping step
    p.send_signal(signal.SIGTERM)
    t0 = time.time()
    _, err = p.communicate(timeout=60)
    assert time.time() - t0 < 10 and p.returncode == 130, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and str(folder) in lines[0] and "Traceback" not in err, err
    assert [r["status"] for r in _rows(db)] == ["interrupted"]
    _kept_epoch_one(folder)


def test_installed_loss_named_like_a_built_in(tmp_path, monkeypatch, capsys):
    """an installed package declaring its loss as `infonce` (a built-in's name) -> the built-in is still built by that
    name and `suite losses` lists it, the package's loss is left out and `suite losses` says so naming the package
    (once the plugins were loaded, building `infonce` raised the plugin's 'the name is taken' error)"""
    import suite.losses as L
    with installed_package(monkeypatch, tmp_path / "site", "shadow_pkg", "shadow-pkg", "0.1", USER_LOSSES,
                           "infonce = shadow_pkg:Good\n"):
        L.available()  # loads the plugins
        built = L.build("infonce")
        assert type(built).__module__.startswith("suite.losses"), type(built)
        assert main(["losses"]) == 0
        out = capsys.readouterr()
        assert "| infonce |" in out.out and "shadow-pkg" in out.out + out.err and "ignored" in out.out + out.err


def test_installed_loss_broken_at_import(tmp_path, monkeypatch, capsys):
    """an installed package whose loss module fails to import (a dependency missing) -> `suite losses` still lists the
    built-in losses (exit 0) and names the broken one; `suite graph tu --loss broken` is exit 2, one line naming the
    loss, the package and the ImportError, before anything is read or trained"""
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    with installed_package(monkeypatch, tmp_path / "site", "broken_pkg", "broken-pkg", "2.0",
                           "import not_installed_dependency_xyz\n", "broken_loss = broken_pkg:Loss\n"):
        assert main(["losses"]) == 0
        out = capsys.readouterr()
        assert "| infonce |" in out.out and "broken_loss" in out.out + out.err, out
        rc = main(["graph", "tu", "--loss", "broken_loss", "--data-root", str(tmp_path / "nodata"),
                   "--out", str(tmp_path / "run")])
        assert rc == 2
        err = _one_line(capsys)
        assert "broken_loss" in err and "broken-pkg" in err and "not_installed_dependency_xyz" in err, err
        assert not (tmp_path / "run" / "checkpoints").exists()


def test_user_loss_source_changed_between_two_jobs_of_a_grid(user_tu, monkeypatch, capsys):
    """a grid of two `graph tu` jobs (seeds 0, 1) with `loss: my_losses.py:Good`; the user edits the file after the grid
    was loaded (job hashes made with its first source) and before the second job starts -> that job's process is exit
    2, one line naming the loss and both sha256 prefixes, nothing trained or recorded (the job trained the new source
    and recorded it under the old setting's job hash, pooled with the first job's seed)"""
    from benchmarks.runner.plan import Runner
    from benchmarks.runner.suitefile import Job, _loss_origin

    args, db, folder, f = user_tu
    _loss_origin.cache_clear()
    spec = f"{f}:Good"
    job = Job("graph", "tu", (("loss", spec),), 1)
    env = Runner(str(db)).env(job)  # the child's environment, made when the grid was loaded
    first = hashlib.sha256(f.read_bytes()).hexdigest()
    assert env["SUITE_LOSS_SHA256"] == first
    f.write_text(f.read_text().replace("temperature: float = 0.5", "temperature: float = 0.2"))
    monkeypatch.setenv("SUITE_LOSS_SHA256", first)
    monkeypatch.setenv("SUITE_CONFIG_HASH", job.hash)
    assert main([*_with_loss(args, spec), "--seed", "1"]) == 2
    err = _one_line(capsys)
    now = hashlib.sha256(f.read_bytes()).hexdigest()
    assert spec in err and first[:12] in err and now[:12] in err and "changed" in err, err
    assert _rows(db) == [] and not (folder / "checkpoints").exists()
    monkeypatch.delenv("SUITE_LOSS_SHA256")  # run outside a grid, the edited loss is simply a new setting
    _loss_origin.cache_clear()


# ----------------------------------------------------------------------------- class 2: GPU faults (simulated)

OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.50 GiB is "
       "free. Including non-PyTorch memory, this process has 77.60 GiB memory in use.")


def _oom_at(k: int):
    """A function that raises torch's CUDA out-of-memory error (its real type, torch.cuda.OutOfMemoryError) on its k-th
    call and otherwise calls through."""
    calls = {"n": 0}

    def wrap(fn):
        def inner(*a, **kw):
            calls["n"] += 1
            if calls["n"] == k:
                raise torch.cuda.OutOfMemoryError(OOM)
            return fn(*a, **kw)
        return inner
    return wrap


def test_out_of_memory_in_the_loss(tu, monkeypatch, capsys):  # noqa: F811
    """the issue's named case, in the loss: torch.cuda.OutOfMemoryError raised from the loss's forward at step 5 (the
    second epoch) of `suite graph tu` -> exit 1, one line naming step 5, the batch size (16), the memory asked for and
    free (2.00 GiB, 1.50 GiB free of 79.10 GiB) and the options that fit it (chunk_size='auto', a smaller --batch-size);
    no traceback; the row failed; the epoch-1 checkpoint kept (it was torch's traceback, exit 1)"""
    from suite.losses.base import ContrastiveLoss

    args, db, folder = tu
    args = [a if a != "1" or args[i - 1] != "--epochs" else "2" for i, a in enumerate(args)]
    monkeypatch.setattr(ContrastiveLoss, "__call__", _oom_at(5)(ContrastiveLoss.__call__))
    assert main(args) == 1
    err = _one_line(capsys)
    for needle in (STEP5, "in the loss", "batch of 16", "tried to allocate 2.00 GiB", "1.50 GiB free of 79.10 GiB",
                   "chunk_size='auto'", "--batch-size"):
        assert needle in err, (needle, err)
    _failed_row(db)
    _kept_epoch_one(folder)


def test_out_of_memory_in_the_encoder(tu, monkeypatch, capsys):  # noqa: F811
    """torch.cuda.OutOfMemoryError raised from the GIN encoder's forward at its 9th call (step 5: two views a step... the
    encoder's call at step 5) -> exit 1, one line naming the step, 'in the encoder', the batch and memory, and gradient
    caching (--grad-cache-chunk) and a smaller --batch-size; the row failed; the epoch-1 checkpoint kept"""
    from graph.tu import model as tu_model

    args, db, folder = tu
    args = [a if a != "1" or args[i - 1] != "--epochs" else "2" for i, a in enumerate(args)]
    enc = tu_model.GINEncoder
    calls = {"n": 0}
    orig = enc.forward

    def forward(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 9:  # two encoder calls a step: the 9th is step 5's first
            raise torch.cuda.OutOfMemoryError(OOM)
        return orig(self, *a, **kw)

    monkeypatch.setattr(enc, "forward", forward)
    assert main(args) == 1
    err = _one_line(capsys)
    for needle in ("step 5 (epoch 2, batch 2)", "in the encoder", "batch of 16", "tried to allocate 2.00 GiB",
                   "--grad-cache-chunk", "--batch-size"):
        assert needle in err, (needle, err)
    _failed_row(db)
    _kept_epoch_one(folder)


def _at_step(monkeypatch, k: int, error: BaseException) -> None:
    """The GIN encoder raises ``error`` at its first call in optimiser step ``k`` (training mode), whatever the number
    of its calls a step (views, gradient caching's two passes over chunks)."""
    from graph.tu.model import GINEncoder
    from suite.train.engine import Engine

    done = {"steps": 0}
    step, forward = Engine._optimizer_step, GINEncoder.forward

    def counted(self):
        step(self)
        done["steps"] = self.step

    def failing(self, *a, **kw):
        if done["steps"] == k - 1 and self.training:
            raise error
        return forward(self, *a, **kw)

    monkeypatch.setattr(Engine, "_optimizer_step", counted)
    monkeypatch.setattr(GINEncoder, "forward", failing)


def test_out_of_memory_under_gradient_caching(tu, monkeypatch, capsys):  # noqa: F811
    """torch.cuda.OutOfMemoryError in the encoder at step 5 of a run that already uses gradient caching
    (--grad-cache-chunk 8) -> exit 1, one line naming the step, the batch and memory, and a smaller --grad-cache-chunk
    (not gradient caching again, which it has); the epoch-1 checkpoint kept"""
    args, db, folder = tu
    _at_step(monkeypatch, 5, torch.cuda.OutOfMemoryError(OOM))
    assert main([*_tu_epochs(args, 2), "--grad-cache-chunk", "8"]) == 1
    err = _one_line(capsys)
    for needle in (STEP5, "in the encoder", "batch of 16", "smaller --grad-cache-chunk", "--batch-size"):
        assert needle in err, (needle, err)
    _failed_row(db)
    _kept_epoch_one(folder)


def test_gpu_failing_mid_run(tu, monkeypatch, capsys):  # noqa: F811
    """the GPU fails at step 5 (torch.AcceleratorError 'CUDA error: unspecified launch failure', as a lost or faulty
    device gives) -> exit 1, one line naming step 5, torch's first line and that the same command resumes from the last
    checkpoint; no traceback; the row failed; the epoch-1 checkpoint kept (it was torch's traceback)"""
    args, db, folder = tu
    accel = getattr(torch, "AcceleratorError", RuntimeError)
    _at_step(monkeypatch, 5, accel("CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
                                   "reported at some other API call, so the stacktrace below might be incorrect."))
    assert main(_tu_epochs(args, 2)) == 1
    err = _one_line(capsys)
    for needle in (STEP5, "the GPU failed", "unspecified launch failure", "resumes"):
        assert needle in err, (needle, err)
    _failed_row(db)
    _kept_epoch_one(folder)


def test_out_of_memory_in_the_evaluation(tu, monkeypatch, capsys):  # noqa: F811
    """torch.cuda.OutOfMemoryError raised by the evaluation after training (the SVM's embedding pass) -> exit 1, one
    line 'out of memory in the evaluation' naming the memory and the checkpoint that holds the trained model; the row
    failed; that checkpoint is kept; the same command then evaluates it without training again and finishes"""
    from graph.tu import graphcl

    args, db, folder = tu
    orig = graphcl.TUTask.evaluate
    monkeypatch.setattr(graphcl.TUTask, "evaluate", _oom_at(1)(orig))
    assert main([*args, "--keep-checkpoints", "1"]) == 1
    err = _one_line(capsys)
    assert "out of memory in the evaluation" in err and "tried to allocate 2.00 GiB" in err, err
    ckpts = sorted((folder / "checkpoints").iterdir())
    assert len(ckpts) == 1 and str(ckpts[0]) in err, (ckpts, err)
    _failed_row(db)
    before = ckpts[0].read_bytes()
    monkeypatch.setattr(graphcl.TUTask, "evaluate", orig)
    assert main([*args, "--keep-checkpoints", "1"]) == 0
    rows = _rows(db)
    assert sorted(r["status"] for r in rows) == ["failed", "finished"] or [r["status"] for r in rows] == ["finished"]
    assert ckpts[0].read_bytes() == before  # not trained again: the same checkpoint


def _fake_cuda(monkeypatch, count: int = 1, usable: bool = True, bf16: bool = True) -> None:
    """A machine where torch sees CUDA (``count`` GPUs); ``usable`` False: the first query of a device raises torch's
    CUDA RuntimeError, as a lost GPU or a driver too old does."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla V100-SXM2-16GB")

    def props(i):
        if not usable:
            raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable\nCUDA kernel errors ...")
        return object()

    monkeypatch.setattr(torch.cuda, "get_device_properties", props)


def test_device_index_that_does_not_exist(tu, monkeypatch, capsys):  # noqa: F811
    """`--device cuda:3` on a machine with one GPU -> exit 2, one line naming cuda:3 and the GPUs there are (cuda:0),
    before the data is read (it was accepted and failed inside torch at the first tensor moved)"""
    args, db, folder = tu
    _fake_cuda(monkeypatch, count=1)
    assert main([*args, "--device", "cuda:3"]) == 2
    err = _one_line(capsys)
    assert "cuda:3" in err and "1 CUDA GPU(s) (cuda:0)" in err, err
    assert _rows(db) == [] and not (folder / "checkpoints").exists()


@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_cuda_present_but_unusable(tu, monkeypatch, capsys, device):  # noqa: F811
    """torch reports CUDA available but the device cannot be queried (busy or unavailable, a driver too old), with
    `--device cuda` and with `--device auto` through the run owner -> exit 2, one line 'CUDA is installed but cannot be
    used' with torch's first line and --device cpu; no traceback, nothing trained (torch's RuntimeError traceback)"""
    from suite.train.device import resolve_device

    args, db, folder = tu
    _fake_cuda(monkeypatch, usable=False)
    with pytest.raises(ValueError, match="CUDA is installed but cannot be used .*busy or unavailable.*--device cpu"):
        resolve_device(device)
    assert main([*args, "--device", device]) == 2
    err = _one_line(capsys)
    assert "cannot be used" in err and "--device cpu" in err, err
    assert _rows(db) == [] and not (folder / "checkpoints").exists()


def test_bf16_on_a_gpu_without_it(monkeypatch, tmp_path):
    """bf16 asked for (`suite text train --bf16`, the run owner's cfg.bf16, or Engine(precision='bf16')) on a CUDA GPU
    without bfloat16 (a V100) -> ValueError naming the GPU and 'does not support bfloat16' before the task builds
    anything (autocast accepted it: emulated slowly or failing in a kernel)"""
    from dataclasses import dataclass

    from suite.train import Engine
    from suite.train.run import Task, run

    _fake_cuda(monkeypatch, bf16=False)
    built = []

    class T(Task):
        name = "probe"

        def build(self, cfg, ctx):
            built.append(1)
            raise AssertionError("must not build")

    @dataclass
    class Cfg:
        seed: int = 0
        out: str = str(tmp_path / "run")
        device: str = "cuda"
        bf16: bool = True

    with pytest.raises(ValueError, match=r"bf16 asked for, but cuda:0 \(Tesla V100-SXM2-16GB\) does not support bfloat16"):
        run(T(), Cfg(), registry=False)
    assert built == []
    m = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="does not support bfloat16"):
        Engine(m, torch.optim.SGD(m.parameters(), lr=0.1), device=torch.device("cuda", 0), precision="bf16")


# ----------------------------------------------------------------------------- class 4: damaged stores

def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _tu_epochs(args: list[str], n: int) -> list[str]:
    return [str(n) if i and args[i - 1] == "--epochs" else a for i, a in enumerate(args)]


def test_checkpoint_from_a_newer_suite_version(tu, capsys):  # noqa: F811
    """a run folder whose newest checkpoint was written by a newer suite (layout 2, and a config key this version does
    not have) -> exit 2, one line naming the file and 'newer version' (update the suite or another folder); the
    checkpoint byte for byte unchanged, no row (it said 'written by an older version', or named the unknown config key
    as another experiment)"""
    from suite.train.checkpoint import load_checkpoint, save_checkpoint

    args, db, folder = tu
    assert main([*_tu_epochs(args, 1), "--keep-checkpoints", "1", "--no-resume"]) == 0
    ck = sorted((folder / "checkpoints").iterdir())[-1]
    state = load_checkpoint(ck)
    state["layout"] = 2
    state["config"] = {**state["config"], "new_field_of_v2": 1}
    newer = ck.with_name("step-000000009.pt")
    save_checkpoint(newer, state)
    before = _sha(newer)
    n_rows = len(_rows(db))
    assert main([*_tu_epochs(args, 4), "--keep-checkpoints", "1"]) == 2
    err = _one_line(capsys)
    assert str(newer) in err and "newer version of the suite (layout 2" in err, err
    assert _sha(newer) == before and len(_rows(db)) == n_rows


def test_newest_checkpoint_cut_short(tu, capsys):  # noqa: F811
    """the newest checkpoint of a run folder cut in half (a copy that stopped) beside an intact earlier one -> exit 2,
    one line naming the damaged file and the earlier checkpoint to resume from; neither file changed, no new row (it
    named the file only)"""
    args, db, folder = tu
    args = _tu_epochs(args, 2)
    assert main([*args, "--keep-checkpoints", "2"]) == 0
    first, last = sorted((folder / "checkpoints").iterdir())
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    sums = (_sha(first), _sha(last))
    n_rows = len(_rows(db))
    assert main([*_tu_epochs(args, 3), "--keep-checkpoints", "2"]) == 2
    err = _one_line(capsys)
    assert str(last) in err and first.name in err and "corrupt or unreadable" in err, err
    assert (_sha(first), _sha(last)) == sums and len(_rows(db)) == n_rows


def _registry_with_runs(db: Path, n: int = 30) -> None:
    r = Registry(str(db))
    for i in range(n):
        with r.run(modality="toy", task="t", dataset="d", loss="infonce", loss_hparams={},
                   config={"i": i, "pad": "x" * 2000}, run_options={}, seed=0) as row:
            row.log_many({"acc": 0.5}, split="test")
    del r
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


def test_truncated_registry_before_training(tu, capsys):  # noqa: F811
    """SUITE_REGISTRY pointing at a SQLite registry cut in half (a copy that stopped) for `suite graph tu` -> exit 2, one
    line naming the registry and 'malformed', before the data is read or a model built (no run folder checkpoint);
    the file byte for byte unchanged (it was opened after the data was read and the model built)"""
    from graph.tu import graphcl

    args, db, folder = tu
    _registry_with_runs(db)
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.truncate(size // 2)
    before = _sha(db)
    built = []
    orig = graphcl.TUTask.build

    def build(self, cfg, ctx):
        built.append(1)
        return orig(self, cfg, ctx)

    import pytest as _p
    mp = _p.MonkeyPatch()
    mp.setattr(graphcl.TUTask, "build", build)
    try:
        assert main(args) == 2
    finally:
        mp.undo()
    err = _one_line(capsys)
    assert str(db) in err and "malformed" in err, err
    assert built == [] and _sha(db) == before and not (folder / "checkpoints").exists()


def _locker(db: Path) -> subprocess.Popen:
    """Another process holding the registry's write lock (BEGIN EXCLUSIVE) until killed."""
    code = textwrap.dedent(f"""
        import sqlite3, time
        c = sqlite3.connect({str(db)!r}, isolation_level=None)
        c.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_locked_registry(tmp_path, monkeypatch, capsys):
    """a registry another process holds locked (BEGIN EXCLUSIVE, a writer that hangs) while `suite results import`
    writes, with SUITE_REGISTRY_TIMEOUT=1 -> after the timeout exit 2, one line naming the registry, 'locked by another
    process' and the timeout; the registry's runs unchanged once the lock is gone (it waited 60 s, then 'database is
    locked' without saying who or for how long)"""
    db = tmp_path / "r.sqlite"
    _registry_with_runs(db, 3)
    snap = tmp_path / "snap.jsonl"
    other = tmp_path / "other.sqlite"
    _registry_with_runs(other, 2)
    snap.write_text(Registry(str(other)).export_jsonl())
    monkeypatch.setenv("SUITE_REGISTRY_TIMEOUT", "1")
    p = _locker(db)
    try:
        t0 = time.time()
        assert main(["results", "import", str(snap), "--registry", str(db)]) == 2
        assert time.time() - t0 < 20
        err = _one_line(capsys)
        assert str(db) in err and "locked by another process" in err and "1 s" in err, err
    finally:
        p.kill()
        p.wait()
    assert len(Registry(str(db)).runs()) == 3


def test_snapshot_with_a_line_that_does_not_parse_is_read(tmp_path, capsys):
    """`suite results list --registry snap.jsonl` where one of three lines was cut mid-JSON -> exit 0, the two good
    runs listed, one warning line naming the file and line 2; the snapshot unchanged (the whole listing was refused:
    '(nothing imported) ..., line 2: not JSON'); a snapshot of only bad lines is still exit 2 with one line"""
    src = tmp_path / "src.sqlite"
    _registry_with_runs(src, 3)
    lines = Registry(str(src)).export_jsonl().splitlines()
    snap = tmp_path / "snap.jsonl"
    snap.write_text("\n".join([lines[0], lines[1][: len(lines[1]) // 2], lines[2]]) + "\n")
    before = _sha(snap)
    assert main(["results", "list", "--registry", str(snap)]) == 0
    out = capsys.readouterr()
    ids = [json_id[:10] for json_id in (__import__("json").loads(lines[i])["id"] for i in (0, 2))]
    assert all(i in out.out for i in ids), out.out
    warn = [line for line in out.err.splitlines() if line.strip()]
    assert len(warn) == 1 and str(snap) in warn[0] and "line 2" in warn[0] and "Traceback" not in out.err, out.err
    assert _sha(snap) == before
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["results", "list", "--registry", str(bad)]) == 2
    assert str(bad) in _one_line(capsys)


def test_array_cache_cut_short_is_rebuilt(tmp_path):
    """a text-embedding cache (.npz) cut in half -> a warning naming the cache file, the embeddings computed again
    (equal to the first), the cache rewritten whole"""
    import warnings

    import numpy as np

    from suite.losses import graphs

    class Model:
        def encode(self, texts, **kw):
            return torch.stack([torch.full((4,), float(len(t))) for t in texts])

    calls = []
    orig = graphs.encode_texts

    def encode_texts(model, texts):
        calls.append(1)
        return orig(model, texts)

    mp = pytest.MonkeyPatch()
    mp.setattr(graphs, "encode_texts", encode_texts)
    try:
        texts = ["a", "bb", "ccc"]
        first = graphs.cached_text_embeddings(Model(), texts, tmp_path, "m")
        (cache,) = tmp_path.glob("text-emb-*.npz")
        data = cache.read_bytes()
        cache.write_bytes(data[: len(data) // 2])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            again = graphs.cached_text_embeddings(Model(), texts, tmp_path, "m")
        assert any(str(cache) in str(x.message) for x in w), [str(x.message) for x in w]
        assert np.array_equal(np.asarray(first), np.asarray(again)) and len(calls) == 2
        assert cache.read_bytes() == data
    finally:
        mp.undo()


def test_export_folder_half_copied(tmp_path):
    """an export folder copied half-way: model.safetensors cut in half, or config.json missing, or run.json cut
    mid-JSON -> from_pretrained raises one ValueError naming the file and what is wrong; the folder unchanged"""
    from suite.pretrained import load_pretrained, save_pretrained

    m = torch.nn.Linear(4, 3)
    out = tmp_path / "export"
    save_pretrained(m, out, "probe-linear", {"in_features": 4, "out_features": 3})
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    weights = next(n for n in files if n.endswith(".safetensors"))
    (out / weights).write_bytes(files[weights][: len(files[weights]) // 2])
    with pytest.raises(ValueError) as exc:
        load_pretrained(out, "probe-linear")
    assert str(out / weights) in str(exc.value) and "\n" not in str(exc.value), exc.value
    (out / weights).write_bytes(files[weights])
    (out / "config.json").unlink()
    with pytest.raises(ValueError) as exc:
        load_pretrained(out, "probe-linear")
    assert "config.json" in str(exc.value), exc.value


# ----------------------------------------------------------------------------- the named cases

def test_text_train_without_the_sts_dev_file(tmp_path, monkeypatch, capsys):
    """the issue's first case: `suite text train --data sentences.txt --eval-every 0` on a machine without SentEval's
    data -> exit 2 before any model is loaded, one line naming the missing sts-dev.csv, that the evaluation at the end
    still needs it, and `--no-dev-eval`, which trains without it; with --final-eval sts the same before training, naming
    --final-eval none (it loaded the model, then 'data file not found' without the options)"""
    import text.methods.simcse as simcse

    data = tmp_path / "sentences.txt"
    data.write_text("a man plays a guitar\na dog runs\ntwo children eat\nthe film was good\n")
    monkeypatch.setenv("SUITE_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    loaded = []
    monkeypatch.setattr(simcse, "build_encoder", lambda *a, **k: loaded.append(1))
    assert main(["text", "train", "--data", str(data), "--eval-every", "0", "--out", str(tmp_path / "run")]) == 2
    err = _one_line(capsys)
    assert "sts-dev.csv" in err and "--eval-every 0" in err and "--no-dev-eval" in err, err
    assert loaded == []
    assert main(["text", "train", "--data", str(data), "--no-dev-eval", "--final-eval", "sts",
                 "--out", str(tmp_path / "run")]) == 2
    err = _one_line(capsys)
    assert "--final-eval sts" in err and "--final-eval none" in err, err
    assert loaded == [] and not (tmp_path / "run").exists()


def test_text_train_with_no_dev_eval_trains_without_senteval(tmp_path, monkeypatch, capsys, tiny_model_dir):
    """`suite text train --no-dev-eval --eval-every 0` without SentEval's data -> trains, exports the last model, the
    row finished (the option the refusal names does what it says)"""
    data = tmp_path / "sentences.txt"
    data.write_text("a man plays a guitar\na dog runs\ntwo children eat\nthe film was good\n")
    monkeypatch.setenv("SUITE_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    assert main(["text", "train", "--data", str(data), "--no-dev-eval", "--eval-every", "0", "--backbone",
                 str(tiny_model_dir), "--max-steps", "2", "--batch-size", "2", "--out", str(tmp_path / "run")]) == 0
    assert "no STS-B dev evaluation" in capsys.readouterr().out
    assert (tmp_path / "run" / "export").is_dir()
    assert [r["status"] for r in Registry(str(tmp_path / "r.sqlite")).runs()] == ["finished"]
