"""Benchmark runner: grid expansion, skip-by-hash, interrupt and resume without duplicates."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite
from benchmarks.runner.plan import Runner
from suite.registry import Registry


def _suite(tmp_path, n_jobs: int = 3):
    spec = {"name": "t", "jobs": [{
        "frontend": "bench", "command": "losses", "seeds": None,
        "grid": {"sizes": [[8 + 2 * k] for k in range(n_jobs)]},
        "args": {"losses": ["infonce"], "repeats": 1, "pml-check": False, "out": str(tmp_path / "x.md")},
    }]}
    spec["jobs"][0].pop("seeds")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_grid_expansion_and_argv(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "jobs": [{
        "frontend": "graph", "command": "tu", "seeds": [0, 1],
        "grid": {"dataset": ["MUTAG", "PROTEINS"], "loss": ["graphcl", "macl", "cacr"]},
        "args": {"epochs": 20, "bf16": True, "save": False}}]}))
    name, jobs = load_suite(path)
    assert name == "g" and len(jobs) == 12 and len({j.hash for j in jobs}) == 12
    argv = jobs[0].argv()
    assert argv[:2] == ["graph", "tu"] and "--bf16" in argv and "--no-save" in argv and argv[-2:] == ["--seed", "0"]
    runner = Runner("x.sqlite", launcher="torchrun", nproc_per_node=2)
    cmd = runner.command(jobs[0])
    assert "torch.distributed.run" in cmd and "--nproc-per-node=2" in cmd and cmd[cmd.index("-m", 2) + 1] == "suite"
    with pytest.raises(ValueError, match="suite file not found"):
        load_suite(tmp_path / "none.yaml")


def test_log_to_in_a_suite_file_is_a_run_option(tmp_path):
    """log_to / mlflow_uri beside `jobs` apply to every group, a group's own replace them; they become --log-to /
    --mlflow-uri and leave the job hashes as they were (a finished grid is not run again for a tracker); an unknown
    tracker, a non-string or an mlflow_uri without mlflow is one line when the file is loaded"""
    group = {"frontend": "graph", "command": "tu", "seeds": [0], "grid": {"loss": ["graphcl", "macl"]}}

    def load(top=None, own=None, name="t"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"name": name, **(top or {}), "jobs": [{**group, **(own or {})}, dict(
            group, command="mol-pretrain")]}))
        return load_suite(path)[1]

    plain = load()
    tracked = load({"log_to": "tensorboard"}, {"log_to": "tensorboard,mlflow", "mlflow_uri": "http://h:5000"})
    assert [j.hash for j in tracked] == [j.hash for j in plain]
    assert tracked[0].argv()[-4:] == ["--log-to", "tensorboard,mlflow", "--mlflow-uri", "http://h:5000"]
    assert tracked[-1].argv()[-2:] == ["--log-to", "tensorboard"] and "--mlflow-uri" not in tracked[-1].argv()
    for top, own, msg in (({"log_to": "tensorbord"}, None, "unknown tracker 'tensorbord'"),
                          (None, {"log_to": ["mlflow"]}, "log_to must be a string"),
                          ({"mlflow_uri": "http://h"}, {"log_to": "tensorboard"}, "mlflow_uri is set but log_to")):
        with pytest.raises(ValueError, match=msg):
            load(top, own, name="bad")


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_interrupted_sweep_resumes_without_duplicates(tmp_path):
    db = str(tmp_path / "r.sqlite")
    path = _suite(tmp_path, 3)
    _, jobs = load_suite(path)
    env = {**os.environ, "SUITE_REGISTRY": db}
    cmd = [sys.executable, "-m", "suite", "bench", "run", str(path), "--jobs", "1"]
    p = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reg = Registry(db)
    deadline = time.time() + 120
    while time.time() < deadline and not any(reg.job_status(j.hash) == "finished" for j in jobs):
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=60)[0]
    first = {j.hash: [x["id"] for x in reg.runs(status="finished") if x["config_hash"] == j.hash] for j in jobs}
    done_first = [j.hash for j in jobs if reg.job_status(j.hash) == "finished"]
    assert done_first and len(done_first) < len(jobs), out
    p2 = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p2.returncode == 0, p2.stdout + p2.stderr
    assert f"skipped {len(done_first)}" in p2.stdout
    for j in jobs:
        ids = [x["id"] for x in reg.runs(status="finished") if x["config_hash"] == j.hash]
        assert len(ids) == 3  # bench losses records the floor, infonce dense and tiled (--no-pml-check): one set
        if j.hash in done_first:
            assert ids == first[j.hash]  # not re-run
    # a third pass finds every job finished and starts nothing
    assert Runner(db, jobs=2, log_dir=tmp_path / "logs").run(jobs) == {"skipped": len(jobs)}


class _EchoRunner(Runner):
    """Runs a tiny Python child that reports the threads it got, instead of a front-end."""

    def command(self, job):
        return [sys.executable, "-c", "import os, torch; print('threads', torch.get_num_threads(), "
                "os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])"]


def test_thread_budget_jobs_times_threads_fit_the_cores(tmp_path):
    _, jobs = load_suite(_suite(tmp_path, 1))
    assert Runner("x", jobs=2, cores=2).thread_budget() == 1
    assert Runner("x", jobs=2, cores=16).thread_budget() == 8
    assert Runner("x", jobs=4, cores=2).thread_budget() == 1  # never 0
    assert Runner("x", jobs=2, cores=16, launcher="torchrun", nproc_per_node=4).thread_budget() == 2
    assert Runner("x", jobs=2, cores=16, threads=3).thread_budget() == 3  # --threads overrides
    env = Runner("x", jobs=2, cores=8).env(jobs[0])
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["SUITE_THREADS"] == "4"
    assert env["SUITE_CONFIG_HASH"] == jobs[0].hash


def test_child_process_sees_its_thread_budget(tmp_path, monkeypatch):
    """The make-demo case: 2 jobs on 2 cores, nothing set by the user -> each child runs torch with 1 thread."""
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(k, raising=False)
    _, jobs = load_suite(_suite(tmp_path, 1))
    runner = _EchoRunner(str(tmp_path / "r.sqlite"), jobs=2, cores=2, log_dir=tmp_path / "logs")
    assert runner.run(jobs) == {"finished": 1}
    log = (tmp_path / "logs" / f"{jobs[0].hash}.log").read_text()
    assert "threads 1 1 1" in log  # torch's intra-op pool follows OMP_NUM_THREADS


def _record_durations(reg: Registry, label: str, seconds: list[float]) -> None:
    """Finished jobs of a kind in the registry's jobs table, with the given durations."""
    import sqlalchemy as sa

    from suite.registry import jobs_t

    for i, s in enumerate(seconds):
        h = f"old{label.replace(' ', '')}{i}"
        reg.claim_job(h, f"{label} --x {i}")
        reg.finish_job(h, "finished")
        t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
        with reg.engine.begin() as conn:
            conn.execute(sa.update(jobs_t).where(jobs_t.c.hash == h).values(
                started_at=t0.isoformat(), ended_at=(t0 + timedelta(seconds=s)).isoformat()))


class _ExitRunner(Runner):
    """A child that exits with the code in the job's 'sizes' argument (0 = success)."""

    def command(self, job):
        code = dict(job.args)["sizes"][0] - 8
        return [sys.executable, "-c", f"import sys; sys.exit({code})"]


def test_progress_eta_from_recorded_durations(tmp_path, capsys):
    """jobs of a kind whose finished runs took 10, 20, 30 s -> progress lines count done / total and the running
    job, and the ETA is the median (20 s) per job left"""
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    _record_durations(reg, "bench losses", [10.0, 20.0, 30.0])
    assert reg.job_durations() == {"bench losses": [10.0, 20.0, 30.0]}
    _, jobs = load_suite(_suite(tmp_path, 2))  # sizes 8 and 10: exit 0 and 2
    runner = _ExitRunner(db, jobs=1, log_dir=tmp_path / "logs")
    counts = runner.run(jobs[:1])
    out = capsys.readouterr().out
    assert counts == {"finished": 1}
    start = next(l for l in out.splitlines() if l.startswith("[progress] 0/1 done, 1 running"))
    assert "ETA 20 s" in start or "ETA 19 s" in start  # one job of median 20 s, just started
    assert "[progress] 1/1 done, 0 running; ETA 0 s" in out


def test_progress_counts_jobs_finished_before_the_run_as_done(tmp_path, capsys):
    """a suite of 3 jobs of which the last 2 finished before this run (20 s each) -> the first progress line reads
    2/3 done and the ETA is the one job left (it read 0/3 done and counted the finished jobs as left until the pool
    reached them: a text-sts part at 5 of 28 jobs left showed 'ETA 69.9 min' for 25 min of work)"""
    import sqlalchemy as sa

    from suite.registry import jobs_t

    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    _, jobs = load_suite(_suite(tmp_path, 3))
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for j in jobs[1:]:
        reg.claim_job(j.hash, j.label())
        reg.finish_job(j.hash, "finished")
        with reg.engine.begin() as conn:
            conn.execute(sa.update(jobs_t).where(jobs_t.c.hash == j.hash).values(
                started_at=t0.isoformat(), ended_at=(t0 + timedelta(seconds=20)).isoformat()))
    runner = _ExitRunner(db, jobs=1, log_dir=tmp_path / "logs")
    assert runner.run(jobs) == {"finished": 1, "skipped": 2}
    out = capsys.readouterr().out
    start = next(l for l in out.splitlines() if l.startswith("[progress]"))
    assert start.startswith("[progress] 2/3 done, 1 running") and ("ETA 20 s" in start or "ETA 19 s" in start), out
    assert out.rstrip().endswith("[progress] 3/3 done, 0 running; ETA 0 s"), out


def test_estimate_reads_the_durations_of_imported_jobs(tmp_path):
    """a suite whose finished jobs came from an imported snapshot (job rows with no command) -> the dry run
    estimates the jobs left from their durations (it printed 0 s and counted every job unknown)"""
    import sqlalchemy as sa

    from suite.registry import runs_t

    _, jobs = load_suite(_suite(tmp_path, 3))
    a = Registry(str(tmp_path / "a.sqlite"))
    for j, secs in zip(jobs[:2], (40, 60)):
        rid = a.start_run(modality="m", task="t", dataset="d", loss="l", cfg_hash=j.hash)
        a.finish(rid, "finished")
        with a.engine.begin() as conn:
            conn.execute(sa.update(runs_t).where(runs_t.c.id == rid).values(
                started_at="2026-01-01T00:00:00+00:00", ended_at=f"2026-01-01T00:{secs // 60:02d}:{secs % 60:02d}+00:00"))
    snap = tmp_path / "snap.jsonl"
    snap.write_text(a.export_jsonl())
    db = str(tmp_path / "b.sqlite")
    Registry(db).import_jsonl(snap)
    runner = Runner(db, jobs=1, dry_run=True, log_dir=tmp_path / "logs")
    assert runner.estimate(jobs, Registry(db)) == (50.0, 50.0, 0)  # the one job left: the median of 40 and 60 s
    # a part of the suite (--only): the durations still come from the whole suite's finished jobs
    part = Runner(db, jobs=1, dry_run=True, log_dir=tmp_path / "logs", whole=jobs)
    assert part.estimate(jobs[2:], Registry(db)) == (50.0, 50.0, 0)
    assert Runner(db, jobs=1, dry_run=True, log_dir=tmp_path / "logs").estimate(jobs[2:], Registry(db))[2] == 1


def test_a_fresh_registry_estimates_from_the_committed_snapshot(tmp_path, monkeypatch):
    """a fresh clone's empty registry -> the dry run estimates a kind of job from the committed snapshot's runs of the
    suite's jobs (their wall times), where it said "0 s of job time" and counted every job unknown (issue 80)"""
    import json

    import benchmarks.paths

    _, jobs = load_suite(_suite(tmp_path, 3))
    snap = tmp_path / "snap.jsonl"
    snap.write_text("".join(json.dumps({"config_hash": j.hash, "status": "finished", "wall_time": secs}) + "\n"
                            for j, secs in zip(jobs[:2], (40, 60))))
    monkeypatch.setattr(benchmarks.paths, "SNAPSHOT", snap)
    db = str(tmp_path / "fresh.sqlite")
    runner = Runner(db, jobs=1, dry_run=True, log_dir=tmp_path / "logs", whole=jobs)
    assert runner.estimate(jobs, Registry(db)) == (150.0, 150.0, 0)  # three jobs at the median of 40 and 60 s


def test_unknown_duration_and_failure_summary(tmp_path, capsys):
    """no recorded durations -> 'ETA unknown'; a failing job -> the summary lists it with its log, exit status 1"""
    from benchmarks.runner.run import execute

    db = str(tmp_path / "r.sqlite")
    name, jobs = load_suite(_suite(tmp_path, 2))
    runner = _ExitRunner(db, jobs=1, log_dir=tmp_path / "logs")
    assert execute(runner, name, jobs) == 1
    out = capsys.readouterr().out
    assert "[progress] 0/2 done, 1 running" in out and "ETA unknown (2 jobs of commands with no recorded" in out
    assert "summary: failed 1, finished 1" in out
    log = tmp_path / "logs" / f"{jobs[1].hash}.log"
    assert f"1 job(s) failed; their logs:\n  {jobs[1].label()}\n    log: {log}" in out
    assert runner.failures == [(jobs[1].label(), log)] and log.exists()
    # the second job's ETA used the first one's duration, measured in this run
    assert "[progress] 1/2 done, 1 running" in out and "ETA unknown" not in out.split("[progress] 1/2 done")[1]


# Single-job times of the demo's job kinds, measured with `time` (user CPU seconds, 1 thread, one job of each
# alone; the machine was shared, so wall times were higher): graph tu MUTAG 20 epochs, vision pretrain digits
# 10 epochs, text train 8 steps + STS-B dev, bench losses. A job given 1 of 2 idle cores takes about its CPU time.
DEMO_SECONDS = {"graph tu": 7.9, "vision pretrain": 14.8, "text train": 45.7, "bench losses": 11.4}


def test_demo_suite_jobs_and_time_budget(tmp_path, capsys):
    """`make demo`'s suite, dry run with 2 jobs -> 19 jobs over graphs, images and sentences, 3 seeds per side of
    every compared pair, and an estimated wall time (from recorded single-job durations) that leaves 3 minutes of
    the 8-minute target for the install and 30 s for the report"""
    from suite.cli import main

    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    for kind, secs in DEMO_SECONDS.items():
        _record_durations(reg, kind, [secs])
    name, jobs = load_suite("quick")
    assert len(jobs) == 19 and {j.frontend for j in jobs} == {"graph", "vision", "text", "bench"}
    groups: dict[tuple, set] = {}
    for j in jobs:
        if j.seed is not None:
            groups.setdefault((j.frontend, j.command, dict(j.args)["loss"]), set()).add(j.seed)
    assert len(groups) == 6 and all(len(s) >= 3 for s in groups.values())
    assert main(["bench", "run", "quick", "--dry-run", "--jobs", "2", "--registry", db, "--budget", "270"]) == 0
    out = capsys.readouterr().out
    assert out.count("would run: ") == 19 and "budget 4.5 min: fits" in out
    wall = Runner(db, jobs=2, dry_run=True).estimate(jobs, reg)[1]
    assert 0.5 * sum(DEMO_SECONDS[Runner.kind(j)] for j in jobs) <= wall <= 270
    # a second `make demo`: every job finished -> nothing left to run, estimate 0
    for j in jobs:
        reg.claim_job(j.hash, j.label())
        reg.finish_job(j.hash, "finished")
    assert Runner(db, jobs=2, dry_run=True).estimate(jobs, reg)[:2] == (0.0, 0.0)
