"""The runner's cluster executors (``--executor slurm|ray``): resources in suite files, the registry a cluster may use,
the jobs table's queued / requeued / cancelled rows, and 8 concurrent job processes against a real PostgreSQL server.
The tests against a real one-node SLURM cluster and a local Ray cluster are in ``test_cluster_executors.py``."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest
import yaml

from benchmarks.runner.cancel import cancel_jobs
from benchmarks.runner.executors.cluster import check_registry, mem_string, time_minutes
from benchmarks.runner.suitefile import load_suite, resources_of
from suite.registry import Registry
from tests.suite.test_registry_postgres import pg_url  # noqa: F401  (the fixture: a real PostgreSQL server)


def _write(tmp_path, spec, name="s"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_resources_in_a_suite_file(tmp_path):
    """the suite's resources: are every group's defaults, a group's own replace them key by key (options merged);
    they are not part of a job's identity; a bad key or value is one line naming the file and the group"""
    group = {"frontend": "graph", "command": "tu", "seeds": [0], "grid": {"loss": ["graphcl", "macl"]}}
    plain = load_suite(_write(tmp_path, {"name": "p", "jobs": [group]}))[1]
    _, jobs = load_suite(_write(tmp_path, {"name": "r", "resources": {"cpus": 4, "time": "2:00:00", "mem": "16G",
                                                                       "partition": "gpu", "options": {"qos": "low"}},
                                           "jobs": [{**group, "resources": {"gpus": 1, "options": {"constraint": "a100"}}},
                                                    {**group, "command": "mol-pretrain"}]}, "r"))
    assert [j.hash for j in jobs[:2]] == [j.hash for j in plain]
    assert resources_of(jobs[0]) == {"cpus": 4, "time": "2:00:00", "mem": "16G", "partition": "gpu", "gpus": 1,
                                     "options": {"qos": "low", "constraint": "a100"}}
    assert resources_of(jobs[-1]) == {"cpus": 4, "time": "2:00:00", "mem": "16G", "partition": "gpu",
                                      "options": {"qos": "low"}}
    for bad, msg in (({"gpu": 1}, "resources key 'gpu' is unknown"), ({"cpus": 0}, "cpus must be an integer >= 1"),
                     ({"time": "soon"}, "time must be minutes"), ({"options": {"a": {"b": 1}}}, "options must be"),
                     ({"tasks": 0}, "tasks must be an integer >= 1"), ({"nodes": 1.5}, "nodes must be an integer")):
        with pytest.raises(ValueError, match=msg):
            load_suite(_write(tmp_path, {"name": "b", "jobs": [{**group, "resources": bad}]}, "b"))
    assert (time_minutes(90), time_minutes("1:30:00"), time_minutes("1-00:00:00"), time_minutes("45:30")) == (
        90, 90, 1440, 46)
    assert (mem_string(16), mem_string("500mb"), mem_string("2G")) == ("16G", "500M", "2G")


def test_ray_refuses_one_run_on_several_processes(tmp_path):
    """a job asking for several processes (resources tasks / nodes) under --executor ray: one line saying which
    executor or launcher runs it, before anything is submitted"""
    from benchmarks.runner.executors.ray import RayExecutor
    from benchmarks.runner.plan import Runner

    _, (job,) = load_suite(_write(tmp_path, {"name": "t", "jobs": [
        {"frontend": "graph", "command": "tu", "seeds": [0], "resources": {"nodes": 2, "tasks": 4}}]}))
    with pytest.raises(ValueError, match=r"asks for 2 node\(s\) x 4 task\(s\).*--executor slurm"):
        RayExecutor().submit(Runner(str(tmp_path / "r.sqlite"), log_dir=tmp_path).stage(), [job], None)


def test_sqlite_registry_on_a_network_file_system_is_refused(tmp_path):
    """--executor slurm|ray with an SQLite registry on NFS / CIFS / Lustre (by /proc/mounts' type of the file's mount):
    one line saying why; a local disk, PostgreSQL, or the local executor: fine"""
    mounts = tmp_path / "mounts"
    shared = tmp_path / "shared"
    shared.mkdir()
    for fs in ("nfs4", "cifs", "lustre"):
        mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {shared} {fs} rw 0 0\n")
        with pytest.raises(ValueError, match=f"network file system \\({fs} at {shared}\\).*PostgreSQL") as err:
            check_registry(str(shared / "r.sqlite"), "slurm", str(mounts))
        assert "\n" not in str(err.value)
        check_registry(str(shared / "r.sqlite"), "local", str(mounts))
        check_registry(f"sqlite:///{tmp_path / 'r.sqlite'}", "ray", str(mounts))
        check_registry("postgresql+psycopg://u@h/db", "slurm", str(mounts))
    with pytest.raises(ValueError, match="network file system"):
        check_registry(f"sqlite:///{shared / 'sub' / 'r.sqlite'}", "ray", str(mounts))


def test_queued_rows_requeues_and_cancel(tmp_path, capsys):
    """the submitting runner claims a job 'queued'; another runner cannot take it while that runner lives, the job's
    own process on a node takes it (queued_by) keeping its log; a requeued attempt takes its running row back by its
    scheduler id (requeues counted); cancel marks queued and running rows cancelled, and a job's end does not
    overwrite that; SLURM's task is scancel-ed, and where this host has no scancel the message says the task may still
    run (it had raised FileNotFoundError after marking the rows)"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    me = (socket.gethostname(), os.getpid())
    assert reg.claim_job("a", "graph tu", status="queued", log="/logs/a.log")
    assert not reg.claim_job("a", "graph tu") and reg.job_status("a") == "queued"
    assert reg.claim_job("a", "graph tu", queued_by=me, scheduler_id="slurm:7_0", requeues=0)
    row = reg.job("a")
    assert (row["status"], row["log"], row["scheduler_id"], row["requeues"]) == ("running", "/logs/a.log", "slurm:7_0", 0)
    assert not reg.claim_job("a", "graph tu", queued_by=me)  # running now: not a queued row any more
    assert reg.claim_job("a", "graph tu", scheduler_id="slurm:7_0", requeues=1)  # the same task, requeued
    assert reg.job("a")["requeues"] == 1 and reg.job("a")["log"] == "/logs/a.log"
    assert reg.claim_job("b", "graph tu", status="queued")
    _, jobs = load_suite(_write(tmp_path, {"name": "c", "jobs": [{"frontend": "graph", "command": "tu",
                                                                  "seeds": [0, 1, 2]}]}, "c"))
    reg.claim_job(jobs[0].hash, jobs[0].label(), status="queued", scheduler_id="slurm:99999_0")
    reg.claim_job(jobs[1].hash, jobs[1].label())
    reg.claim_job(jobs[2].hash, jobs[2].label())
    reg.finish_job(jobs[2].hash, "finished")
    done = cancel_jobs(reg, jobs)
    if not shutil.which("scancel"):
        assert "99999_0 are marked cancelled in the registry but may still run" in capsys.readouterr().err
    assert [j.hash for j, _ in done] == [jobs[0].hash, jobs[1].hash]
    assert [reg.job_status(j.hash) for j in jobs] == ["cancelled", "cancelled", "finished"]
    reg.finish_job(jobs[1].hash, "interrupted", only_if=("running",))
    assert reg.job_status(jobs[1].hash) == "cancelled"


JOB_PROCESS = textwrap.dedent("""
    import socket, sys
    from suite.registry import Registry
    url, k, n, submitter = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), (sys.argv[4], int(sys.argv[5]))
    reg = Registry(url)
    won = 0
    for i in range(n):
        h = f"job{i}"  # every process tries every job: a job of the grid is run once
        if not reg.claim_job(h, f"cmd {i}", queued_by=submitter, scheduler_id=f"slurm:{k}_{i}"):
            continue
        won += 1
        with reg.run(modality="m", task="t", dataset="d", loss="l", seed=i, cfg_hash=h) as run:
            for step in range(5):
                run.log_many({"loss": 1.0 / (step + 1), "proc": k}, split="train", step=step)
        reg.finish_job(h, "finished", only_if=("running",))
    print(won)
""")


def test_eight_job_processes_on_postgres_lose_nothing(pg_url, tmp_path):  # noqa: F811
    """8 job processes at once on one PostgreSQL registry, each taking what it can of 24 queued jobs: every job is
    run exactly once (one finished job row, one finished run with all its metrics), nothing is lost"""
    reg = Registry(pg_url)
    n = 24
    me = (socket.gethostname(), os.getpid())
    for i in range(n):
        assert reg.claim_job(f"job{i}", f"cmd {i}", status="queued")
    procs = [subprocess.Popen([sys.executable, "-c", JOB_PROCESS, pg_url, str(k), str(n), *map(str, me)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(8)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-3000:] for _, e in outs if "Error" in e][:1]
    assert sum(int(o.strip()) for o, _ in outs) == n
    for i in range(n):
        assert reg.job_status(f"job{i}") == "finished"
        runs = reg.runs(config_hash=f"job{i}")
        assert len(runs) == 1 and runs[0]["status"] == "finished"
        assert len([m for m in reg.metrics(runs[0]["id"]) if m["name"] == "loss"]) == 5


def test_a_job_requeued_more_than_the_limit_fails_in_one_line(tmp_path, monkeypatch, capsys):
    """a task SLURM restarts more often than --max-requeues: its row failed, the requeues counted, one line naming the
    job and its log; nothing runs"""
    from benchmarks.runner.executors.node import Spec, node_main

    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "r.sqlite")
    _, (job,) = load_suite(_write(tmp_path, {"name": "q", "jobs": [{"frontend": "graph", "command": "tu",
                                                                    "seeds": [0]}]}, "q"))
    reg = Registry(db)
    assert reg.claim_job(job.hash, job.label(), scheduler_id="slurm:5_0", requeues=3)
    spec = Spec(job, db, str(tmp_path / "logs"), str(tmp_path), ("elsewhere", 1), 1, 3, 1.0)
    assert node_main(spec, "slurm:5_0", 4) == "failed"
    row = reg.job(job.hash)
    assert (row["status"], row["requeues"]) == ("failed", 4)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "more than --max-requeues 3" in out and f"{job.hash}.log" in out


def test_a_slurm_task_missing_from_squeue_while_it_is_requeued_is_followed_on(tmp_path, monkeypatch, capsys):
    """squeue can miss a task, or show it ended, between its end (the time-limit signal, its run interrupted) and its
    requeued pending state: the runner follows it on while it is so less than ``vanish_grace`` seconds (fresh-clone
    CI runs twice called such a job failed), and for as long as SLURM shows it in a state that is not an end
    (REQUEUED, REQUEUE_HOLD...); a job ended or missing for longer, its row never ended, fails, naming SLURM's state"""
    from benchmarks.runner.executors.slurm import SlurmExecutor
    from benchmarks.runner.plan import Runner

    _, (job,) = load_suite(_write(tmp_path, {"name": "t", "jobs": [{"frontend": "graph", "command": "tu",
                                                                    "seeds": [0]}]}))
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    sid = "6_0"

    def follow(script, grace):
        """``script``: per squeue poll, (the row's status or None to leave it, requeues, SLURM's state of the task or
        None where squeue does not list it)"""
        reg.claim_job(job.hash, "graph tu", rerun=True, scheduler_id=f"slurm:{sid}", requeues=0)
        polls = iter(script)

        def squeue(arrays):
            assert arrays == ["6"]
            status, requeues, state = next(polls, (None, 0, script[-1][2]))  # then: as the last poll, the row as it is
            if status == "finished":
                reg.finish_job(job.hash, "finished")
            elif status is not None:
                reg.update_job(job.hash, status=status, requeues=requeues)
            return {sid: state} if state else {}

        ex = SlurmExecutor(poll=0.01, vanish_grace=grace)
        monkeypatch.setattr(ex, "_squeue", squeue)
        monkeypatch.setattr(ex, "_scontrol", lambda *a: None)  # no SLURM here: nothing to ask
        return ex._follow(Runner(db, log_dir=tmp_path / "logs").stage(), [job], {job.hash: f"slurm:{sid}"}, reg)

    requeue = [(None, 0, "RUNNING"), ("interrupted", 0, None), (None, 0, "COMPLETED"), (None, 0, "PENDING"),
               ("running", 1, "RUNNING"), ("finished", 1, "COMPLETED")]
    assert follow(requeue, grace=30.0) == {job.hash: "finished"}
    assert reg.job(job.hash)["requeues"] == 1
    # held back far longer than the grace, in states that are not an end: followed on
    held = [(None, 0, "RUNNING"), ("interrupted", 0, "COMPLETING")] + [(None, 0, "REQUEUED")] * 20 + [
        (None, 0, "REQUEUE_HOLD")] * 20 + [("running", 1, "RUNNING"), ("finished", 1, "COMPLETED")]
    assert follow(held, grace=0.05) == {job.hash: "finished"}
    capsys.readouterr()
    assert follow([(None, 0, "RUNNING"), ("interrupted", 0, None)], grace=0.05) == {job.hash: "failed"}
    assert "SLURM: no longer lists it" in capsys.readouterr().out
    assert follow([(None, 0, "RUNNING"), ("interrupted", 0, "OUT_OF_MEMORY")], grace=0.05) == {job.hash: "failed"}
    out = capsys.readouterr().out
    assert "[failed (log" in out and "scheduler's log" in out and "SLURM: OUT_OF_MEMORY" in out, out


def test_a_restart_slurm_could_not_start_is_requeued_by_the_runner(tmp_path, monkeypatch, capsys):
    """a requeued task whose restart SLURM could not launch (released within the second of its kill: 'Job credential
    revoked'; the task ends FAILED, Restarts=1, its row still 'running' with requeues 0: the fresh-machine CI failure)
    is requeued by the runner (scontrol requeue, once per restart, up to --max-requeues) and followed on to its end;
    without scontrol's word it fails as before, naming SLURM's state"""
    import subprocess

    from benchmarks.runner.executors.slurm import SlurmExecutor
    from benchmarks.runner.plan import Runner

    _, (job,) = load_suite(_write(tmp_path, {"name": "t", "jobs": [{"frontend": "graph", "command": "tu",
                                                                    "seeds": [0]}]}))
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    reg.claim_job(job.hash, "graph tu", rerun=True, scheduler_id="slurm:6_0", requeues=0)
    state = {"task": "RUNNING", "restarts": 0, "polls": 0}
    asked: list[tuple[str, ...]] = []

    def squeue(arrays):
        state["polls"] += 1
        if state["polls"] == 3:  # the restart that never started: SLURM ended the task, the row is as it was
            state.update(task="FAILED", restarts=1)
        if state["task"] == "PENDING" and state["polls"] > 6:  # after the runner's requeue: it starts and ends
            reg.update_job(job.hash, status="running", requeues=2)
            reg.finish_job(job.hash, "finished")
            state["task"] = "COMPLETED"
        return {"6_0": state["task"]}

    def scontrol(*args):
        asked.append(args)
        if args[0] == "requeue":
            state["task"] = "PENDING"
            return subprocess.CompletedProcess(args, 0, "", "")
        return subprocess.CompletedProcess(args, 0, f"JobId=6 JobState={state['task']} Reason=NonZeroExitCode "
                                                    f"Restarts={state['restarts']} BatchFlag=1", "")

    ex = SlurmExecutor(poll=0.01, vanish_grace=0.05)
    monkeypatch.setattr(ex, "_squeue", squeue)
    monkeypatch.setattr(ex, "_scontrol", scontrol)
    assert ex._follow(Runner(db, log_dir=tmp_path / "logs").stage(), [job], {job.hash: "slurm:6_0"}, reg) == {
        job.hash: "finished"}
    assert asked.count(("requeue", "6_0")) == 1
    assert "[requeued again]" in capsys.readouterr().out
    # SLURM's restarts past --max-requeues: not requeued again, it fails naming SLURM's state
    reg.claim_job(job.hash, "graph tu", rerun=True, scheduler_id="slurm:6_0", requeues=0)
    state.update(task="RUNNING", restarts=0, polls=0)
    asked.clear()
    ex = SlurmExecutor(poll=0.01, vanish_grace=0.05, max_requeues=0)
    monkeypatch.setattr(ex, "_squeue", squeue)
    monkeypatch.setattr(ex, "_scontrol", scontrol)
    assert ex._follow(Runner(db, log_dir=tmp_path / "logs").stage(), [job], {job.hash: "slurm:6_0"}, reg) == {
        job.hash: "failed"}
    assert ("requeue", "6_0") not in asked and "SLURM: FAILED" in capsys.readouterr().out
