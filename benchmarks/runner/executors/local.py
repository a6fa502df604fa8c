"""``--executor local``: a stage's jobs as processes of this machine, ``--jobs`` at a time (a thread pool, one thread
a job process). Each job is claimed in the registry's jobs table (``running``), runs its front-end's command in its own
session with its output to ``<log_dir>/<hash>.log``, and ends ``finished``, ``failed`` or ``interrupted`` (stopped);
a job's ``timeout`` ends it with SIGTERM, then SIGKILL after the grace. A job's own process on a cluster node runs its
job the same way (:mod:`benchmarks.runner.executors.node`)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.runner.executors import Executor, Stage
from benchmarks.runner.suitefile import Job, _loss_origin
from suite.config import LOSS_SHA_ENV


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def job_command(job: Job, launcher: str = "local", nproc_per_node: int = 1, nnodes: int = 1,
                rdzv_endpoint: str | None = None) -> list[str]:
    """The job's command line: ``python -m suite <front-end> <command> <args>``, under torchrun with ``launcher``
    torchrun (``nproc_per_node`` processes on each of ``nnodes`` machines)."""
    if launcher == "torchrun":
        tr = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}", f"--nnodes={nnodes}"]
        if nnodes > 1:
            if not rdzv_endpoint:
                raise ValueError("--nnodes > 1 needs --rdzv-endpoint host:port")
            tr += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}"]
        else:
            tr += ["--standalone"]
        return tr + ["-m", "suite", *job.argv()]
    if launcher != "local":
        raise ValueError(f"launcher must be local or torchrun, got {launcher!r}")
    return [sys.executable, "-m", "suite", *job.argv()]


def job_env(job: Job, registry_url: str, threads: int, launcher: str = "local", jobs: int = 1) -> dict[str, str]:
    """The job process's environment: job hash, registry, and the thread budget ``threads`` (OpenMP / MKL / OpenBLAS,
    which torch's intra-op pool follows; ``SUITE_THREADS`` for front-ends that set torch threads themselves)."""
    t = str(threads)
    env = {**os.environ, "SUITE_CONFIG_HASH": job.hash, "SUITE_REGISTRY": registry_url,
           "OMP_NUM_THREADS": t, "MKL_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "SUITE_THREADS": t}
    if launcher == "local":  # `python -m suite` asks for SIGTERM when this runner dies (suite.cli)
        env["SUITE_RUNNER_PID"] = str(os.getpid())
    if jobs > 1:
        env["SUITE_NO_PROGRESS"] = "1"
    origin = _loss_origin(dict(job.args).get("loss"))
    if origin:  # the user's loss source the job's hash was made with: the child refuses another (suite.config)
        env[LOSS_SHA_ENV] = origin["sha256"]
    else:
        env.pop(LOSS_SHA_ENV, None)
    return env


def _signal_group(proc: subprocess.Popen, sig: int) -> None:  # type: ignore[type-arg]
    """Signal the job's whole process group (it leads its own session); the job alone if that fails."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


@dataclass
class LocalExecutor(Executor):
    """Processes of this machine: :meth:`run_stage` runs ``stage.jobs`` of them at a time."""
    name = "local"
    _procs: set[subprocess.Popen] = field(default_factory=set, repr=False)  # type: ignore[type-arg]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _grace: float = 30.0  # the grace of the stage that started the processes (stop() kills after it)

    def describe(self, stage: Stage) -> str:
        return f"{stage.jobs} at a time x {stage.budget} threads ({available_cores()} cores)"

    def run_stage(self, stage: Stage, jobs: list[Job], reg: Any) -> list[str]:
        with ThreadPoolExecutor(max_workers=max(1, stage.jobs)) as pool:
            futures = [pool.submit(self.run_one, stage, j, reg) for j in jobs]
            try:
                return [f.result() for f in futures]
            except KeyboardInterrupt:  # stop the jobs before the pool waits for them
                stage.stop()
                raise

    def run_one(self, stage: Stage, job: Job, reg: Any) -> str:
        """Claim the job, run its command, record its end; its status (``failed (rc=..., log ...)`` where it failed)."""
        settled = stage.settle(job, reg, "would run:")
        if settled is not None:
            return settled
        log = stage.log_dir / f"{job.hash}.log"
        if not reg.claim_job(job.hash, job.label(), rerun=stage.rerun(job), **stage.claim):
            stage.end(job, None)
            held = reg.job(job.hash) or {}
            if held.get("status") == "finished":
                return "skipped"
            print(f"[busy] {job.label()}  (running in pid {held.get('child_pid') or held.get('pid')} on "
                  f"{held.get('host')}; run again when it has ended)", flush=True)
            return "busy"
        stage.start(job)
        print(f"[start] {job.label()}\n{stage.progress()}", flush=True)
        stage.log_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        rc = self.spawn(stage, job, log, append=bool(stage.claim.get("requeues")), child=reg.set_job_child)
        status = "finished" if rc == 0 else ("interrupted" if stage.stopping() else f"failed (rc={rc}, log {log})")
        reg.finish_job(job.hash, status.split(" ")[0], only_if=("running",))  # a cancelled job stays cancelled
        took = time.perf_counter() - t0
        stage.end(job, took if rc == 0 else None)
        if status.startswith("failed"):
            stage.failed(job.label(), log)
        print(f"[{status}] {job.label()}  ({took:.1f} s)\n{stage.progress()}", flush=True)
        return status

    def spawn(self, stage: Stage, job: Job, log: Path, append: bool = False, child: Any = None) -> int:
        """Run the job's command in its own session (process group: the runner signals every process it starts), its
        output to ``log`` (``append``: a requeued job's log goes on); ``child(hash, pid)`` is told its pid. Its
        ``timeout`` ends it with SIGTERM, then SIGKILL after the grace. The exit code."""
        self._grace = stage.grace
        with open(log, "a" if append else "w") as fh:
            fh.write(" ".join(stage.command(job)) + "\n")
            fh.flush()
            proc = subprocess.Popen(stage.command(job), stdout=fh, stderr=subprocess.STDOUT, env=stage.env(job),
                                    start_new_session=True)
            with self._lock:
                self._procs.add(proc)
                if stage.stopping():  # stop() ran between the check above and the start
                    _signal_group(proc, signal.SIGTERM)
            try:
                if child is not None:
                    child(job.hash, proc.pid)
                return proc.wait(timeout=job.timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGTERM)
                try:
                    return proc.wait(timeout=stage.grace)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    return proc.wait()
            finally:
                with self._lock:
                    self._procs.discard(proc)
                if proc.poll() is None:  # the runner itself is failing: take the job down with it
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()

    def children(self) -> list[subprocess.Popen]:  # type: ignore[type-arg]
        """The job processes started and not yet reaped (read without the lock: a signal handler asks)."""
        return list(self._procs)

    def stop(self) -> None:
        """SIGTERM to every running job's process group (their runs are marked interrupted); a group still alive after
        the grace gets SIGKILL."""
        with self._lock:
            procs = [p for p in self._procs if p.poll() is None]
        for p in procs:
            _signal_group(p, signal.SIGTERM)
        if procs:
            timer = threading.Timer(self._grace, self.kill)
            timer.daemon = True
            timer.start()

    def kill(self) -> None:
        """SIGKILL every job's process group that is still running (the runner is going away)."""
        with self._lock:
            procs = [p for p in self._procs if p.poll() is None]
        for p in procs:
            _signal_group(p, signal.SIGKILL)
