"""Reliability round four (issue 36), the project's own probes: found by reading the code as an attacker would, in
four classes: concurrency (who holds a run folder), reuse (what is checked before a finished run is reused),
cross-option rules (a setting of another mode or out of its range, refused before data is read), numeric ranges
(scales and hyper-parameters float32 cannot hold)."""
from __future__ import annotations

import math
import re
import signal
import threading
from pathlib import Path

import pytest
import torch

import suite.losses as L
from suite.cli import main
from suite.registry import Registry
from tests.reliability.test_round_four import _holder, _one_line, _rows, tu  # noqa: F401 (fixture)

HYPERSPHERE = [n for n in L.available() if L.loss_class(n).hypersphere]


def _call(name: str, loss, za, zb):
    cls = L.loss_class(name)
    n = za.shape[0]
    kw = {"labels": torch.arange(n) % 2} if "labels" in cls.requires else {}
    if "similarity" in cls.requires:
        kw["similarity"] = torch.eye(n, dtype=za.dtype)
    if cls.multi_view:
        return loss(torch.stack([za, zb, zb + 0.25 * za]))
    return loss(za, zb, **kw)


def _pair(scale: float = 1.0, n: int = 8, d: int = 5):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(n, d, generator=g)
    return a * scale, (a + 0.3 * torch.randn(n, d, generator=g)) * scale


# ----------------------------------------------------------------------------- concurrency

def test_lock_of_a_killed_process_does_not_block():
    """a process holding a run folder is SIGKILLed -> the next `hold_folder` on that folder succeeds at once (the
    kernel drops a flock with its process; no stale lock file blocks forever)"""
    import tempfile

    from suite.train.run import hold_folder

    with tempfile.TemporaryDirectory() as d:
        p = _holder(Path(d))
        p.send_signal(signal.SIGKILL)
        p.wait()
        with hold_folder(d) as f:
            assert (Path(f) / ".lock").read_text().strip() == str(__import__("os").getpid())


def test_second_thread_on_a_held_folder_is_refused(tmp_path):
    """a second thread of the same process runs on a folder the first holds -> FolderBusyError naming the folder (a
    re-entrant lock must not let two threads write one run); the holding thread itself may re-enter"""
    from suite.train.run import FolderBusyError, hold_folder

    seen: list[BaseException] = []
    with hold_folder(tmp_path / "run"):
        with hold_folder(tmp_path / "run"):  # the same thread: re-entrant (a front-end looks up, then runs)
            pass

        def other() -> None:
            try:
                with hold_folder(tmp_path / "run"):
                    pass
            except BaseException as exc:  # noqa: BLE001
                seen.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(seen) == 1 and isinstance(seen[0], FolderBusyError) and str(tmp_path / "run") in str(seen[0])
    with hold_folder(tmp_path / "run"):  # released by the holder: free again
        pass


def test_run_owner_refuses_a_folder_another_process_holds(tmp_path):
    """`suite.train.run.run` on a folder another process holds -> FolderBusyError before the task builds anything"""
    from suite.train.run import FolderBusyError, Task, run

    built = []

    class T(Task):
        name = "probe"

        def build(self, cfg, ctx):
            built.append(1)
            raise AssertionError("must not build")

    class Cfg:
        seed, out, device = 0, str(tmp_path / "run"), "cpu"

    p = _holder(tmp_path / "run")
    try:
        with pytest.raises(FolderBusyError, match=rf"pid {p.pid}"):
            run(T(), Cfg(), registry=False)
    finally:
        p.kill()
        p.wait()
    assert built == []


def test_finished_twin_is_reused_not_retrained(tu, capsys):  # noqa: F811
    """the same `suite graph tu` command run again after the first finished -> the finished row is reused (one
    finished row, no second training)"""
    args, db, folder = tu
    assert main(args) == 0 and main(args) == 0
    assert "reused finished run" in capsys.readouterr().out
    assert [r["status"] for r in _rows(db)] == ["finished"]


# ----------------------------------------------------------------------------- reuse: every value first

@pytest.mark.parametrize("extra,needle", [(["--checkpoint-every", "-1"], "checkpoint_every"),
                                          (["--seed", "-1"], "seed"), (["--device", "tpu"], "device")])
def test_bad_run_option_refused_even_when_reused(tu, capsys, extra, needle):  # noqa: F811
    """`--checkpoint-every -1`, `--seed -1` or `--device tpu` when a finished run of the config is in the registry
    -> exit 2 naming the option, never 'reused finished run'"""
    args, db, folder = tu
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, *extra]) == 2
    err = _one_line(capsys)
    assert needle in err, err


def test_out_under_a_regular_file_is_refused_before_data(tu, capsys):  # noqa: F811
    """`--out FILE/run` (a path under a regular file) -> exit 2 naming the file before the data is read or a model
    trained (it failed after an epoch on '.../checkpoints')"""
    args, db, folder = tu
    f = folder.parent / "plain"
    f.write_text("x")
    assert main([*args[:-1], str(f / "run")]) == 2
    err = _one_line(capsys)
    assert str(f) in err and "is a file" in err, err
    assert _rows(db) == []


# ----------------------------------------------------------------------------- cross-option rules

def test_svm_inner_folds_below_two_refused():
    """`TUConfig(svm_inner_folds=1)` -> ValueError naming --svm-inner-folds (the inner grid search needs two folds)"""
    from graph.tu.graphcl import TUConfig

    with pytest.raises(ValueError, match="--svm-inner-folds"):
        TUConfig(svm_inner_folds=1)


def test_svm_inner_folds_too_many_for_the_data_before_training(tu, capsys):  # noqa: F811
    """`--svm-inner-folds 30` on 40 graphs (an outer fold's training part holds fewer of any class) -> exit 2 naming
    --svm-inner-folds after the data is read, before training (no checkpoint, no row)"""
    args, db, folder = tu
    assert main([*args, "--svm-inner-folds", "30"]) == 2
    assert "--svm-inner-folds" in _one_line(capsys)
    assert _rows(db) == [] and not (folder / "checkpoints").exists()


@pytest.mark.parametrize("field,value", [("lr", math.inf), ("lr", math.nan), ("hidden", 0), ("layers", 0)])
def test_tu_numeric_settings_refused_at_config(field, value):
    """`TUConfig(lr=inf|nan)` (accepted: `lr <= 0` is False for NaN) and `hidden=0` / `layers=0` -> ValueError naming
    the field when the config is made, not NaN losses or a shape error after the data is read"""
    from graph.tu.graphcl import TUConfig

    with pytest.raises(ValueError, match=field):
        TUConfig(**{field: value})


def test_eval_epochs_default_still_allowed_for_short_runs():
    """`TUConfig(epochs=3)` with the protocol's default eval epochs [10, 20] -> accepted (a short run evaluates its
    last epoch); an explicit `--eval-epochs 5` with `--epochs 3` -> refused"""
    from graph.tu.graphcl import TUConfig

    TUConfig(epochs=3)
    with pytest.raises(ValueError, match="--eval-epochs 5"):
        TUConfig(epochs=3, eval_epochs=[2, 5])


def test_text_sup_with_unsup_sentences_flag_refused(capsys, tmp_path):
    """`suite text train --mode sup --add-sts-sick-train` -> exit 2 naming the flag (it adds unlabelled sentences to
    --mode unsup), not recorded unused"""
    assert main(["text", "train", "--mode", "sup", "--add-sts-sick-train", "--out", str(tmp_path / "o")]) == 2
    assert "--add-sts-sick-train" in _one_line(capsys)


def test_text_hard_negative_weight_nan_refused():
    """`SimCSEConfig(mode='sup', hard_negative_weight=nan)` -> ValueError naming it before anything is loaded"""
    from text.methods.simcse import SimCSEConfig, check_config

    with pytest.raises(ValueError, match="hard_negative_weight"):
        check_config(SimCSEConfig(mode="sup", hard_negative_weight=math.nan))


@pytest.mark.parametrize("kw,needle", [({"imbalance": "linear", "imbalance_min_ratio": 0.5}, "--imbalance-min-ratio"),
                                       ({"imbalance": "exponential", "imbalance_min_ratio": 0.0}, "imbalance_min_ratio"),
                                       ({"iou_tau": 0.5}, "--iou-weights"), ({"iou_weights": True, "iou_tau": 0.0},
                                                                             "iou_tau")])
def test_vision_settings_of_another_rule_refused(kw, needle):
    """vision: `--imbalance linear --imbalance-min-ratio 0.5` (a setting of the exponential rule), min ratio 0,
    `--iou-tau 0.5` without `--iou-weights`, iou_tau 0 -> ValueError naming the flag before the data is read"""
    from vision.config import PretrainConfig
    from vision.train import check_config

    with pytest.raises(ValueError, match=needle):
        check_config(PretrainConfig(**kw))


@pytest.mark.parametrize("flag,value,needle", [("--dropout", "1.5", "dropout"), ("--lr", "nan", "lr"),
                                               ("--lr", "inf", "lr"), ("--weight-decay", "-1", "weight_decay"),
                                               ("--split", "bogus", "split")])
def test_finetune_settings_refused_before_the_data(tmp_path, capsys, flag, value, needle):
    """`suite graph finetune-mol` with `--dropout 1.5`, `--lr nan|inf`, `--weight-decay -1` or `--split bogus` on a
    data root that does not exist -> exit 2 naming the setting (checked before the data is read: not 'not found')"""
    assert main(["graph", "finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path / "none"), "--init", "none",
                 "--no-registry", "--out", str(tmp_path / "ft"), flag, value]) == 2
    err = _one_line(capsys)
    assert needle in err and "not found" not in err, err


# ----------------------------------------------------------------------------- numeric ranges

@pytest.mark.parametrize("scale", [1e20, 1e-30])
@pytest.mark.parametrize("name", HYPERSPHERE)
def test_hypersphere_losses_are_scale_invariant(name, scale):
    """every hypersphere loss on embeddings scaled by 1e20 (squares overflow float32) or 1e-30 (squares underflow,
    below F.normalize's eps) -> the value at scale 1 (it was the value of constant embeddings, silently)"""
    a, b = _pair()
    ref = float(_call(name, L.build(name), a, b))
    got = float(_call(name, L.build(name), a * scale, b * scale))
    assert got == pytest.approx(ref, rel=1e-5, abs=1e-6)


def test_one_zero_row_is_named():
    """one zero embedding among others (a dead row) -> ValueError naming the tensor and the row"""
    a, b = _pair()
    b[3] = 0.0
    with pytest.raises(ValueError, match=r"z_b: 1 of 8 embeddings are zero vectors \(first: row 3\)"):
        L.build("infonce")(a, b)


def test_zero_queue_entry_is_named():
    """a MoCo queue with a zero entry (never filled) -> ValueError naming the queue"""
    a, b = _pair()
    q = torch.randn(6, 5)
    q[2] = 0.0
    with pytest.raises(ValueError, match="queue: 1 of 6"):
        L.build("infonce")(a, b, queue=q)


@pytest.mark.parametrize("name,hp", [("cacr", {"t_neg": 1e39}), ("cacr", {"t_pos": 1e300}),
                                     ("hard_negative", {"beta": 1e39}), ("align_uniform", {"t": 1e39}),
                                     ("align_uniform", {"uniform_weight": 1e300}), ("tsimclr", {"t_df": 1e39}),
                                     ("xclr", {"target_temperature": 1e-39}), ("cmc", {"temperature": 1e-40})])
def test_hyper_parameters_outside_float32_refused_at_build(name, hp):
    """hyper-parameters float32 cannot hold (above 3.4e38, or positive below 1.2e-38) -> ValueError at build naming
    the setting and the value (they gave NaN or inf losses at the first step)"""
    (k, v), = hp.items()
    with pytest.raises(ValueError, match=re.escape(f"{k} = {v}")):
        L.build(name, **hp)


def test_tsimclr_kernel_scale_underflow_refused():
    """`build('tsimclr', temperature=1e-20, t_df=1e-20)` (each fine, their product 1e-40 below float32) -> ValueError
    naming 'temperature * t_df'"""
    with pytest.raises(ValueError, match=r"temperature \* t_df"):
        L.build("tsimclr", temperature=1e-20, t_df=1e-20)


@pytest.mark.parametrize("name", ["infonce", "dcl", "macl", "hard_negative", "tsimclr", "simclr_l2"])
def test_pair_weights_near_float32_max(name):
    """pair weights scaled by 1e38 (their mean overflowed: every weight became 0 and the loss 0) -> the loss of the
    same weights at scale 1 (weights are relative)"""
    a, b = _pair()
    w = torch.rand(8, generator=torch.Generator().manual_seed(2)) + 0.5
    ref = float(L.build(name)(a, b, weights=w))
    assert float(L.build(name)(a, b, weights=w * 1e38)) == pytest.approx(ref, rel=1e-5)


def test_labels_on_another_device_are_named():
    """supcon given labels on the meta device and embeddings on the CPU -> ValueError naming both devices"""
    a, b = _pair()
    with pytest.raises(ValueError, match="labels is on device meta but z_a is on cpu"):
        L.build("supcon")(a, b, labels=torch.zeros(8, dtype=torch.long, device="meta"))


def test_undefined_evaluation_metric_does_not_kill_the_run(tmp_path):
    """a task whose evaluation returns NaN (a metric that is undefined, e.g. ROC-AUC of one class) with the registry
    on -> the run finishes; the value is not logged but counted (undefined_values), not 'metric is NaN' at the end"""
    from dataclasses import dataclass
    from typing import ClassVar

    from suite.train.run import Task, Training, run

    @dataclass
    class Cfg:
        RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device")
        seed: int = 0
        out: str = str(tmp_path / "run")
        device: str = "cpu"

    class T(Task):
        modality, name, primary = "toy", "toy", ("acc", "test")

        def build(self, cfg, ctx):
            model = torch.nn.Linear(3, 2)
            x = torch.randn(8, 3)
            return Training(model, torch.optim.SGD(model.parameters(), lr=0.1), lambda e: [torch.arange(8)],
                            lambda idx: L.build("infonce")(model(x[idx]), model(x[idx] + 0.1)), epochs=1)

        def evaluate(self, cfg, ctx, training):
            return {"acc": float("nan"), "other": 0.5}

    reg = Registry(str(tmp_path / "r.sqlite"))
    res = run(T(), Cfg(), registry=reg)
    (row,) = reg.runs()
    fm = reg.final_metrics(res.run_id)
    assert row["status"] == "finished" and ("acc", "test") not in fm and fm[("other", "test")] == 0.5
    assert fm[("undefined_values", "info")] == 1.0


def test_registry_password_is_not_printed(capsys):
    """`suite results list --registry postgresql://me:secret@host/db` that cannot be opened -> the one-line error
    shows the URL with the password masked"""
    assert main(["results", "list", "--registry", "mysql://me:secret@nohost/db"]) == 2
    err = _one_line(capsys)
    assert "secret" not in err and "me:***@nohost" in err, err


def test_run_metric_that_is_not_a_number_is_named(tmp_path):
    """`run.log('acc', 'high')` inside a registry run -> ValueError naming the metric and the value"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    with pytest.raises(ValueError, match="metric 'acc' must be a number"):
        with reg.run(modality="m", task="t", dataset="d", loss="l") as r:
            r.log("acc", "high")  # type: ignore[arg-type]


def test_checkpoint_write_beyond_the_file_size_limit(tmp_path):
    """a checkpoint write stopped by the kernel (RLIMIT_FSIZE: 'File too large', like a full disk) -> OSError 'could
    not write checkpoint <path>: file too large', the previous checkpoint intact, no .tmp (torch raised
    'inline_container.cc ... unexpected pos' and left the temporary file)"""
    from suite.train import load_checkpoint, save_checkpoint
    from tests.reliability.limits import file_size_limit

    path = tmp_path / "ck.pt"
    save_checkpoint(path, {"w": torch.ones(3)})
    with file_size_limit(4096), pytest.raises(OSError, match=rf"could not write checkpoint {path}: file too large"):
        save_checkpoint(path, {"w": torch.randn(20000)})
    assert torch.equal(load_checkpoint(path)["w"], torch.ones(3)) and not (tmp_path / "ck.pt.tmp").exists()
