"""Reliability round four (issue 36), the confirmed cases: a run folder has one writer at a time, every option is
checked before a run is looked up, reused or trained, numbers never turn silently into NaN, and faults (a full disk,
SIGTERM, a read-only registry, a missing database driver) end in one line."""
from __future__ import annotations

import errno
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import suite.losses as L
from suite.cli import main
from suite.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
HYPERSPHERE = [n for n in L.available() if L.loss_class(n).hypersphere]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.fixture()
def tu(tmp_path, monkeypatch):
    """A tiny TU data set (40 graphs, 2 classes), a registry and the flags of a one-epoch `suite graph tu` run."""
    from tests.graph.synthetic import write_synthetic_tu

    root = write_synthetic_tu(tmp_path / "data")
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("SUITE_REGISTRY", str(db))
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    monkeypatch.delenv("SUITE_CONFIG_HASH", raising=False)
    args = ["graph", "tu", "--dataset", "SYNTH", "--data-root", str(root), "--epochs", "1", "--batch-size", "16",
            "--hidden", "8", "--layers", "2", "--svm-folds", "4", "--svm-inner-folds", "2", "--out", str(tmp_path / "run")]
    return args, db, tmp_path / "run"


def _rows(db: Path) -> list[dict]:
    return Registry(str(db)).runs() if db.exists() else []


# ----------------------------------------------------------------------------- 1. two writers, one run folder

def _holder(folder: Path) -> subprocess.Popen:
    """Another process holding ``folder`` as the run owner does (an exclusive flock on ``<folder>/.lock`` with its pid
    written in it); a bare interpreter, so that it starts in milliseconds."""
    code = textwrap.dedent(f"""
        import fcntl, os, sys, time
        os.makedirs({str(folder)!r}, exist_ok=True)
        fd = os.open(os.path.join({str(folder)!r}, ".lock"), os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0); os.write(fd, str(os.getpid()).encode())
        print("held", flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_writer_on_a_run_folder_is_refused(tu, capsys):
    """`suite graph tu --out X` while another process holds X -> exit 2, one line naming the folder and the holder's
    pid, nothing trained or recorded; once the holder is SIGKILLed (the kernel drops its lock) the same command runs"""
    args, db, folder = tu
    holder = _holder(folder)
    try:
        assert main(args) == 2
        err = _one_line(capsys)
        assert str(folder) in err and f"pid {holder.pid}" in err and "in use" in err, err
        assert _rows(db) == [] and not (folder / "checkpoints").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert main(args) == 0
    assert [r["status"] for r in _rows(db)] == ["finished"]


@pytest.mark.slow  # two real `suite` processes (imports and training: about 15 s on 2 cores); `make test-all` runs it
def test_two_identical_runs_started_together_leave_one_finished_row(tu):
    """two identical `suite graph tu` processes started together on one folder and registry -> exactly one
    finished row; the other process is refused in one line (exit 2) or reuses that row (exit 0), never a second
    training"""
    args, db, folder = tu
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SUITE_NO_PROGRESS": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "suite", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), outs
    if codes == [0, 2]:
        err = next(e for p, (o, e) in zip(procs, outs) if p.returncode == 2).strip()
        assert "in use by another process" in err and "Traceback" not in err and err.count("\n") == 0, err
    else:
        assert any("reused finished run" in o for o, _ in outs), outs
    assert [r["status"] for r in _rows(db)] == ["finished"]


# ----------------------------------------------------------------------------- 2. reuse checks every value first

def test_out_naming_a_regular_file_is_refused_first(tu, capsys):
    """`suite graph tu --out FILE` (a regular file), with and without `--rerun` and with a finished run of the same
    config in the registry -> exit 2, one line naming the file, before anything is reused or trained"""
    args, db, folder = tu
    assert main(args) == 0  # a finished run of this config
    f = folder.parent / "file"
    f.write_text("not a folder")
    for extra in ([], ["--rerun"]):
        capsys.readouterr()
        assert main([*args[:-1], str(f), *extra]) == 2
        err = _one_line(capsys)
        assert str(f) in err and "is a file" in err and "--out" in err, err
    assert len(_rows(db)) == 1 and f.read_text() == "not a folder"


def test_negative_keep_checkpoints_is_refused_even_when_reused(tu, capsys):
    """`--keep-checkpoints -1` when a finished run of the config exists (reuse path) -> exit 2 naming
    keep_checkpoints, not 'reused finished run'"""
    args, db, folder = tu
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--keep-checkpoints", "-1"]) == 2
    assert "keep_checkpoints" in _one_line(capsys)


# ----------------------------------------------------------------------------- 3. cross-option rules before work

@pytest.mark.parametrize("extra,needle", [(["--svm-folds", "1"], "--svm-folds"), (["--svm-folds", "500"], "--svm-folds"),
                                          (["--eval-epochs", "50"], "--eval-epochs"),
                                          (["--eval-epochs", "0"], "--eval-epochs")])
def test_tu_fold_and_eval_epoch_rules_before_training(tu, capsys, extra, needle):
    """`suite graph tu --svm-folds 1|500` (500 > the smallest class), `--eval-epochs 50` with `--epochs 1`,
    `--eval-epochs 0` -> exit 2 with one line naming the flag, before any training (no checkpoint, no registry row)"""
    args, db, folder = tu
    assert main([*args, *extra]) == 2
    assert needle in _one_line(capsys)
    assert _rows(db) == [] and not (folder / "checkpoints").exists()


def test_text_flag_of_the_other_mode_is_refused(capsys, tmp_path):
    """`suite text train --mode unsup --hard-negative-weight 5` -> exit 2 naming the flag (it applies to --mode sup),
    not recorded unused in the config hash"""
    assert main(["text", "train", "--mode", "unsup", "--hard-negative-weight", "5", "--out", str(tmp_path / "o"),
                 "--no-resume"]) == 2
    assert "--hard-negative-weight" in _one_line(capsys)


def test_vision_min_ratio_without_its_rule_is_refused(capsys, tmp_path):
    """`suite vision pretrain --imbalance none --imbalance-min-ratio -1` -> exit 2 naming imbalance_min_ratio"""
    assert main(["vision", "pretrain", "--dataset", "digits", "--imbalance", "none", "--imbalance-min-ratio", "-1",
                 "--out", str(tmp_path / "o"), "--no-registry"]) == 2
    assert "imbalance_min_ratio" in _one_line(capsys)


def test_finetune_on_labels_that_are_all_non_numeric(tmp_path, monkeypatch, capsys):
    """`suite graph finetune-mol` on a CSV whose labels are all non-numeric -> exit 2 'no usable label', not a
    finished run with ROC-AUC nan"""
    smiles = ["CCO", "CCN", "CCC", "c1ccccc1", "c1ccncc1", "CC(=O)O", "CC(=O)N", "C1CCCCC1", "C1CCNCC1", "OCCO"] * 2
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + "".join(f"{i},m{i},yes,{s}\n"
                                                                         for i, s in enumerate(smiles)))
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("SUITE_REGISTRY", str(db))
    code = main(["graph", "finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path), "--init", "none",
                 "--epochs", "1", "--split", "random", "--num-layers", "2", "--emb-dim", "8", "--device", "cpu",
                 "--out", str(tmp_path / "ft")])
    assert code == 2
    assert "no usable label" in _one_line(capsys)
    assert all(r["status"] != "finished" for r in _rows(db))


# ----------------------------------------------------------------------------- 4. numbers

@pytest.mark.parametrize("name", HYPERSPHERE)
def test_hypersphere_loss_on_zero_embeddings(name):
    """every hypersphere loss (L2-normalising) on all-zero embeddings -> ValueError 'zero vector' (the cosine of a
    zero vector is undefined), not a finite value with a zero gradient"""
    cls = L.loss_class(name)
    z = torch.zeros(6, 4)
    kw = {"labels": torch.arange(6) % 2} if "labels" in cls.requires else {}
    if "similarity" in cls.requires:
        kw["similarity"] = torch.eye(6)
    with pytest.raises(ValueError, match="zero vector"):
        L.build(name)(torch.stack([z, z, z]) if cls.multi_view else z, None if cls.multi_view else z, **kw)


@pytest.mark.parametrize("name", ["tsimclr", "simclr_l2"])
def test_euclidean_losses_finite_at_1e20(name):
    """`tsimclr` and `simclr_l2` on finite float32 embeddings around 1e20 -> finite, equal to the float64 reference
    (a stable formula: the squares overflow float32) with finite gradients"""
    from tests import reference as R

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 5, generator=g) * 1e20, torch.randn(8, 5, generator=g) * 1e20
    za, zb = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    out = L.build(name)(za, zb)
    out.backward()
    ref = float(getattr(R, name)(a.double(), b.double()))
    assert math.isfinite(float(out)) and float(out) == pytest.approx(ref, rel=1e-5)
    assert bool(torch.isfinite(za.grad).all() and torch.isfinite(zb.grad).all())


def test_loss_inputs_on_two_devices():
    """a loss given z_a on cpu and z_b on meta -> ValueError naming both devices, not 'Tensor.item() cannot be called
    on meta tensors'"""
    with pytest.raises(ValueError, match=r"z_b is on device meta but z_a is on cpu"):
        L.build("infonce")(torch.randn(4, 3), torch.randn(4, 3, device="meta"))
    with pytest.raises(ValueError, match=r"queue is on device meta but z_a is on cpu"):
        L.build("infonce")(torch.randn(4, 3), torch.randn(4, 3), queue=torch.randn(5, 3, device="meta"))


@pytest.mark.parametrize("hp", [{"temperature": 1e-45}, {"temperature": 1e-39}])
def test_temperature_that_underflows_is_refused_at_build(hp):
    """`build('infonce', temperature=1e-45)` (a positive value whose reciprocal overflows float32) -> ValueError at
    build naming the value, not NaN at the first step"""
    with pytest.raises(ValueError, match=rf"temperature = {hp['temperature']}"):
        L.build("infonce", **hp)


def test_mol_pretraining_with_graphs_passed_in_records_the_undefined_rate(tmp_path, monkeypatch):
    """`graph.mol.pretrain.pretrain(cfg, graphs=...)` with the registry on (the featurisation rate is undefined: it
    did not featurise) -> the run finishes; the undefined value is not logged but counted (undefined_values)"""
    from graph.mol.data import featurize
    from graph.mol.pretrain import PretrainMolConfig, pretrain

    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("SUITE_REGISTRY", str(db))
    graphs = featurize(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "C1CCCCC1", "OCCO", "NCCN"])
    res = pretrain(PretrainMolConfig(epochs=1, batch_size=4, num_layers=2, emb_dim=8, out=str(tmp_path / "pre"),
                                     device="cpu"), graphs=graphs)
    (run,) = _rows(db)
    assert run["status"] == "finished" and res.run_id == run["id"]
    fm = Registry(str(db)).final_metrics(run["id"])
    assert ("featurize_mol_per_s", "data") not in fm and fm[("undefined_values", "info")] == 1.0


# ----------------------------------------------------------------------------- 5. faults

def test_disk_full_during_a_run_checkpoint(tu, capsys, monkeypatch):
    """the disk fills while `suite graph tu` writes its second checkpoint -> exit 2, one line 'could not write
    checkpoint ...: no space left on device', no .tmp left; the first checkpoint is intact and the same command resumes
    it and finishes"""
    from suite.train import checkpoint as ck

    args, db, folder = tu
    args = [*args[:args.index("--epochs")], "--epochs", "2", *args[args.index("--epochs") + 2:], "--keep-checkpoints", "2"]
    real = ck._Recording.write
    calls = {"saves": 0}
    real_save = ck.save_checkpoint

    def counting_save(path, state):
        calls["saves"] += 1
        return real_save(path, state)

    def full(self, data):
        if calls["saves"] >= 2:
            exc = OSError(errno.ENOSPC, "No space left on device")
            self.error = self.error or exc
            raise exc
        return real(self, data)

    monkeypatch.setattr(ck._Recording, "write", full)
    monkeypatch.setattr("suite.train.engine.save_checkpoint", counting_save)
    assert main(args) == 2
    err = _one_line(capsys)
    assert "could not write checkpoint" in err and "no space left on device" in err, err
    cks = sorted((folder / "checkpoints").iterdir())
    assert [p.name for p in cks] == ["step-000000003.pt"], cks  # epoch 1 (3 batches of 16 of 40 graphs), no .tmp
    monkeypatch.undo()
    monkeypatch.setenv("SUITE_REGISTRY", str(db))
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    assert main(args) == 0
    assert [r["status"] for r in _rows(db)] == ["finished"]  # the failed row was continued by the resumed run


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGUSR2"])
def test_sigterm_during_a_run_is_one_line(tu, capsys, monkeypatch, sig):
    """SIGTERM, or SIGUSR2 (SLURM's warning before a job's time limit, which submitit asks for), while `suite graph tu`
    trains -> one line saying the run was interrupted by it and the folder it resumes from, exit 130, no traceback; the
    registry row is 'interrupted', naming the signal"""
    from graph.tu.graphcl import TUTask

    args, db, folder = tu
    args = [*args[:args.index("--epochs")], "--epochs", "3", *args[args.index("--epochs") + 2:]]
    real = TUTask.on_epoch

    def term_after_first(self, cfg, ctx, training, epoch, stats):
        real(self, cfg, ctx, training, epoch, stats)
        os.kill(os.getpid(), getattr(signal, sig))
        time.sleep(1)  # the handler raises here

    monkeypatch.setattr(TUTask, "on_epoch", term_after_first)
    assert main(args) == 130
    err = _one_line(capsys)
    # stopped inside the first epoch's end, before its checkpoint: the line says the run starts over (issue 80; it
    # said "resumes from its last checkpoint" of a checkpoint that did not exist)
    assert f"interrupted ({sig}" in err and str(folder) in err and "no checkpoint" in err and "starts it over" in err, err
    assert [(r["status"], r["error"]) for r in _rows(db)] == [("interrupted", f"KeyboardInterrupt/{sig}")]


def test_slurm_warning_then_sigterm_at_once_is_one_interrupt(tu, capsys, monkeypatch):
    """SLURM's warning (SIGUSR2) and the SIGTERM of a requeue arriving together, both pending before Python runs a
    handler (held by the signal mask, then let through at once) -> one interruption by the first, recorded as such,
    exit 130, no exception lost. Ignoring the second with SIG_IGN made Python raise "OSError: Signal 15 ignored due to
    race condition" out of the first's handling, while the row's end was written (in process it was lost as
    unraisable; on the one-node SLURM cluster the requeued job ended failed)."""
    from graph.tu.graphcl import TUTask

    args, db, folder = tu
    args = [*args[:args.index("--epochs")], "--epochs", "3", *args[args.index("--epochs") + 2:]]
    real = TUTask.on_epoch
    both = {signal.SIGUSR2, signal.SIGTERM}

    def both_after_first(self, cfg, ctx, training, epoch, stats):
        real(self, cfg, ctx, training, epoch, stats)
        signal.pthread_sigmask(signal.SIG_BLOCK, both)
        for sig in (signal.SIGUSR2, signal.SIGTERM):  # to this thread, whose mask holds them (another thread's would not)
            signal.pthread_kill(threading.get_ident(), sig)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, both)  # both delivered now; Python's handlers run next
        time.sleep(1)

    monkeypatch.setattr(TUTask, "on_epoch", both_after_first)
    lost = []  # exceptions Python could not raise (the OSError, raised while the row's end was written, lands here)
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(f"{u.exc_type.__name__}: {u.exc_value}"))
    assert main(args) == 130
    err = _one_line(capsys)
    assert "interrupted (SIGUSR2" in err and not lost, (err, lost)
    assert [(r["status"], r["error"]) for r in _rows(db)] == [("interrupted", "KeyboardInterrupt/SIGUSR2")]


def test_registry_in_a_read_only_folder(tmp_path, monkeypatch, capsys):
    """a registry whose folder is read-only -> `suite results list` and `show` work; writing a run fails with one line
    saying the folder is read-only (as root, who may write anyway, the folder is made to look read-only)"""
    import suite.registry.store as store

    db = tmp_path / "ro" / "r.sqlite"
    rid = Registry(str(db)).start_run(modality="m", task="t", dataset="d", loss="l")
    if os.geteuid() == 0:
        monkeypatch.setattr(store, "_writable", lambda folder: Path(folder) != db.parent)
    else:
        os.chmod(db.parent, 0o555)
    try:
        assert main(["results", "list", "--registry", str(db)]) == 0
        assert rid[:10] in capsys.readouterr().out
        assert main(["results", "show", rid[:8], "--registry", str(db)]) == 0
        capsys.readouterr()
        with pytest.raises(store.RegistryError, match=rf"the folder {db.parent} is read-only"):
            Registry(str(db)).start_run(modality="m", task="t", dataset="d", loss="l")
    finally:
        os.chmod(db.parent, 0o755)


def test_registry_url_without_its_driver(capsys):
    """`suite results list --registry mysql://x/y` without the MySQL driver -> exit 2, one line naming the missing
    driver (MySQLdb) and the package to install"""
    pytest.importorskip("sqlalchemy")
    try:
        import MySQLdb  # noqa: F401
        pytest.skip("the MySQL driver is installed here")
    except ImportError:
        pass
    assert main(["results", "list", "--registry", "mysql://x/y"]) == 2
    err = _one_line(capsys)
    assert "MySQLdb" in err and "not installed" in err and "mysqlclient" in err, err


@pytest.mark.parametrize("typed", ["%", "_", "%%", "_%"])
def test_typed_run_id_is_literal_not_a_pattern(tmp_path, capsys, typed):
    """`suite results show %` (or `_`) with one run in the registry -> 'no run with id' (exit 2): a typed prefix is
    taken literally, never as a LIKE pattern that matches any run"""
    db = tmp_path / "r.sqlite"
    Registry(str(db)).start_run(modality="m", task="t", dataset="d", loss="l")
    assert main(["results", "show", typed, "--registry", str(db)]) == 2
    assert "no run with id" in _one_line(capsys)
