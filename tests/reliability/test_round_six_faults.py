"""Reliability round six (issue 69), class C: the new code paths under faults. The streaming image loader meets an
image folder on a mount that goes away mid-run, a network share timing out, a file replaced by a named pipe, shards
cut off or deleted during an epoch; two processes build the same cache (the image-folder cache, the MLM token cache);
a tracker's writer dies or its event file is removed during a run; the fused kernels meet an old driver. Each docstring
says what is tried, what must happen, and what happened before."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from suite.registry import Registry
from tests.reliability.test_round_six import _code
from tests.vision.streamdata import image_folder, shards
from vision.sources import UnreadableImage, folder_source, shard_source
from vision.stream import MAX_REPLACEMENTS, Crops, EpochBatch, Skips

ROOT = Path(__file__).resolve().parents[2]


def _crops(source: Any) -> Crops:
    return Crops(source, 16, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=0)


def _failing_open(monkeypatch: pytest.MonkeyPatch, fail: dict[str, int]) -> None:
    """Opening a path under a key of ``fail`` (``os.open`` or ``open``) raises that errno (a network mount's error);
    everything else opens."""
    import builtins

    def failing(real: Any) -> Any:
        def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
            for where, code in fail.items():
                if isinstance(path, (str, os.PathLike)) and str(path).startswith(where):
                    raise OSError(code, os.strerror(code), str(path))
            return real(path, *args, **kwargs)
        return fake

    monkeypatch.setattr(os, "open", failing(os.open))
    monkeypatch.setattr(builtins, "open", failing(builtins.open))


# ----------------------------------------------------------------------------- the streaming loader

def test_a_mount_gone_mid_run_stops_with_one_line_and_keeps_the_checkpoint(tmp_path, monkeypatch, capsys):
    """`suite vision pretrain --dataset folder:PATH` whose folder's mount goes away in the second epoch (every open
    'Stale file handle') -> exit 2, one line naming an image of the folder and the error; the first epoch's
    checkpoint survives and the same command, the mount back, resumes from it and finishes (before: the same; probed
    here for the first time)"""
    root = image_folder(tmp_path / "imgs", classes=2, train=6, test=2, sizes=(36, 48))
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    args = ["vision", "pretrain", "--dataset", f"folder:{root}", "--encoder", "convnet", "--width", "4", "--recipe",
            "imagenet", "--image-size", "32", "--epochs", "2", "--batch-size", "4", "--optimizer", "adam", "--knn-k",
            "3", "--geometry-batches", "0", "--proj-dim", "8", "--no-linear-probe", "--device", "cpu", "--workers",
            "0", "--seed", "0", "--out", str(tmp_path / "run")]
    fail: dict[str, int] = {}
    _failing_open(monkeypatch, fail)
    real_call, epochs, gone = Crops.__call__, [], [True]

    def call(self: Crops, batch: EpochBatch) -> Any:
        epochs.append(batch.epoch)
        if gone[0] and batch.epoch != epochs[0]:  # the second epoch: the mount is gone
            fail[str(root / "train")] = errno.ESTALE
        return real_call(self, batch)

    monkeypatch.setattr(Crops, "__call__", call)
    assert _code(args) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(root / "train") in lines[0] and "Stale file handle" in lines[0], err
    assert f"{MAX_REPLACEMENTS} unreadable images in a row" in lines[0]
    kept = [p.name for p in (tmp_path / "run" / "checkpoints").glob("*.pt")]
    assert kept == ["step-000000003.pt"], kept  # the first epoch's 3 steps
    (row,) = Registry(str(tmp_path / "r.sqlite")).runs()
    assert row["status"] == "failed"
    second = epochs[-1]
    fail.clear()
    gone[0] = False
    epochs.clear()
    assert _code(args) == 0  # the mount back: resumed from the first epoch's checkpoint
    assert set(epochs) == {second}
    (row,) = Registry(str(tmp_path / "r.sqlite")).runs()
    assert row["status"] == "finished"


def test_a_network_share_timing_out_is_one_line_per_file(tmp_path, monkeypatch):
    """images of a streamed folder on a network share whose open times out (ETIMEDOUT) or fails (EIO) -> each named
    once with its error, replaced by the next readable image (the batch keeps its size) and counted; nothing waits
    (before: the same; probed here for the first time)"""
    root = image_folder(tmp_path / "imgs", classes=2, train=6, test=1, sizes=(36, 48))
    src = folder_source(root, "train")
    slow, broken = (str(root / "train" / "c00" / n) for n in sorted(os.listdir(root / "train" / "c00"))[:2])
    _failing_open(monkeypatch, {slow: errno.ETIMEDOUT, broken: errno.EIO})
    out = _crops(src)(EpochBatch(0, torch.arange(len(src))))
    assert out.images.shape[1] == len(src) and len(set(out.skipped)) == 2  # 0000 met twice: itself, 0001's place
    assert any(slow in s and "timed out" in s for s in out.skipped), out.skipped
    assert any(broken in s and "Input/output error" in s for s in out.skipped), out.skipped
    skips = Skips()
    skips.add(out.skipped + out.skipped)  # met again: said and counted once
    assert len(skips) == 2 and all("\n" not in s for s in out.skipped)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_an_image_replaced_by_a_named_pipe_does_not_hang(tmp_path):
    """an image of a streamed folder replaced by a named pipe after the index was built (a file that blocks on open, as
    a hung mount does) -> one line naming it ('a named pipe'), replaced, within seconds; a named pipe there when the
    folder is scanned -> a warning naming it, left out of the index and counted (before: open() waited forever for a
    writer, and the scan left the pipe out without a word)"""
    root = image_folder(tmp_path / "imgs", classes=2, train=4, test=1, sizes=(36, 48))
    src = folder_source(root, "train")
    pipe = root / "train" / "c01" / sorted(os.listdir(root / "train" / "c01"))[0]
    pipe.unlink()
    os.mkfifo(pipe)
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(_crops(src)(EpochBatch(0, torch.arange(len(src))))),
                              daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the reader: a writer opens and closes the pipe
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=20)
        pytest.fail(f"reading {pipe} waited for a writer")
    (out,) = got
    assert out.images.shape[1] == len(src)
    assert out.skipped == [f"image {pipe} cannot be read (it is a named pipe, not an image file)"]
    with pytest.warns(UserWarning, match=r"1 name\(s\) of images that are not files .* first: .*c01/0000\.JPEG"):
        again = folder_source(root, "train")
    assert len(again) == len(src) - 1 and again.info["not_files"] == 1


def test_a_read_that_never_returns_stops_the_run_naming_the_image(tmp_path, monkeypatch):
    """a streamed folder read by a data worker whose read of one image never returns (a hard-mounted share gone: no
    error, no signal ends it) -> within the stall limit a DataStall of one line naming that image, the worker and how
    long it has waited; a stall while no worker reads a file says so (before: the run waited forever)"""
    import time

    from suite.faults import DataStall
    from suite.train.batches import Prefetch

    root = image_folder(tmp_path / "imgs", classes=2, train=4, test=1, sizes=(36, 48))
    src = folder_source(root, "train")
    hung = src.where(2)
    real_open = os.open

    def hanging(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == hung:
            time.sleep(4)  # "forever" for the stall limit below; short, so the worker ends soon after the test
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", hanging)
    pf = Prefetch(_crops(src), workers=1, stall_s=1.0)
    began = time.monotonic()
    with pytest.raises(DataStall) as info:
        list(pf([EpochBatch(0, torch.arange(len(src)))]))
    line = str(info.value)
    assert time.monotonic() - began < 4 and "\n" not in line
    assert f"worker 0 has been reading image {hung} for " in line
    assert "no batch from the 1 data worker(s) in 1 s" in line
    pf.close()
    idle = Prefetch(lambda b: b, workers=1, stall_s=2.5)  # never iterated: no worker reads anything
    assert "none of them is reading a file" in idle.stalled()
    long = "\u00e9" * 2000  # a name longer than a slot, cut at a character
    idle.board.set(0, long)  # type: ignore[union-attr]
    age, what = idle.board.get(0)  # type: ignore[union-attr, misc]
    assert 0 <= age < 5 and long.startswith(what) and len(what.encode()) < idle.board.SLOT  # type: ignore[union-attr]


def test_a_shard_cut_off_during_an_epoch(tmp_path):
    """a WebDataset shard truncated after it was indexed (a copy cut short while the run reads it) -> each lost sample
    one line naming the shard and the sample ('cut off'), replaced, counted one by one; the other shards' samples are
    the same crops as before (before: the same; probed here for the first time)"""
    pattern = shards(tmp_path / "sh", n=30, per_shard=10)
    src = shard_source(pattern, cache=False)
    crops, idx = _crops(src), torch.arange(len(src))
    whole = crops(EpochBatch(0, idx))
    cut = sorted((tmp_path / "sh").glob("train-*.tar"))[1]
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    out = crops(EpochBatch(0, idx))
    lost = set(out.skipped)  # a lost sample is met again in its predecessor's place
    assert out.images.shape == whole.images.shape and 1 <= len(lost) < 10
    assert all(s.startswith(f"{cut}:") and "cut off" in s for s in out.skipped), out.skipped
    skips = Skips()
    skips.add(out.skipped)
    assert len(skips) == len(lost)  # one a sample
    kept = [i for i in range(len(src)) if src.shard[i] != 1]
    assert torch.equal(out.images[:, kept], whole.images[:, kept])


def test_a_shard_deleted_during_an_epoch_is_counted_per_sample(tmp_path):
    """a shard of 5 samples deleted after it was indexed -> each of its 5 samples one line naming the shard and the
    sample, replaced, and 5 counted; a deleted shard of more samples than MAX_REPLACEMENTS -> one line naming the
    shard, that stops the epoch (before: one line for the whole shard, counted once though 5 samples were replaced)"""
    pattern = shards(tmp_path / "sh", n=15, per_shard=5)
    src = shard_source(pattern, cache=False)
    gone = sorted((tmp_path / "sh").glob("train-*.tar"))[1]
    gone.unlink()
    out = _crops(src)(EpochBatch(0, torch.arange(len(src))))
    assert out.images.shape[1] == len(src) and len(set(out.skipped)) == 5
    assert all(str(gone) in s and "No such file" in s for s in out.skipped), out.skipped
    skips = Skips()
    skips.add(out.skipped)
    assert len(skips) == 5
    big = shard_source(shards(tmp_path / "big", n=40, per_shard=20), cache=False)
    first = sorted((tmp_path / "big").glob("train-*.tar"))[0]
    first.unlink()
    with pytest.raises(UnreadableImage, match=rf"{MAX_REPLACEMENTS} unreadable images in a row") as exc:
        _crops(big)(EpochBatch(0, torch.arange(4)))
    assert str(first) in str(exc.value) and "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- two processes, one cache

def _two_at_once(tmp_path: Path, module: str, call: str) -> list[str]:
    """Two interpreters run ``call`` at once, each made to reach ``module.save_arrays`` (the cache's write) before
    either writes (so both build it); their outputs."""
    code = textwrap.dedent(f"""
        import os, sys, time
        import {module} as m
        real, bar = m.save_arrays, sys.argv[1]

        def save_arrays(*a, **k):
            open(os.path.join(bar, str(os.getpid())), "w").close()
            end = time.time() + 120
            while len(os.listdir(bar)) < 2 and time.time() < end:
                time.sleep(0.02)
            return real(*a, **k)

        m.save_arrays = save_arrays
        print({call})
    """)
    (tmp_path / "bar").mkdir()
    env = {**os.environ, "SUITE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "bar")], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(os.listdir(tmp_path / "bar")) == 2  # both built the cache
    return [o for o, _ in outs]


@pytest.mark.slow  # two interpreters importing torch (about 10 s)
def test_two_processes_build_one_image_folder_cache(tmp_path):
    """two processes load the same `mem:` image folder at once with no cache yet, both decoding it and writing the
    cache at the same moment -> both finish with the same images, and there is one cache file, whole, no temporary
    file left (before: the same, held by the cache's atomic write; probed here for the first time)"""
    from tests.reliability.images import image_folder as same_size_folder

    root = same_size_folder(tmp_path / "imgs", size=8, ext="png")
    outs = _two_at_once(tmp_path, "vision.data",
                        f"(lambda d: (d.train_x.sum().item(), d.test_x.sum().item(), len(d.train_y)))"
                        f"(m.load_dataset('mem:{root}'))")
    assert outs[0] == outs[1] and outs[0].strip()
    files = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert len(files) == 1 and files[0].endswith(".npz"), files
    from vision.data import _read_image_cache

    assert _read_image_cache(next((tmp_path / "cache").rglob("*.npz"))) is not None


@pytest.mark.slow  # two interpreters importing torch (about 10 s)
def test_two_processes_build_one_token_cache(tmp_path):
    """two processes tokenise the same MLM corpus at once with no token cache yet, both writing it at the same moment
    -> both finish with the same tokens, one cache file, whole, no temporary file left (before: the same, held by the
    cache's atomic write; probed here for the first time)"""
    words = " ".join(f"w{i % 7}" for i in range(40))
    sentences = [f"{words} s{i}" for i in range(50)]
    call = ("(lambda t: (int(t[0].sum()), int(t[1][-1])))(m.tokenize_corpus("
            "lambda s, add_special_tokens: {'input_ids': [[len(w) for w in x.split()] for x in s]}, "
            f"{sentences!r}, 'k0'))")
    outs = _two_at_once(tmp_path, "text.mlm.tokenizer", call)
    assert outs[0] == outs[1] and outs[0].strip()
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["tokens-k0.npz"], files
    from suite.safeio import load_arrays

    arrays, meta = load_arrays(files[0])
    assert meta["n"] == 50 and int(arrays["offsets"][-1]) == int(arrays["tokens"].numel())


# ----------------------------------------------------------------------------- a tracker's writer killed

def _tracked_run(tmp_path: Path, **kw: Any) -> tuple[Registry, Any]:
    from suite.train.run import run
    from tests.suite.test_curves import CurveTask, TrackedConfig

    reg = Registry(str(tmp_path / "r.sqlite"))
    return reg, run(CurveTask(), TrackedConfig(out=str(tmp_path / "run"), log_to="tensorboard", **kw), registry=reg)


def _tracker_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if "tracker tensorboard" in str(w.message)]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's death, simulated
def test_a_tensorboard_writer_thread_dying_mid_run(tmp_path, monkeypatch):
    """TensorBoard's writer thread dies at its fourth record (an I/O error of the disk) -> the run finishes, its
    registry row holds every point, one warning names the tracker and the error, and the tracker is not called again
    (before: the same, held by the tracker's guard; probed here for the first time)"""
    from tensorboard.summary.writer.record_writer import RecordWriter

    from suite.train import trackers

    real, n = RecordWriter.write, [0]

    def write(self: Any, data: bytes) -> None:
        n[0] += 1
        if n[0] >= 4:
            raise OSError(errno.EIO, "Input/output error")
        real(self, data)

    calls, log = [0], trackers.TensorBoard.log

    def counted(self: Any, *a: Any, **k: Any) -> None:
        calls[0] += 1
        log(self, *a, **k)

    monkeypatch.setattr(RecordWriter, "write", write)
    monkeypatch.setattr(trackers.TensorBoard, "log", counted)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg, res = _tracked_run(tmp_path, epochs=3)
    said = _tracker_warnings(record)
    assert len(said) == 1 and "Input/output error" in said[0], said
    assert reg.get(res.run_id)["status"] == "finished"
    steps = sorted(m["step"] for m in reg.metrics(res.run_id, "loss") if m["split"] == "train-step")
    assert steps == [3, 6, 9, 12]
    called_before_failing = calls[0]
    assert called_before_failing < len({(m["split"], m["step"]) for m in reg.metrics(res.run_id)})


def test_a_tensorboard_event_file_removed_mid_run(tmp_path, monkeypatch):
    """the run's TensorBoard event file removed at step 4 (a clean-up while the run goes) -> one warning naming the
    tracker and the removed event file; the run finishes and its registry row holds every point (before: no word;
    the writer made a new file at its next flush, holding only the later points)"""
    from tests.suite.test_curves import CurveTask

    build = CurveTask.build

    def removing(self: Any, cfg: Any, ctx: Any) -> Any:
        training = build(self, cfg, ctx)
        on_step = training.on_step

        def step() -> None:
            if ctx.engine.step == 4:
                for events in (Path(cfg.out) / "tensorboard").glob("events.out.tfevents.*"):
                    events.unlink()
            if on_step is not None:
                on_step()

        training.on_step = step
        return training

    monkeypatch.setattr(CurveTask, "build", removing)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg, res = _tracked_run(tmp_path, epochs=2)
    said = _tracker_warnings(record)
    assert len(said) == 1 and "event file" in said[0] and "removed" in said[0], said
    assert str(tmp_path / "run" / "tensorboard") in said[0]
    assert reg.get(res.run_id)["status"] == "finished"
    assert sorted(m["step"] for m in reg.metrics(res.run_id, "loss") if m["split"] == "train-step") == [3, 6, 8]


def test_a_tracker_failing_at_its_close_keeps_the_run_finished(tmp_path, monkeypatch):
    """the tracker's last flush fails (the disk full at the run's end) -> one warning naming it; the run's row is
    finished with its metrics (before: the same, held by the tracker's guard; probed here for the first time)"""
    from suite.train import trackers

    def full(self: Any, status: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trackers.TensorBoard, "close", full)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg, res = _tracked_run(tmp_path)
    said = _tracker_warnings(record)
    assert len(said) == 1 and "No space left" in said[0], said
    assert reg.get(res.run_id)["status"] == "finished" and reg.metrics(res.run_id, "alignment")


def test_a_tracker_that_fails_mid_run_lets_go_of_its_files(tmp_path, monkeypatch):
    """the TensorBoard writer fails at a step's log (its thread dead, the disk gone) -> one warning, and the tracker is
    closed once, as failed, so its event file is not held open until the process ends; a second failure in that close
    says nothing more (before: the guard dropped the tracker without closing it)"""
    from suite.train import trackers

    closed: list[str] = []
    real_close = trackers.TensorBoard.close

    def dead(self: Any, point: Any, step: int, split: Any = None) -> None:
        raise OSError(errno.EIO, "Input/output error")

    def close(self: Any, status: str) -> None:
        closed.append(status)
        real_close(self, status)
        raise OSError(errno.EIO, "Input/output error")  # and the close fails too

    monkeypatch.setattr(trackers.TensorBoard, "log", dead)
    monkeypatch.setattr(trackers.TensorBoard, "close", close)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        reg, res = _tracked_run(tmp_path)
    said = _tracker_warnings(record)
    assert len(said) == 1 and "Input/output error" in said[0], said
    assert closed == ["failed"]  # once, at the failure; not again at the run's end
    assert reg.get(res.run_id)["status"] == "finished"


def test_a_run_shorter_than_log_every_shows_a_curve(tmp_path, monkeypatch):
    """issue 69, case 4: a 3-epoch run of 12 steps with log_every 100 -> TensorBoard holds a 3-point training-loss
    curve (`train/loss` at epochs 1, 2, 3), the last step's point and the evaluation, each under its split (before:
    one point per scalar, `train-step/loss` at the last step, and no evaluation)"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.suite.test_curves import CurveTask

    build = CurveTask.build

    def rarely(self: Any, cfg: Any, ctx: Any) -> Any:
        training = build(self, cfg, ctx)
        training.log_every = 100
        return training

    monkeypatch.setattr(CurveTask, "build", rarely)
    _tracked_run(tmp_path, epochs=3)
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3]
    assert [e.step for e in acc.Scalars("train-step/loss")] == [12]
    assert len(acc.Scalars("test/alignment")) == 1


# ----------------------------------------------------------------------------- fused kernels on an old driver

def _raised_in(module: str, exc: BaseException) -> Any:
    """A function that raises ``exc`` from a frame of ``module`` (as Triton's driver raises its errors)."""
    scope: dict[str, Any] = {"__name__": module, "exc": exc}
    exec(compile("def launch(*args, **kwargs):\n    raise exc\n", module.replace(".", "/") + ".py", "exec"), scope)
    return scope["launch"]


@pytest.mark.parametrize("error", [
    "Triton Error [CUDA]: the provided PTX was compiled with an unsupported toolchain.",
    "0 active drivers ([]). There should only be one.",
])
def test_an_old_driver_falls_back_once_with_the_plain_values(monkeypatch, error):
    """the fused kernels' launch fails as on a GPU machine with an old driver (Triton's driver raises a plain
    RuntimeError: 'the provided PTX was compiled with an unsupported toolchain', '0 active drivers') over three
    training steps -> one warning naming the error, then the PyTorch tiles; the loss and its gradients equal the
    plain path's; a RuntimeError of the suite's own still passes through (before: the RuntimeError ended the run)"""
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("TRITON_INTERPRET=1 must be set before Triton is imported (tests/conftest.py sets it)")
    import suite.losses as L
    from suite.losses import fused

    monkeypatch.setattr(fused, "_broken", [])
    monkeypatch.setattr(fused, "_kernels", _raised_in("triton.backends.nvidia.driver", RuntimeError(error)))
    g = torch.Generator().manual_seed(0)
    za, zb = torch.randn(12, 8, generator=g), torch.randn(12, 8, generator=g)

    def steps() -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for _ in range(3):
            a, b = za.clone().requires_grad_(), zb.clone()
            value = L.build("infonce", chunk_size=4)(a, b)
            value.backward()
            out.append((value.detach(), a.grad))
        return out

    with fused.use("off"):
        want = steps()
    with fused.interpret(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = steps()
    said = [str(w.message) for w in record if "fused loss kernels" in str(w.message)]
    assert len(said) == 1 and error.split("(")[0].strip() in said[0], said
    assert all(torch.equal(v, w) and torch.equal(gv, gw) for (v, gv), (w, gw) in zip(got, want))
    monkeypatch.setattr(fused, "_broken", [])
    monkeypatch.setattr(fused, "_kernels", _raised_in("suite.losses.fused", RuntimeError("a bug of ours")))
    with fused.interpret(), pytest.raises(RuntimeError, match="a bug of ours"):
        L.build("infonce", chunk_size=4)(za, zb)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_names_left_out_of_the_index_are_counted_in_the_run(tmp_path, monkeypatch):
    """`suite vision pretrain --dataset folder:PATH` on a folder holding a named pipe among its images -> the run's
    registry row counts it (`not_files` = 1, split data) beside the images it trained on (before: a warning only; the
    row counted empty classes and shard problems, not the names left out)"""
    root = image_folder(tmp_path / "imgs", classes=2, train=4, test=2, sizes=(36, 48))
    os.mkfifo(root / "train" / "c00" / "pipe.JPEG")
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    args = ["vision", "pretrain", "--dataset", f"folder:{root}", "--encoder", "convnet", "--width", "4", "--recipe",
            "imagenet", "--image-size", "32", "--epochs", "1", "--batch-size", "4", "--optimizer", "adam", "--knn-k",
            "3", "--geometry-batches", "0", "--proj-dim", "8", "--no-linear-probe", "--device", "cpu", "--workers",
            "0", "--seed", "0", "--out", str(tmp_path / "run")]
    with pytest.warns(UserWarning, match="not files"):
        assert _code(args) == 0
    reg = Registry(str(tmp_path / "r.sqlite"))
    (row,) = reg.runs()
    data = {m["name"]: m["value"] for m in reg.metrics(row["id"]) if m["split"] == "data"}
    assert data["not_files"] == 1 and data["train_images"] == 8, data
