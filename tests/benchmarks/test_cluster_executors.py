"""The cluster executors against the real systems: a one-node SLURM cluster started for the test from Debian's
``slurm-wlm`` and ``munge`` (tests/benchmarks/slurm_cluster.py; skipped, with the reason, where they are not installed
or do not start) and a local Ray cluster (``ray.init(num_cpus=2)``; skipped where ray is absent). A tiny grid of
GraphCL runs on MUTAG goes through real sbatch job arrays to the registry; one job is requeued by ``scontrol requeue``
in the middle of its training and resumes from its checkpoint into the same registry row; ``bench status`` and
``bench cancel`` are checked. Slow (a minute or two on 2 cores): ``make test-cluster`` (and ``.ci/run``) run them."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry
from tests.benchmarks import slurm_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The environment of a running one-node SLURM cluster (``SLURM_CONF``)."""
    pytest.importorskip("submitit")
    base = tmp_path_factory.mktemp("slurm")
    try:
        with slurm_cluster.cluster(base) as env:
            yield env
    except slurm_cluster.Unavailable as exc:
        pytest.skip(f"no one-node SLURM cluster: {exc}")


@pytest.fixture(autouse=True)
def _said_on_failure(request, tmp_path):
    """A failed cluster test prints what the runner, submitit and SLURM saw (pytest shows it with the failure): the
    runner's and the nodes' logs, ``scontrol show job`` of every job the registry names, ``squeue --states=all`` and
    the controller's and node's logs."""
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.failed:
        return
    print(_logs(tmp_path, tail=6000))
    if "slurm" in request.fixturenames:
        ids: list[str] = []
        for db in tmp_path.rglob("*.sqlite"):
            try:
                with sqlite3.connect(db) as conn:
                    rows = conn.execute("SELECT hash, status, requeues, scheduler_id FROM jobs").fetchall()
            except sqlite3.Error as exc:  # what the registry could not say is said too
                print(f"registry {db}: {exc}")
                continue
            print(f"== registry {db}: jobs (hash, status, requeues, scheduler id): {rows}")
            ids += [str(sid).split(":", 1)[1] for *_, sid in rows if str(sid).startswith("slurm:")]
        print(slurm_cluster.describe(request.getfixturevalue("slurm"), sorted(set(ids))))


def _suite(tmp_path: Path, name: str, groups: list[dict]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "resources": {"cpus": 1, "time": 10}, "jobs": groups}))
    return path


def _tu(seed: int, epochs: int) -> dict:
    return {"frontend": "graph", "command": "tu", "seeds": [seed],
            "args": {"dataset": "MUTAG", "loss": "graphcl", "epochs": epochs, "out": "runs/{job}"}}


def _wait(cond, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the runner ended first:\n{proc.communicate()[0][-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting: {what}")


def _release(sid: str, env: dict, restarted, runner: subprocess.Popen, timeout: float = 90) -> None:
    """Let a requeued job go: SLURM holds it back for 120 s (its BeginTime), which the test lifts with ``scontrol
    update StartTime=now`` once it is pending, but not before 2 s have passed: slurmd refuses to launch a job in the
    second its previous run was killed ("Killing non-startable batch JobId=N: Job credential revoked"), and the task
    then ends FAILED with no process of its own. Lifted at once, that happened when the restart was allocated within
    the kill's second: the fresh-machine CI failures of the requeue tests. (The runner now requeues such a task again,
    after SLURM's hold.) Done when pending and lifted, or when ``restarted()`` (the restart has taken its row)."""
    pending: list[float] = []

    def lifted() -> bool:
        if restarted():
            return True
        state = subprocess.run(["squeue", "-h", "-o", "%T", "-j", sid], env=env, capture_output=True, text=True).stdout
        if "PENDING" not in state:
            return False
        pending[:] = pending or [time.monotonic()]
        return time.monotonic() - pending[0] >= 2.0 and subprocess.run(
            ["scontrol", "update", f"JobId={sid}", "StartTime=now"], env=env, capture_output=True).returncode == 0

    _wait(lifted, timeout, f"the requeued job {sid} to be pending, and let go", runner)


def _logs(tmp_path: Path, tail: int = 2000) -> str:
    """The end of every log the runner and submitit wrote (a failure in CI says what the nodes saw)."""
    parts = [f"== {p.relative_to(tmp_path)}\n{p.read_text(errors='replace')[-tail:]}"
             for p in sorted((tmp_path / "results" / "bench-logs").rglob("*")) if p.is_file() and p.suffix != ".pkl"]
    return "\n".join(parts)


def _bench(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", "bench", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_slurm_grid_requeue_resumes_with_one_row_status_and_cancel(slurm, tmp_path, monkeypatch):
    """a 2-job grid through a real sbatch array: both finish; the longer one, requeued by `scontrol requeue` after its
    first checkpoint, resumes from it into the same run row (one row, finished, requeued 1); the short job's result
    equals the local executor's; `bench status` shows the grid; `bench cancel` stops a running grid's job"""
    db = str(tmp_path / "r.sqlite")
    env = {**os.environ, **slurm, "SUITE_REGISTRY": db}
    suite = _suite(tmp_path, "tiny", [_tu(0, 3), _tu(1, 200)])  # long: still running while `bench status` starts
    _, jobs = load_suite(suite)
    short, long_ = jobs
    reg = Registry(db)
    t0 = time.monotonic()
    runner = subprocess.Popen([sys.executable, "-m", "suite", "bench", "run", str(suite), "--executor", "slurm"],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ckpts = tmp_path / "runs" / long_.hash[:12] / "checkpoints"
        _wait(lambda: any(ckpts.glob("step-*.pt")) and reg.runs(config_hash=long_.hash), 150,
              "the long job's first checkpoint", runner)
        row = reg.job(long_.hash)
        assert row["status"] == "running" and row["scheduler_id"].startswith("slurm:") and row["requeues"] == 0
        run_id = reg.runs(config_hash=long_.hash)[0]["id"]
        status = _bench(["status", str(suite), "--registry", db], env, tmp_path)
        assert status.returncode == 0 and row["scheduler_id"] in status.stdout and "running" in status.stdout
        t_requeue = time.monotonic()
        sid = row["scheduler_id"].split(":", 1)[1]
        subprocess.run(["scontrol", "requeue", sid], env=env, check=True, timeout=30)
        _release(sid, env, lambda: (reg.job(long_.hash) or {}).get("requeues") == 1, runner)
        _wait(lambda: (reg.job(long_.hash) or {}).get("requeues") == 1, 120, "the requeued job's restart", runner)
        restart = time.monotonic() - t_requeue
        out = runner.communicate(timeout=240)[0]
    finally:
        if runner.poll() is None:
            runner.kill()
    took = time.monotonic() - t0
    print(f"SLURM tiny grid: {took:.1f} s wall; requeue -> running again: {restart:.1f} s")
    assert runner.returncode == 0, out + _logs(tmp_path)
    assert "summary: finished 2" in out and "requeued 1x" in out
    runs = reg.runs(config_hash=long_.hash)
    assert [r["id"] for r in runs] == [run_id] and runs[0]["status"] == "finished"  # one row, continued
    row = reg.job(long_.hash)
    assert (row["status"], row["requeues"]) == ("finished", 1)
    log = Path(row["log"]).read_text()
    assert "[requeued 1]" in log and "resumes from" in log and "checkpoints/step-" in log
    assert reg.job_status(short.hash) == "finished" and len(reg.runs(config_hash=short.hash)) == 1
    status = _bench(["status", str(suite), "--registry", db], env, tmp_path)
    assert "finished, requeued 1" in status.stdout and "tiny: 2 jobs: 2 finished" in status.stdout

    # the local executor gives the short job the same result
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    monkeypatch.chdir(local_dir)
    from benchmarks.runner.plan import Runner

    local_db = str(local_dir / "r.sqlite")
    # one thread, as the SLURM job had (cpus: 1): the SVM's folds see the same embeddings to the last bit
    assert Runner(local_db, threads=1, log_dir=local_dir / "logs").run([short]) == {"finished": 1}

    def result(r: Registry) -> dict:
        run = r.runs(config_hash=short.hash)[0]
        return {(m["name"], m["split"]): m["value"] for m in r.metrics(run["id"]) if m["split"] not in ("train-step",)
                and not m["name"].endswith("_per_s") and not m["name"].endswith("time_s")}

    slurm_result, local_result = result(reg), result(Registry(local_db))
    assert slurm_result and {k: v for k, v in slurm_result.items() if k[1] == "test"} == {
        k: v for k, v in local_result.items() if k[1] == "test"}

    # bench cancel stops a running grid's job: its row 'cancelled', SLURM holds nothing, the runner ends
    monkeypatch.chdir(tmp_path)
    slow = _suite(tmp_path, "slow", [_tu(2, 5000)])
    _, (job,) = load_suite(slow)
    runner = subprocess.Popen([sys.executable, "-m", "suite", "bench", "run", str(slow), "--executor", "slurm"],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: reg.job_status(job.hash) == "running", 120, "the slow job's start", runner)
        sid = reg.job(job.hash)["scheduler_id"].split(":", 1)[1]
        cancel = _bench(["cancel", str(slow), "--registry", db], env, tmp_path)
        assert cancel.returncode == 0 and "slow: 1 job(s) cancelled" in cancel.stdout, cancel.stdout + cancel.stderr
        out = runner.communicate(timeout=120)[0]
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 1 and "[cancelled]" in out, out
    assert reg.job_status(job.hash) == "cancelled"
    _wait(lambda: not subprocess.run(["squeue", "-h", "-j", sid.split("_")[0]], env=env, capture_output=True,
                                     text=True).stdout.strip(), 30, "SLURM to let the cancelled job go")
    assert "cancelled" in _bench(["status", str(slow), "--registry", db], env, tmp_path).stdout


def test_slurm_unknown_partition_is_one_line(slurm, tmp_path):
    """a partition SLURM does not know: sbatch's reason in one line naming the job, no traceback, no queued row left"""
    db = str(tmp_path / "r.sqlite")
    suite = _suite(tmp_path, "bad", [{**_tu(0, 1), "resources": {"partition": "nosuchpartition"}}])
    p = subprocess.run([sys.executable, "-m", "suite", "bench", "run", str(suite), "--executor", "slurm",
                        "--registry", db], env={**os.environ, **slurm}, cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "sbatch refused" in p.stderr and "graph tu" in p.stderr and "partition" in p.stderr.lower(), p.stderr
    _, (job,) = load_suite(suite)
    assert Registry(db).job_status(job.hash) == "failed"


def test_ray_grid_on_a_local_cluster(tmp_path, monkeypatch):
    """the same tiny grid as Ray tasks on ray.init(num_cpus=2): both jobs finish, one run row each, the rows name
    their Ray task"""
    ray = pytest.importorskip("ray")
    from benchmarks.runner.executors.ray import RayExecutor
    from benchmarks.runner.plan import Runner

    monkeypatch.chdir(tmp_path)
    _, jobs = load_suite(_suite(tmp_path, "tiny", [_tu(0, 3), _tu(1, 3)]))
    db = str(tmp_path / "r.sqlite")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t0 = time.monotonic()
        counts = Runner(db, log_dir=tmp_path / "logs", executor=RayExecutor()).run(jobs)
        print(f"Ray tiny grid: {time.monotonic() - t0:.1f} s wall")
    finally:
        ray.shutdown()
    assert counts == {"finished": 2}
    reg = Registry(db)
    for j in jobs:
        row = reg.job(j.hash)
        assert row["status"] == "finished" and row["scheduler_id"].startswith("ray:")
        runs = reg.runs(config_hash=j.hash)
        assert len(runs) == 1 and runs[0]["status"] == "finished"


def test_srun_tasks_form_one_process_group_equal_to_one_process(slurm, tmp_path):
    """`srun -n 2` inside an sbatch job: each task's torch.distributed comes from SLURM's environment alone (rank =
    SLURM_PROCID, world 2, the step's node as master), and the losses, gathered across the two tasks, give the same
    values and gradients as one process at the global batch (every loss, as the gloo test under torchrun's variables)"""
    import torch

    from tests.suite.test_distributed import W, assert_equals_single_process

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "step.sh"
    script.write_text(f"#!/bin/bash\ncd {root}\nexec srun {sys.executable} -m tests.benchmarks.slurm_dist_worker "
                      f"{tmp_path}\n")
    env = {**os.environ, **slurm}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    sub = subprocess.run(["sbatch", "--parsable", f"--ntasks={W}", "--cpus-per-task=1", "-o", str(tmp_path / "out.txt"),
                          str(script)], env=env, capture_output=True, text=True, check=True, timeout=30)
    job = sub.stdout.strip().split(";")[0]
    _wait(lambda: all((tmp_path / f"rank{r}.pt").exists() for r in range(W)) and not subprocess.run(
        ["squeue", "-h", "-j", job], env=env, capture_output=True, text=True).stdout.strip(), 120,
          f"the srun step's two tasks ({tmp_path / 'out.txt'})")
    got = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(W)]
    assert [(g["rank"], g["slurm_procid"], g["world"], g["torchrun_before"]) for g in got] == [(r, r, W, []) for r in range(W)]
    assert got[0]["master"] == got[1]["master"] == slurm_cluster.socket.gethostname().split(".")[0]
    assert_equals_single_process([g["results"] for g in got])


def test_one_job_on_two_srun_tasks_through_the_runner(slurm, tmp_path, monkeypatch):
    """a job asking for `resources: {tasks: 2}` through --executor slurm: one run on two processes (SLURM's tasks, one
    process group), one registry row recording 2 processes, rank 1's log beside the job's; its result equals the same
    job under `--launcher torchrun --nproc-per-node 2` on this machine (the same ranks, batches and gathered negatives)"""
    db = str(tmp_path / "r.sqlite")
    env = {**os.environ, **slurm, "SUITE_REGISTRY": db}
    suite = _suite(tmp_path, "ddp", [{**_tu(0, 3), "resources": {"tasks": 2, "cpus": 1}}])
    _, (job,) = load_suite(suite)
    p = _bench(["run", str(suite), "--executor", "slurm"], env, tmp_path)
    assert p.returncode == 0 and "summary: finished 1" in p.stdout, p.stdout + p.stderr
    reg = Registry(db)
    (run,) = reg.runs(config_hash=job.hash)
    assert run["status"] == "finished" and json.loads(run["run_options"])["processes"] == 2
    rank1 = tmp_path / "results" / "bench-logs" / "ddp" / f"{job.hash}.rank1.log"
    assert rank1.exists() and "graph tu" in rank1.read_text().splitlines()[0], list(rank1.parent.iterdir())

    local_dir = tmp_path / "torchrun"
    local_dir.mkdir()
    monkeypatch.chdir(local_dir)
    from benchmarks.runner.plan import Runner

    local_db = str(local_dir / "r.sqlite")
    runner = Runner(local_db, threads=1, launcher="torchrun", nproc_per_node=2, log_dir=local_dir / "logs")
    assert runner.run([job]) == {"finished": 1}
    (local,) = Registry(local_db).runs(config_hash=job.hash)
    assert json.loads(local["run_options"])["processes"] == 2

    def result(r: Registry, run_id: str) -> dict:
        return {(m["name"], m["split"]): m["value"] for m in r.metrics(run_id) if m["split"] == "test"}

    assert result(reg, run["id"]) and result(reg, run["id"]) == result(Registry(local_db), local["id"])


def test_slurm_time_limit_signal_requeues_the_task_which_resumes(slurm, tmp_path):
    """SLURM's warning before a job's --time (USR2, which submitit asks for with --signal and handles): the job's
    command ends interrupted with its checkpoints kept, submitit requeues the same array task, and the task resumes
    the run from its checkpoint into the same row (one row, finished, requeued 1)"""
    db = str(tmp_path / "r.sqlite")
    env = {**os.environ, **slurm, "SUITE_REGISTRY": db}
    suite = _suite(tmp_path, "tl", [_tu(3, 60)])
    _, (job,) = load_suite(suite)
    reg = Registry(db)
    runner = subprocess.Popen([sys.executable, "-m", "suite", "bench", "run", str(suite), "--executor", "slurm"],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ckpts = tmp_path / "runs" / job.hash[:12] / "checkpoints"
        _wait(lambda: any(ckpts.glob("step-*.pt")) and reg.runs(config_hash=job.hash), 150, "the first checkpoint",
              runner)
        run_id = reg.runs(config_hash=job.hash)[0]["id"]
        sid = reg.job(job.hash)["scheduler_id"].split(":", 1)[1]
        subprocess.run(["scancel", "--signal=USR2", sid], env=env, check=True, timeout=30)  # what --time's warning sends
        _wait(lambda: reg.runs(config_hash=job.hash)[0]["status"] == "interrupted", 60, "the run to stop at the signal",
              runner)
        _release(sid, env, lambda: (reg.job(job.hash) or {}).get("requeues") == 1, runner)
        out = runner.communicate(timeout=240)[0]
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0 and "requeued 1x" in out, out + _logs(tmp_path)
    runs = reg.runs(config_hash=job.hash)
    assert [r["id"] for r in runs] == [run_id] and runs[0]["status"] == "finished"
    assert (reg.job(job.hash)["status"], reg.job(job.hash)["requeues"]) == ("finished", 1)
    log = Path(reg.job(job.hash)["log"]).read_text()
    # the signal reaches the job's command and its node process, which stops the command too: whichever comes first
    assert "suite: interrupted (SIG" in log and "resumes from" in log, log


def test_ray_worker_killed_mid_run_is_retried_and_resumes(tmp_path, monkeypatch):
    """the Ray worker running a job killed (SIGKILL) after the run's first checkpoint: its command stops (it follows
    the worker), Ray retries the task, which resumes the run from its checkpoint into the same row (one row, finished,
    requeued 1)"""
    ray = pytest.importorskip("ray")
    import signal
    import threading

    from benchmarks.runner.executors.ray import RayExecutor
    from benchmarks.runner.plan import Runner

    monkeypatch.chdir(tmp_path)
    _, (job,) = load_suite(_suite(tmp_path, "crash", [_tu(4, 60)]))
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    killed: list[int] = []

    def kill_worker() -> None:
        ckpts = tmp_path / "runs" / job.hash[:12] / "checkpoints"
        _wait(lambda: any(ckpts.glob("step-*.pt")) and reg.runs(config_hash=job.hash), 150, "the first checkpoint")
        pid = reg.job(job.hash)["pid"]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t = threading.Thread(target=kill_worker, daemon=True)
        t.start()
        counts = Runner(db, log_dir=tmp_path / "logs", executor=RayExecutor()).run([job])
        t.join(timeout=5)
    finally:
        ray.shutdown()
    assert killed and counts == {"finished": 1}
    runs = reg.runs(config_hash=job.hash)
    assert len(runs) == 1 and runs[0]["status"] == "finished"
    row = reg.job(job.hash)
    assert (row["status"], row["requeues"]) == ("finished", 1) and row["pid"] != killed[0]
    assert "resumes from" in Path(row["log"]).read_text()


def test_another_task_stops_when_rank_0_ended_the_job(tmp_path, monkeypatch):
    """a job on 2 SLURM tasks whose rank 0 ended it without its command running with the others (failed first,
    cancelled): task 1, whose command waits for rank 0's rendezvous, stops it after the grace and ends 'failed',
    instead of holding its node for torch's 30-minute rendezvous timeout"""
    import threading

    from benchmarks.runner.executors import node
    from benchmarks.runner.executors.node import Spec, node_rank
    from tests.graph.test_distributed import _free_port

    monkeypatch.chdir(tmp_path)
    _, (job,) = load_suite(_suite(tmp_path, "two", [_tu(0, 3)]))
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    assert reg.claim_job(job.hash, job.label(), status="queued")
    for k, v in {"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "7",
                 "SLURM_STEP_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(node, "RANK0_POLL_S", 0.5)
    spec = Spec(job, db, str(tmp_path / "logs"), str(tmp_path), ("login", 1), 1, 3, 2.0, {})
    (tmp_path / "logs").mkdir()
    threading.Timer(4.0, lambda: reg.finish_job(job.hash, "failed", only_if=("queued",))).start()
    t0 = time.monotonic()
    assert node_rank(spec, 1, 0) == "failed"
    took = time.monotonic() - t0
    assert took < 30, took  # the 4 s before rank 0's end, a poll, the 2 s grace and the child's stop
    assert "graph tu" in (tmp_path / "logs" / f"{job.hash}.rank1.log").read_text()
