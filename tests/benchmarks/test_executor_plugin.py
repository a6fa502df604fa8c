"""A new executor is one new class (a module of its own) plus one line in the name table
(:data:`benchmarks.runner.executors.EXECUTORS`): toy backends that record their jobs instead of running them, named
``toy``, run a two-stage suite through ``suite bench run --executor toy`` with the plan's rules (stages in order,
finished jobs skipped, a stage after a failed one blocked) and an option of their own. The smallest one is the code
block of docs/design/executors.md, run as written."""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.runner.executors import EXECUTORS, Executor, Stage, executor_class
from benchmarks.runner.suitefile import Job, load_suite
from suite.cli import main
from suite.registry import Registry

PAGE = Path(__file__).resolve().parents[2] / "docs" / "design" / "executors.md"


class RecordingExecutor(Executor):
    """Runs nothing: claims each job, records its command line, and ends it finished (failed where its last argument
    is ``--toy-fail``)."""
    name = "toy"
    ran: list[list[str]] = []  # the command lines, across instances (the CLI builds its own)

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail

    @classmethod
    def options(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--toy-fail", default=None, help="toy: the jobs whose last argument is this fail")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Executor:
        return cls(fail=args.toy_fail)

    def run_stage(self, stage: Stage, jobs: list[Job], reg: Any) -> list[str]:
        assert type(stage) is Stage  # the plan's answers, never the plan
        out = []
        for job in jobs:
            settled = stage.settle(job, reg, "would record:")
            if settled is None:
                assert reg.claim_job(job.hash, job.label(), rerun=stage.rerun(job))
                stage.start(job)
                cmd = stage.command(job)
                RecordingExecutor.ran.append(cmd)
                settled = "failed" if cmd[-1] == self.fail else "finished"
                reg.finish_job(job.hash, settled, only_if=("running",))
                stage.end(job, 0.0 if settled == "finished" else None)
                if settled == "failed":
                    stage.failed(job.label(), stage.log_dir / f"{job.hash}.log")
            out.append(settled)
        return out


def _suite(tmp_path: Path) -> Path:
    group = {"frontend": "bench", "command": "losses", "args": {"losses": ["infonce"], "repeats": 1}}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump({"name": "toy", "jobs": [
        {**group, "grid": {"sizes": [[8], [16]]}},
        {**group, "stage": 1, "args": {**group["args"], "sizes": [32]}}]}))
    return path


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(EXECUTORS, "toy", f"{__name__}:RecordingExecutor")  # the one line a backend adds
    RecordingExecutor.ran.clear()
    return RecordingExecutor.ran


def test_the_design_pages_toy_executor_runs_a_suite(tmp_path, monkeypatch, capsys):
    """the page's backend, registered as a class under `toy`: the plan hands it each stage in order; every job is
    recorded once, its row finished; run again, every job is skipped and nothing is recorded"""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "class " in b]  # the backend (the other block is the table's line)
    page: dict[str, Any] = {"__name__": "executors_md"}
    exec(compile(block, str(PAGE), "exec"), page)
    monkeypatch.setitem(EXECUTORS, "toy", page["RecordingExecutor"])
    toy = page["RecordingExecutor"].ran
    monkeypatch.chdir(tmp_path)
    suite, db = _suite(tmp_path), str(tmp_path / "r.sqlite")
    _, jobs = load_suite(suite)
    argv = ["bench", "run", str(suite), "--executor", "toy", "--registry", db, "--allow-dirty"]
    assert executor_class("toy") is page["RecordingExecutor"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "suite toy: 3 jobs, on toy," in out and "summary: finished 3" in out, out
    assert [cmd[3:] for cmd in toy] == [j.argv() for j in sorted(jobs, key=lambda j: j.stage)]
    assert [j.stage for j in jobs].count(1) == 1 and toy[-1][-1] == "32"  # the later stage last
    reg = Registry(db)
    assert [reg.job_status(j.hash) for j in jobs] == ["finished"] * 3
    assert main(argv) == 0
    assert "summary: skipped 3" in capsys.readouterr().out and len(toy) == 3


def test_a_toy_executor_keeps_the_plans_rules_and_its_own_option(toy, tmp_path, monkeypatch, capsys):
    """a backend named by "module:Class": its own option (--toy-fail) reaches it; a failed job of stage 0 blocks stage 1 (the plan's rule, not the
    executor's) and is listed with its log; an unknown executor name is one line naming the known ones"""
    monkeypatch.chdir(tmp_path)
    suite, db = _suite(tmp_path), str(tmp_path / "r.sqlite")
    assert main(["bench", "run", str(suite), "--executor", "toy", "--toy-fail", "8", "--registry", db,
                 "--allow-dirty"]) == 1
    out = capsys.readouterr().out
    assert "summary: blocked 1, failed 1, finished 1" in out and "1 job(s) failed; their logs:" in out, out
    assert len(toy) == 2 and "[blocked]" in out
    with pytest.raises(ValueError, match="--executor must be one of local, slurm, ray, toy, got 'lsf'"):
        executor_class("lsf")


def test_bench_cancel_asks_the_backend_that_recorded_the_task(tmp_path, monkeypatch):
    """a row whose scheduler id is ``toy:<id>`` -> `bench cancel` hands <id> to the toy backend's cancel_tasks (the
    one hook; cancel.py names no backend) and signals no runner; a row with no backend's prefix, on this host, is
    stopped through its runner's pid (SIGTERM), as the local pool's are"""
    import os
    import signal
    import socket

    from benchmarks.runner import cancel

    asked: list[list[str]] = []

    class Cancelling(RecordingExecutor):
        @classmethod
        def cancel_tasks(cls, ids: list[str]) -> bool:
            asked.append(ids)
            return True

    monkeypatch.setitem(EXECUTORS, "toy", Cancelling)
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(cancel.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    reg = Registry(str(tmp_path / "r.sqlite"))
    _, jobs = load_suite(_suite(tmp_path))
    reg.claim_job(jobs[0].hash, jobs[0].label(), status="queued", scheduler_id="toy:41")
    reg.claim_job(jobs[1].hash, jobs[1].label(), status="queued", scheduler_id="toy:42")
    reg.claim_job(jobs[2].hash, jobs[2].label())  # a local job: this host, this test's pid
    reg.update_job(jobs[2].hash, ("running",), pid=os.getpid() + 1)
    assert reg.job(jobs[2].hash)["host"] == socket.gethostname()
    done = cancel.cancel_jobs(reg, jobs[:3])
    assert len(done) == 3 and asked == [["41", "42"]]
    assert killed == [(os.getpid() + 1, signal.SIGTERM)]
    assert {reg.job_status(j.hash) for j in jobs[:3]} == {"cancelled"}
