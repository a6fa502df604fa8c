"""Reliability round five (issue 52), class 3: cluster faults, with the executors of issue 49. The scheduler and the
database are the real ones, started for the test: a one-node SLURM cluster (tests/benchmarks/slurm_cluster.py) and a
PostgreSQL server (initdb / pg_ctl), each skipped with the reason where it cannot be installed or started. A job is
killed at a chosen point by a ``sitecustomize`` module put on the job's ``PYTHONPATH`` (it acts only in a job's own
process, which has ``SUITE_CONFIG_HASH``); another node is another hostname (``unshare --uts``, as root). Where the
property does not depend on SLURM the local executor runs the job. All of them start processes or servers, so they
are marked slow: ``make test-cluster`` runs them, ``suite bench reliability`` records them."""
from __future__ import annotations

import dataclasses
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry
from tests.benchmarks import slurm_cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# Kills the job's own process (SIGKILL: nothing of it runs after) at one point of its run, named by SUITE_TEST_KILL_AT
SITECUSTOMIZE = textwrap.dedent('''
    import os
    import signal

    stage = os.environ.get("SUITE_TEST_KILL_AT")
    if stage and os.environ.get("SUITE_CONFIG_HASH"):  # a job's own process, not its runner
        def die(*args, **kwargs):
            if stage == "node":  # the node goes down: the job's process on it (its parent) and the job
                os.kill(os.getppid(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)

        if stage == "row":  # before the run's registry row exists
            from suite.registry.store import Registry
            Registry.start_run = die
        elif stage in ("train", "node"):  # in training, just after its first checkpoint
            from suite.train.folders import Checkpoints
            save = Checkpoints.save

            def save_then_die(self, *args, **kwargs):
                save(self, *args, **kwargs)
                die()
            Checkpoints.save = save_then_die
        elif stage == "eval":  # in the SVM evaluation of the last epoch (before that epoch's checkpoint)
            import graph.tu.graphcl as graphcl
            graphcl.evaluate = die
        elif stage == "export":  # the encoder's weights and card written, its run.json not yet
            from suite.train.run import Task
            export = Task.export

            def export_then_die(self, *args, **kwargs):
                export(self, *args, **kwargs)
                die()
            Task.export = export_then_die
''')


# ----------------------------------------------------------------------------- servers and jobs

@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """(environment with SLURM_CONF, the cluster's folder, a function that starts its controller again after it was
    stopped) of a running one-node SLURM cluster."""
    pytest.importorskip("submitit")
    base = tmp_path_factory.mktemp("slurm")
    again: list[subprocess.Popen] = []
    try:
        with slurm_cluster.cluster(base) as env:
            def restart() -> None:
                again.append(subprocess.Popen([slurm_cluster._which("slurmctld"), "-D", "-i", "-f", env["SLURM_CONF"]],
                                              env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.STDOUT))
            try:
                yield env, base, restart
            finally:
                for p in again:
                    p.terminate()
                    p.wait(timeout=20)
    except slurm_cluster.Unavailable as exc:
        pytest.skip(f"no one-node SLURM cluster: {exc}")


class Postgres:
    """A PostgreSQL server of this test (its data folder in a temporary folder), stopped and started at will."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
        if not (initdb and self.pg_ctl):
            pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
        pytest.importorskip("psycopg")
        self.base = tempfile.mkdtemp(prefix="suite-pg-")
        self.data = os.path.join(self.base, "data")
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser")
            shutil.chown(self.base, "nobody")
            os.chmod(self.base, 0o755)
            self.prefix = [shutil.which("runuser"), "-u", "nobody", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        subprocess.run(self.prefix + [initdb, "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True, timeout=120)
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def start(self) -> None:
        subprocess.run(self.prefix + [self.pg_ctl, "-D", self.data, "-l", os.path.join(self.base, "log"), "-w", "-t",
                                      "60", "-o", f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 "
                                      "-c fsync=off", "start"], check=True, capture_output=True, timeout=120)

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(self.prefix + [self.pg_ctl, "-D", self.data, "-m", mode, "-w", "stop"], capture_output=True,
                       timeout=60)

    def running(self) -> bool:
        status = subprocess.run(self.prefix + [self.pg_ctl, "-D", self.data, "status"], capture_output=True)
        return status.returncode == 0

    def database(self, name: str) -> str:
        """The URL of a new, empty database of this server."""
        import sqlalchemy as sa

        engine = sa.create_engine(self.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        engine.dispose()
        return self.url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="module")
def postgres():
    pg = Postgres()
    try:
        yield pg
    finally:
        pg.stop("immediate")
        shutil.rmtree(pg.base, ignore_errors=True)


@pytest.fixture()
def data(tmp_path):
    from tests.graph.synthetic import write_synthetic_tu

    return write_synthetic_tu(tmp_path / "data")


def _tu(root: Path, out: str, seed: int = 0, epochs: int = 2, **more) -> dict:
    """A job group of the tiny `suite graph tu` run (40 graphs, 3 steps an epoch), its output under ``out``."""
    return {"frontend": "graph", "command": "tu", "seeds": [seed],
            "args": {"dataset": "SYNTH", "data_root": str(root), "epochs": epochs, "batch_size": 16, "hidden": 8,
                     "layers": 2, "svm_folds": 4, "svm_inner_folds": 2, "out": out, **more}}


def _suite(tmp_path: Path, name: str, groups: list[dict]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "resources": {"cpus": 1, "time": 10}, "jobs": groups}))
    return path


def _killing(monkeypatch, tmp_path: Path, stage: str) -> None:
    """Jobs started from now on are SIGKILLed at ``stage`` (the sitecustomize above on their PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("SUITE_TEST_KILL_AT", stage)


def _bench(args: list[str], env: dict, cwd: Path, host: str | None = None, **kw) -> subprocess.Popen:
    """``suite bench ...`` in a process of its own; ``host``: on another hostname (its own UTS namespace)."""
    cmd = [sys.executable, "-m", "suite", "bench", *args]
    if host is not None:
        cmd = ["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *cmd]
    return subprocess.Popen(cmd, env={**env, "SUITE_ALLOW_DIRTY": "1", "SUITE_NO_PROGRESS": "1"}, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _needs_unshare() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("another hostname needs unshare --uts as root")
    if subprocess.run(["unshare", "--uts", "hostname", "probe"], capture_output=True).returncode != 0:
        pytest.skip("unshare --uts is not permitted here")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """{(metric, split, step): times logged} of the job of :func:`_tu` run once without a fault."""
    from benchmarks.runner.plan import Runner
    from tests.graph.synthetic import write_synthetic_tu

    base = tmp_path_factory.mktemp("reference")
    root = write_synthetic_tu(base / "data")
    _, (job,) = load_suite(_suite(base, "reference", [_tu(root, str(base / "run"))]))
    assert "SUITE_TEST_KILL_AT" not in os.environ  # made before any test sets a fault (module scope)
    assert Runner(str(base / "r.sqlite"), threads=1, log_dir=base / "logs").run([job]) == {"finished": 1}
    reg = Registry(str(base / "r.sqlite"))
    return _logged(reg, reg.runs()[0]["id"])


def _logged(reg: Registry, run_id: str) -> Counter:
    return Counter((m["name"], m["split"], m["step"]) for m in reg.metrics(run_id))


def _as_once(reg: Registry, run_id: str, reference: Counter) -> None:
    """The run logged what the same job logs when nothing goes wrong, each metric as often: a resumed run logs again
    only what its checkpoint lacks, nothing twice, nothing left out."""
    got = _logged(reg, run_id)
    assert got == reference, {"extra": got - reference, "missing": reference - got}


# ----------------------------------------------------------------------------- the scheduler unreachable or refusing

def test_slurm_controller_down_before_a_run(slurm, data, tmp_path):
    """`suite bench run --executor slurm` while the SLURM controller does not answer (the cluster's slurm.conf with
    its controller's port closed: squeue and sbatch cannot connect) -> exit 2 within seconds, one line saying the SLURM
    controller does not answer and naming scontrol's or squeue's reason; nothing claimed or left queued in the registry
    (the check ran `squeue -j 0`, which SLURM's client refuses itself without asking the controller: it passed, the
    job was claimed and sbatch tried to reach the controller before failing as 'sbatch refused')"""
    env, base, _ = slurm
    down = base / "down.conf"
    down.write_text(re.sub(r"SlurmctldPort=\d+", f"SlurmctldPort={slurm_cluster._free_port()}",
                           Path(env["SLURM_CONF"]).read_text()))
    db = tmp_path / "r.sqlite"
    suite = _suite(tmp_path, "down", [_tu(data, "runs/{job}")])
    t0 = time.monotonic()
    p = _bench(["run", str(suite), "--executor", "slurm", "--registry", str(db)],
               {**os.environ, "SLURM_CONF": str(down)}, tmp_path)
    out, err = p.communicate(timeout=120)
    took = time.monotonic() - t0
    lines = err.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in err, (p.returncode, err)
    assert "SLURM controller does not answer" in lines[0], lines[0]
    assert took < 20, took
    _, (job,) = load_suite(suite)
    assert not db.exists() or Registry(str(db)).job(job.hash) is None


def test_slurm_refusing_a_submission(slurm, data, tmp_path):
    """a suite whose job asks for a partition SLURM does not have (`resources: {partition: nope}`) -> exit 2, one line
    naming the stage, the job and sbatch's reason (invalid partition); the job's row 'failed', not left 'queued', and
    no run row"""
    env, _, _ = slurm
    db = tmp_path / "r.sqlite"
    suite = _suite(tmp_path, "refused", [{**_tu(data, "runs/{job}"), "resources": {"partition": "nope"}}])
    p = _bench(["run", str(suite), "--executor", "slurm", "--registry", str(db)], {**os.environ, **env}, tmp_path)
    out, err = p.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in err, (p.returncode, err)
    _, (job,) = load_suite(suite)
    assert "sbatch refused" in lines[0] and "stage 0" in lines[0] and job.label() in lines[0], lines[0]
    assert "invalid partition" in lines[0].lower(), lines[0]
    reg = Registry(str(db))
    assert reg.job_status(job.hash) == "failed" and reg.runs() == []


def test_slurm_controller_down_mid_run(slurm, data, tmp_path):
    """the SLURM controller goes down (SIGTERM) for 45 s while a submitted job runs, then is started again -> the
    runner says once, in one line, that the controller does not answer (squeue's reason) and that it keeps following
    the jobs; the job finishes on its node; the runner ends with it finished (exit 0), one run row (it waited without
    a word: a runner that looked hung). (45 s: with 25 s, one CI run's runner never had squeue report the outage,
    polling each second, so squeue's own wait for the controller can outlast a short one.)"""
    env, base, restart = slurm
    db = tmp_path / "r.sqlite"
    suite = _suite(tmp_path, "pause", [_tu(data, "runs/{job}", epochs=6)])
    _, (job,) = load_suite(suite)
    reg = Registry(str(db))
    p = _bench(["run", str(suite), "--executor", "slurm", "--registry", str(db)], {**os.environ, **env}, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while (not db.exists() or reg.job_status(job.hash) != "running") and time.monotonic() < deadline:
            assert p.poll() is None, p.communicate()
            time.sleep(0.2)
        os.kill(int((base / "slurmctld.pid").read_text()), signal.SIGTERM)
        try:
            time.sleep(45)
        finally:
            restart()
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and "summary: finished 1" in out, out + err
    said = [line for line in out.splitlines() if "controller does not answer" in line]
    assert len(said) == 1 and "keeps following them" in said[0] and said[0].startswith("[waiting]"), out
    assert "Unable to contact slurm controller" in said[0], said[0]
    assert [r["status"] for r in reg.runs(config_hash=job.hash)] == ["finished"]


# ----------------------------------------------------------------------------- a job killed at each stage

@pytest.mark.parametrize("stage", ["row", "train", "eval", "export"])
def test_job_killed_at_each_stage(stage, data, reference, tmp_path, monkeypatch, capsys):
    """a benchmark job SIGKILLed before its run row exists, in training (after its first checkpoint), in the last
    epoch's SVM evaluation, and in the export (weights written, run.json not) -> the runner prints one line saying it
    failed with its log's path, exit 1; no finished run row; the checkpoint written before the kill kept; the same
    grid run again resumes from it into the same run row and finishes: one row, finished, each metric logged once, a
    whole export"""
    from benchmarks.runner.plan import Runner
    from suite.train.checkpoint import load_checkpoint

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs" / "job"
    _, (job,) = load_suite(_suite(tmp_path, "kill", [_tu(data, str(out))]))
    db, logs = str(tmp_path / "r.sqlite"), tmp_path / "logs"
    _killing(monkeypatch, tmp_path, stage)
    assert Runner(db, threads=1, log_dir=logs).run([job]) == {"failed": 1}
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[failed")]
    assert said == [f"[failed (rc=-9, log {logs / (job.hash + '.log')})] {job.label()}  " + said[0].rsplit("  ", 1)[1]]
    reg = Registry(db)
    assert reg.job_status(job.hash) == "failed"
    rows = reg.runs(config_hash=job.hash)
    assert [r["status"] for r in rows] == ([] if stage == "row" else ["running"])  # never finished
    kept = {"row": [], "train": ["step-000000003.pt"], "eval": ["step-000000003.pt"],
            "export": ["step-000000006.pt"]}[stage]  # the last one only: the job keeps one
    ckpts = sorted(p.name for p in (out / "checkpoints").glob("step-*.pt"))
    assert ckpts == kept and all(load_checkpoint(out / "checkpoints" / c)["step"] for c in ckpts)

    monkeypatch.delenv("SUITE_TEST_KILL_AT")
    assert Runner(db, threads=1, log_dir=logs).run([job]) == {"finished": 1}
    again = reg.runs(config_hash=job.hash)
    assert [r["status"] for r in again] == ["finished"], again
    if rows:
        assert again[0]["id"] == rows[0]["id"]  # the same row, continued
    _as_once(reg, again[0]["id"], reference)
    assert {"acc"} <= {m["name"] for m in reg.metrics(again[0]["id"]) if m["split"] == "test"}
    assert (out / "export" / "run.json").is_file() and (out / "export" / "config.json").is_file()


# ----------------------------------------------------------------------------- a requeue onto another node

def _node_task(spec, tmp_path: Path, host: str, restarts: int, env: dict) -> subprocess.CompletedProcess:
    """What SLURM runs for array task 77_0 (submitit's call of :class:`SlurmTask` with the job's Spec), on ``host``,
    restarted ``restarts`` times (SLURM_RESTART_COUNT)."""
    f = tmp_path / "spec.pkl"
    f.write_bytes(pickle.dumps(spec))
    code = ("import pickle, sys; from benchmarks.runner.executors.node import SlurmTask; "
            f"print(SlurmTask()(pickle.load(open({str(f)!r}, 'rb'))))")
    env = {**env, "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_ID": "78",
           "SLURM_RESTART_COUNT": str(restarts)}
    return subprocess.run(["unshare", "--uts", "sh", "-c", f'hostname {host} && exec "$@"', "sh", sys.executable,
                           "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)


def _queued(tmp_path: Path, data: Path, **args):
    """A job claimed 'queued' by this process (the submitting runner) and the Spec its SLURM task is handed."""
    from benchmarks.runner.executors.slurm import SlurmExecutor
    from benchmarks.runner.plan import Runner

    out = tmp_path / "runs" / "job"
    _, (job,) = load_suite(_suite(tmp_path, "requeue", [_tu(data, str(out), **args)]))
    db, logs = str(tmp_path / "r.sqlite"), tmp_path / "logs"
    runner = Runner(db, threads=1, log_dir=logs)
    reg = Registry(db)
    assert reg.claim_job(job.hash, job.label(), status="queued", log=str(logs / f"{job.hash}.log"))
    reg.update_job(job.hash, ("queued",), scheduler_id="slurm:77_0")
    return job, reg, out, SlurmExecutor().spec(runner.stage(), job)


def test_requeue_onto_another_node_resumes_there(data, reference, tmp_path, monkeypatch):
    """a SLURM array task whose node goes down after the job's first checkpoint (its process and the job SIGKILLed on
    host node-a), requeued by SLURM onto node-b (another hostname, SLURM_RESTART_COUNT=1) -> the task on node-b takes
    the job's row back by its scheduler id and resumes the CPU checkpoint into the same run row: one row, finished, its
    host node-b; the job row finished on node-b with requeues 1; the log says where it resumed"""
    pytest.importorskip("submitit")
    _needs_unshare()
    _killing(monkeypatch, tmp_path, "node")
    job, reg, out, spec = _queued(tmp_path, data)  # its environment (PYTHON*, SUITE_*) is the Spec's, as on a node
    first = _node_task(spec, tmp_path, "node-a", 0, dict(os.environ))
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    row = reg.job(job.hash)
    assert (row["status"], row["host"], row["scheduler_id"]) == ("running", "node-a", "slurm:77_0")
    (run,) = reg.runs(config_hash=job.hash)
    assert run["host"] == "node-a" and sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000000003.pt"]

    monkeypatch.delenv("SUITE_TEST_KILL_AT")
    spec = dataclasses.replace(spec, env={k: v for k, v in spec.env.items() if k != "SUITE_TEST_KILL_AT"})
    second = _node_task(spec, tmp_path, "node-b", 1, dict(os.environ))
    assert second.returncode == 0 and second.stdout.strip().endswith("finished"), second.stdout + second.stderr
    runs = reg.runs(config_hash=job.hash)
    assert [(r["id"], r["status"], r["host"]) for r in runs] == [(run["id"], "finished", "node-b")]
    row = reg.job(job.hash)
    assert (row["status"], row["host"], row["requeues"]) == ("finished", "node-b", 1)
    log = Path(row["log"]).read_text()
    assert "[requeued 1]" in log and "resumes from" in log and "step-000000003.pt" in log
    _as_once(reg, run["id"], reference)


def test_requeue_onto_a_node_without_the_gpu(data, tmp_path):
    """a job asking for `--device cuda` requeued by SLURM (it ran on node-a) onto node-b, which has no CUDA GPU ->
    the task fails at once with one line in the job's log naming the device and that no CUDA GPU is available, before
    any run row is written; the job row 'failed' (not running or queued), the scheduler's id and requeue count kept;
    no run row at all"""
    pytest.importorskip("submitit")
    _needs_unshare()
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    job, reg, out, spec = _queued(tmp_path, data, device="cuda")
    reg.update_job(job.hash, ("queued",), status="running", host="node-a")  # what node-a's task had written
    p = _node_task(spec, tmp_path, "node-b", 1, dict(os.environ))
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1].startswith("failed (rc=2"), p.stdout + p.stderr
    row = reg.job(job.hash)
    assert (row["status"], row["scheduler_id"], row["requeues"]) == ("failed", "slurm:77_0", 1)
    log = Path(row["log"]).read_text().strip().splitlines()
    assert log[-1] == ("error: device 'cuda' asked for, but no CUDA GPU is available; use --device cpu or auto"), log
    assert not any("Traceback" in line for line in log) and reg.runs() == []


# ----------------------------------------------------------------------------- the PostgreSQL server restarting

def _tu_cli(data: Path, out: Path, epochs: int = 2) -> list[str]:
    return ["graph", "tu", "--dataset", "SYNTH", "--data-root", str(data), "--epochs", str(epochs), "--batch-size",
            "16", "--hidden", "8", "--layers", "2", "--svm-folds", "4", "--svm-inner-folds", "2", "--out", str(out)]


def _stop_at_first_checkpoint(monkeypatch, pg: Postgres, down_for: float | None) -> None:
    """The PostgreSQL server stops just after the run's first checkpoint; starts again ``down_for`` s later (None:
    not)."""
    from suite.train.folders import Checkpoints

    save, done = Checkpoints.save, []

    def save_then_stop(self, *args, **kwargs):
        path = save(self, *args, **kwargs)
        if not done:
            done.append(path)
            pg.stop()
            if down_for is not None:
                threading.Timer(down_for, pg.start).start()
        return path

    monkeypatch.setattr(Checkpoints, "save", save_then_stop)


def test_postgres_restarting_mid_run_is_survived(postgres, data, reference, tmp_path, monkeypatch, capsys):
    """the registry's PostgreSQL server stops after a `suite graph tu` run's first checkpoint and starts again 10 s
    later (the run's next writes, epoch 2's, come while it is down) -> the writes wait for it (SUITE_REGISTRY_TIMEOUT,
    here 30 s) and the run finishes: exit 0, one row, finished, every metric logged once (the first write failed at
    once: 'connection refused', exit 2, the row left running)"""
    from suite.cli import main

    url = postgres.database("restart")
    monkeypatch.setenv("SUITE_REGISTRY", url)
    monkeypatch.setenv("SUITE_REGISTRY_TIMEOUT", "30")
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    _stop_at_first_checkpoint(monkeypatch, postgres, 10.0)
    try:
        rc = main(_tu_cli(data, tmp_path / "run"))
        err = capsys.readouterr().err
    finally:
        deadline = time.monotonic() + 30
        while not postgres.running() and time.monotonic() < deadline:
            time.sleep(0.5)
    assert rc == 0, err
    reg = Registry(url)
    (run,) = reg.runs()
    assert run["status"] == "finished"
    _as_once(reg, run["id"], reference)


def test_postgres_down_past_the_bound(postgres, data, reference, tmp_path, monkeypatch, capsys):
    """the registry's PostgreSQL server stops after the run's first checkpoint and stays down, SUITE_REGISTRY_TIMEOUT=3
    -> after about 3 s of retries (twice: the metric, then the failed row) exit 2 and one line naming the registry, that
    its server did not answer for 3 s, and that what was recorded is kept; the checkpoint kept; once the server is back
    the run's row and its epoch-1 metrics are there, and the same command resumes from the checkpoint into that row:
    one row, finished"""
    from suite.cli import main

    url = postgres.database("gone")
    monkeypatch.setenv("SUITE_REGISTRY", url)
    monkeypatch.setenv("SUITE_REGISTRY_TIMEOUT", "3")
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    _stop_at_first_checkpoint(monkeypatch, postgres, None)
    folder = tmp_path / "run"
    t0 = time.monotonic()
    try:
        rc = main(_tu_cli(data, folder))
        took = time.monotonic() - t0
        err = capsys.readouterr().err.strip()
    finally:
        postgres.start()
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err, (rc, err)
    assert err.startswith(f"error: registry {url}") and "did not answer for 3 s" in err, err
    assert "what was recorded before is kept" in err, err
    assert took < 40, took
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["step-000000003.pt"]
    reg = Registry(url)
    (run,) = reg.runs()
    assert run["status"] != "finished" and ("loss", "train", 1) in _logged(reg, run["id"])  # epoch 1's, kept
    monkeypatch.undo()
    monkeypatch.setenv("SUITE_REGISTRY", url)
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    assert main(_tu_cli(data, folder)) == 0
    assert [(r["id"], r["status"]) for r in reg.runs()] == [(run["id"], "finished")]
    _as_once(reg, run["id"], reference)


# ----------------------------------------------------------------------------- two login nodes, one registry

def test_two_grids_from_two_login_nodes(slurm, postgres, data, tmp_path):
    """the same 2-job grid submitted at once with `--executor slurm` from two login nodes (two runners, hostnames
    login-a and login-b) on one PostgreSQL registry -> each job is submitted and runs once: one finished run row per
    job; each job is followed to its end by one runner and reported [busy] by the other, naming the login node that
    queued it or its SLURM task; both runners exit 0; run again from login-b afterwards, both jobs are skipped"""
    _needs_unshare()
    env, _, _ = slurm
    url = postgres.database("logins")
    Registry(url)  # the schema made once, before the two runners race for the rows
    suite = _suite(tmp_path, "logins", [_tu(data, "runs/{job}", seed=0), _tu(data, "runs/{job}", seed=1)])
    _, jobs = load_suite(suite)
    env = {**os.environ, **env}
    runners = {h: _bench(["run", str(suite), "--executor", "slurm", "--registry", url], env, tmp_path, host=h)
               for h in ("login-a", "login-b")}
    outs = {}
    try:
        for h, p in runners.items():
            outs[h] = p.communicate(timeout=240)
    finally:
        for p in runners.values():
            if p.poll() is None:
                p.kill()
    for h, p in runners.items():
        assert p.returncode == 0, (h, outs[h])
    reg = Registry(url)
    for j in jobs:
        assert [r["status"] for r in reg.runs(config_hash=j.hash)] == ["finished"], j.label()
        assert reg.job_status(j.hash) == "finished"
        ran = [h for h in runners if any(line.startswith("[finished]") and j.label() in line
                                         for line in outs[h][0].splitlines())]
        assert len(ran) == 1, outs  # followed to its end by one runner
        (other,) = set(runners) - set(ran)
        busy = [line for line in outs[other][0].splitlines() if line.startswith("[busy]") and j.label() in line]
        assert len(busy) == 1 and ("queued on " + ran[0] in busy[0] or "slurm:" in busy[0]), outs[other][0]
    again = _bench(["run", str(suite), "--executor", "slurm", "--registry", url], env, tmp_path, host="login-b")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0 and "summary: skipped 2" in out, out + err
