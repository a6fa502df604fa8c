"""The papers' ImageNet settings in one suite file (issue 65): it dry-runs on the SLURM executor with every setting
it names, each job's arguments make a valid pretraining config, a missing data root is one line naming it and its
layout, and GPU-hours come from a measured rate only."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.runner.gpu_hours import RATE_METRIC, RATE_TASK, estimate
from benchmarks.runner.suitefile import load_suite
from suite.config import load_config
from suite.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


def _bench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suite", "bench", *args], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=240)


def test_every_setting_named_dry_runs_on_slurm(tmp_path):
    """every paper setting the file names is a job (MACL Tables 7, 8, Fig. 3 and B.1; CACR Table 15's ImageNet-100 row;
    X-CLR on ImageNet-1K and CC3M; t-MoCo-v2 200 epochs), each submitted with its resources; with the data unset the
    dry run says which roots are missing and what they must hold, and that no GPU rate is measured yet"""
    env = {k: "" for k in ("IMAGENET", "IMAGENET100", "CC3M")}
    env["SUITE_REGISTRY"] = str(tmp_path / "r.sqlite")
    p = _bench(["run", "paper-imagenet", "--dry-run", "--executor", "slurm"], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("would submit (slurm")]
    assert len(lines) == 40 and all("'gpus': 8" in ln and "'tasks': 8" in ln for ln in lines)
    said = p.stdout
    for loss in ("infonce", "macl", "supcon", "xclr", "tsimclr", "cacr", "align_uniform", "hard_negative"):
        assert f"--loss {loss} " in said
    for setting in ("--queue-size 65536", "--queue-size 256", "--views 5", "--batch-size 256", "wds:$CC3M",
                    "--loss-hparams tau0=0.05", "--loss-hparams reweight=false", "--optimizer lars"):
        assert setting in said, setting
    assert said.count("note: data ") == 3 and "$IMAGENET/train/<wnid>/*.JPEG" in said
    assert "GPU-hours: not estimated for 40 resnet50 job(s) at 224" in said


def test_each_job_is_a_valid_pretraining_config(tmp_path, monkeypatch):
    """every job's arguments, with the roots set, build a PretrainConfig that the front-end's own checks accept (an
    option the suite names that the front-end lacks would fail here, not on the cluster)"""
    from vision.config import PretrainConfig
    from vision.train import check_config

    folder = tmp_path / "in"
    (folder / "train" / "n0").mkdir(parents=True)
    for name in ("IMAGENET", "IMAGENET100"):
        monkeypatch.setenv(name, str(folder))
    monkeypatch.setenv("CC3M", str(tmp_path / "cc3m-{00000..00001}.tar"))
    _, jobs = load_suite("paper-imagenet")
    for j in jobs:
        values = {k.replace("-", "_"): v for k, v in j.values()}
        if "loss_hparams" in values:
            values["loss_hparams"] = dict(kv.split("=") for kv in values["loss_hparams"].split(","))
            values["loss_hparams"] = {k: (v == "true" if v in ("true", "false") else float(v))
                                      for k, v in values["loss_hparams"].items()}
        cfg = load_config(PretrainConfig, None, {**values, "seed": j.seed})
        check_config(cfg)
        assert cfg.encoder == "resnet50" and cfg.recipe == "imagenet"


def test_a_run_without_its_data_is_one_line(tmp_path):
    p = _bench(["run", "paper-imagenet", "--only", "tsimclr"], {"IMAGENET": str(tmp_path / "none"),
                                                               "SUITE_REGISTRY": str(tmp_path / "r.sqlite")}, tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and f"$IMAGENET is {tmp_path / 'none'}, which does not exist" in err[0], p.stderr


def test_gpu_hours_from_a_measured_rate(tmp_path):
    """a GPU row of the step rate (task image-loader) gives each job epochs x images / rate / 3600 GPU-hours, quoted
    with its device and code version; a CPU row is not a GPU rate"""
    reg = Registry(f"sqlite:///{tmp_path / 'r.sqlite'}")
    for gpu, rate in (("", 10.0), ("NVIDIA H200", 2500.0)):
        run = reg.start_run(task=RATE_TASK, modality="vision", dataset="generated", loss="infonce",
                            config={"encoder": "resnet50", "image_size": 224, "gpu": gpu})
        reg.log_metrics(run, {RATE_METRIC: rate}, split="bench")
        reg.finish(run)
    _, jobs = load_suite("paper-imagenet")
    t = [j for j in jobs if "tsimclr" in j.label()]  # ImageNet-1K, 200 epochs
    lines = estimate("paper-imagenet", t, reg)
    hours = 200 * 1281167 / 2500.0 / 3600
    assert lines[0].startswith(f"GPU-hours: {hours:,.0f} for the resnet50 jobs at 224 (rate 2,500 images/s per GPU "
                               "measured on NVIDIA H200"), lines
