"""The papers' ImageNet settings in one suite file (issues 65, 75): it dry-runs on the SLURM executor with every setting
it names, each job's arguments make a valid pretraining config, a missing data root is one line naming it and its
layout, GPU-hours come from a measured rate only, and every job's resolved settings match the papers' as the file
writes them, with a reading for each departure (``--explain``)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.runner.gpu_hours import RATE_METRIC, RATE_TASK, estimate, job_hours
from benchmarks.runner.suitefile import load_suite
from suite.config import load_config
from suite.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


def _bench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suite", "bench", *args], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_every_setting_named_dry_runs_on_slurm(tmp_path):
    """every paper setting the file names is a job (MACL Tables 1, 6, 7, 8, Fig. 3 and B.1; CACR Table 15's two columns;
    X-CLR on ImageNet-1K (5 seeds) and CC3M; t-MoCo-v2 and its tau x t_df grid), each submitted with its resources;
    with the data unset the
    dry run says which roots are missing and what they must hold, and that no GPU rate is measured yet"""
    env = {k: "" for k in ("IMAGENET", "IMAGENET100", "CC3M")}
    env["SUITE_REGISTRY"] = str(tmp_path / "r.sqlite")
    p = _bench(["run", "paper-imagenet", "--dry-run", "--executor", "slurm"], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("would submit (slurm")]
    assert len(lines) == N_JOBS and all("'gpus': 8" in ln and "'tasks': 8" in ln for ln in lines)
    said = p.stdout
    for loss in ("infonce", "macl", "supcon", "xclr", "tsimclr", "cacr", "align_uniform", "hard_negative", "dcl", "cmc"):
        assert f"--loss {loss} " in said
    for setting in ("--queue-size 65536", "--queue-size 256", "--views 5", "--batch-size 256", "wds:$CC3M",
                    "--loss-hparams tau0=0.05", "--loss-hparams reweight=false", "--optimizer lars", "--epochs 800",
                    "--lr 2.4", "--loss-hparams t_pos=1,t_neg=2", "--loss-hparams temperature=0.07",
                    "--loss-hparams temperature=0.2,t_df=15", "--seed 4", "--recipe simclr-imagenet"):
        assert setting in said, setting
    assert said.count("note: data ") == 3 and "$IMAGENET/train/<wnid>/*.JPEG" in said
    assert f"GPU-hours: not estimated for {N_JOBS} resnet50 job(s) at 224" in said
    assert "eval-train-per-class" not in said  # every paper's probe and kNN bank: the full train split


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
        assert cfg.encoder == "resnet50" and cfg.eval_train_per_class == 0
        assert cfg.recipe == {"simclr": "simclr-imagenet", "moco": "imagenet"}[cfg.framework]  # SimCLR's / MoCo v2's


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
    t = [j for j in jobs if "tsimclr" in j.label()]  # ImageNet-1K, 200 epochs: the chosen setting and the grid
    lines = estimate("paper-imagenet", t, reg)
    hours = 200 * 1281167 / 2500.0 / 3600
    assert lines[0].startswith(f"GPU-hours: {len(t) * hours:,.0f} for the resnet50 jobs at 224 (rate 2,500 images/s "
                               "per GPU measured on NVIDIA H200"), lines
    per_job = [ln for ln in lines if ln.startswith(f"GPU-hours: {hours:,.0f} (200 epochs x 1,281,167 images")]
    assert len(per_job) == len(t)  # each job's own figure
    k4 = [j for j in jobs if "--views 5" in j.label()]
    assert all(v.startswith("not estimated: it trains on 5 views") for v in job_hours("paper-imagenet", k4,
                                                                                       reg).values())


N_JOBS = 84


def test_every_departure_from_the_papers_has_a_reading():
    """each job's settings, resolved as the front-end resolves them (its parser, config, loss factory), match the
    papers' values the file writes with their sources, or name a reading; every group says what it reproduces"""
    from benchmarks.runner.explain import groups, unread

    gs = groups("paper-imagenet")
    assert sum(len(g.jobs) for g in gs) == N_JOBS
    assert all(g.reproduces and g.paper for g in gs)
    assert all(spec["source"] for g in gs for spec in g.paper.values())
    assert unread("paper-imagenet") == []


def test_the_loss_settings_are_the_papers():
    """CACR on ImageNet: t+ 1, t- 2 at K = 1 and K = 4, K = 4 at a quarter of K = 1's batch; AU-CL t 3; X-CLR's
    ImageNet-1K job probes with SGD; no job caps the kNN bank or the probe's training images"""
    from benchmarks.runner.explain import resolve

    _, jobs = load_suite("paper-imagenet")
    got = [resolve(j) for j in jobs]
    cacr = [r for r in got if r["loss"] == "cacr"]
    assert len(cacr) == 4 and all(r["cacr.t_pos"] == 1.0 and r["cacr.t_neg"] == 2.0 for r in cacr)
    for data, batch in (("IMAGENET100", 128), ("IMAGENET", 256)):
        mine = [r for r in got if r["dataset"] == f"folder:${data}" and r["framework"] == "moco"
                and r["lr"] == 0.03 and r["loss"] in ("cacr", "cmc", "infonce", "hard_negative", "align_uniform")]
        assert {r["global_batch"] for r in mine if r["views"] == 2} == {batch}
        assert {r["global_batch"] for r in mine if r["views"] == 5} == {batch // 4}
    au = [r for r in got if r["loss"] == "align_uniform"]
    assert len(au) == 2 and all(r["align_uniform.t"] == 3.0 for r in au)
    xclr = [r for r in got if r["loss"] == "xclr" and r["dataset"] == "folder:$IMAGENET"]
    assert len(xclr) == 5 and all(r["probe"] == "sgd" for r in xclr)
    assert all(r["eval_train_per_class"] == 0 for r in got)
    assert {r["tsimclr.temperature"] for r in got if r["loss"] == "tsimclr"} == {0.2, 2.0, 5.0, 10.0}


def test_explain_marks_a_departure_and_its_reading(tmp_path):
    """--explain prints ours beside the paper's with its source; a departure without a reading is listed by unread(),
    one with a reading is marked '!' with it, a silent paper '?', and a reading naming no paper setting is caught"""
    from benchmarks.runner.explain import explain, unread

    def suite(readings: str) -> Path:
        p = tmp_path / "s.yaml"
        p.write_text(f"""name: s
jobs:
  - frontend: vision
    command: pretrain
    reproduces: "Paper Table 9"
    args: {{dataset: cifar10, epochs: 200, batch-size: 64, loss: macl}}
    paper:
      epochs: {{value: 100, source: "Paper Sec. 4", quote: "trained for 100 epochs"}}
      global_batch: {{value: 64, source: "Paper Table 9"}}
      momentum: {{value: null, source: "Paper (silent)"}}
      macl.tau0: {{value: 0.1, source: "Paper App. B"}}
      infonce.temperature: {{value: 0.5, source: "Paper App. B"}}
    readings: {readings}
""")
        return p

    p = suite("{momentum: 'SGD momentum 0.9, the usual'}")
    assert [ln.split(":")[1].strip() for ln in unread(p)] == ["epochs ours 200 vs paper 100 [Paper Sec. 4] has no "
                                                             "reading (vision pretrain --batch-size 64 --dataset "
                                                             "cifar10 --epochs 200 --loss macl)"]
    p = suite("{momentum: 'SGD momentum 0.9, the usual', epochs: 'twice as long, to converge'}")
    assert unread(p) == []
    text = "\n".join(explain(p, hours={}))
    assert "reproduces: Paper Table 9" in text and '"trained for 100 epochs"' in text
    marks = {ln.split()[1]: ln.split()[0] for ln in text.splitlines() if ln.startswith("   ")
             and ln.split()[0] in ("=", "!", "?", "UNREAD")}
    assert marks == {"epochs": "!", "global_batch": "=", "momentum": "?", "macl.tau0": "="}  # infonce's: not this job
    assert "reading: twice as long, to converge" in text
    p = suite("{momentum: 'x', epochs: 'y', epoch: 'a typo'}")
    assert unread(p) == ["group 0: reading 'epoch' names no setting of its paper block"]


def test_the_docs_page_says_which_table_each_job_reproduces():
    """docs/paper-imagenet.md holds the suite's table of what each job group reproduces, as the file says it"""
    from benchmarks.runner.explain import reproduces_table

    page = (ROOT / "docs" / "paper-imagenet.md").read_text(encoding="utf-8")
    assert reproduces_table("paper-imagenet") in page
