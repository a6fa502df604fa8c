"""What runs on a cluster node: a job's own process, started by SLURM (:class:`SlurmTask`, which submitit pickles by
this module's path) or Ray (:func:`ray_task`), handed the job's :class:`Spec`.

The process (:func:`node_main`) runs one job as ``--executor local`` would (:class:`LocalExecutor`): it takes the
queued row the submitting runner claimed (``claim_job(queued_by=...)``), runs the front-end's command as a child
(thread budget, log file, the child follows it when it dies), and records the end. A requeued task (SLURM's
``scontrol requeue``, submitit's time-limit signal, which :meth:`SlurmTask.checkpoint` turns into a stop and a
requeue; a Ray retry) takes its own row back by its scheduler id, ``requeues`` counted, and its run resumes from its
newest checkpoint. Another task of a job on several processes (:func:`node_rank`) runs the same command, which joins
rank 0's."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.runner.executors import Stage
from benchmarks.runner.executors.local import LocalExecutor, available_cores, job_command, job_env
from benchmarks.runner.progress import Progress
from benchmarks.runner.suitefile import Job

ENDED = ("finished", "failed", "cancelled", "interrupted")  # a job row's states after its end
RANK0_POLL_S = 5.0  # how often another task of a job on several processes reads rank 0's row
_ACTIVE: dict[str, Any] = {}  # the one-job run of this node process (for SIGTERM and submitit's checkpoint)


@dataclass
class Spec:
    """What a job's own process on a node is handed (pickled by submitit or Ray): the job, where it reports, the
    submitting runner (whose queued row it takes) and the environment it needs."""
    job: Job
    registry_url: str
    log_dir: str
    cwd: str
    queued_by: tuple[str, int]
    threads: int
    max_requeues: int
    grace: float
    env: dict[str, str] = field(default_factory=dict)


class _OneJob:
    """The node process's run of its one job: a stage of its own (no plan: the submitting runner made it) and the
    local executor."""

    def __init__(self, spec: Spec, claim: dict[str, Any] | None = None) -> None:
        self.executor = LocalExecutor()
        self._stop = threading.Event()
        progress = Progress()
        threads = spec.threads or available_cores()
        self.stage = Stage(
            registry_url=spec.registry_url, log_dir=Path(spec.log_dir), grace=spec.grace, command=job_command,
            env=lambda job: job_env(job, spec.registry_url, threads), rerun=lambda job: False,
            finished=lambda job, reg: reg.job_status(job.hash) == "finished", start=progress.start, end=progress.end,
            progress=progress.text, failed=lambda label, log: None, stopping=self._stop.is_set, stop=self.stop,
            threads=spec.threads, budget=threads, claim=claim or {})

    def stop(self) -> None:
        self._stop.set()
        self.executor.stop()


def node_main(spec: Spec, scheduler_id: str, requeues: int | None) -> str:
    """Run one job on a node as the local executor would (claim, child process, log, end), from its queued row;
    ``requeues``: restarts by the scheduler (None: counted from the row, for Ray's retries)."""
    from suite.registry import Registry

    os.chdir(spec.cwd)
    os.environ.update(spec.env)
    reg = Registry(spec.registry_url)
    row = reg.job(spec.job.hash) or {}
    if requeues is None:
        again = row.get("scheduler_id") == scheduler_id and row.get("status") in ("running", "interrupted")
        requeues = (row.get("requeues") or 0) + 1 if again else (row.get("requeues") or 0)
    log = Path(spec.log_dir) / f"{spec.job.hash}.log"
    if requeues > spec.max_requeues:
        reg.update_job(spec.job.hash, ("queued", "running", "interrupted"), status="failed", requeues=requeues,
                       ended_at=_now())
        print(f"[failed] {spec.job.label()}  (requeued {requeues} times, more than --max-requeues "
              f"{spec.max_requeues}; log {log})", flush=True)
        return "failed"
    run = _OneJob(spec, {"queued_by": spec.queued_by, "scheduler_id": scheduler_id, "requeues": requeues,
                         "log": str(log)})
    _ACTIVE["run"] = run
    out = spec.job.output()
    ckpts = sorted((out / "checkpoints").glob("step-*.pt"), key=lambda p: p.stat().st_mtime) if out else []
    if requeues:  # said in the scheduler's log and in the job's own, which goes on
        msg = (f"[requeued {requeues}] {spec.job.label()}  (" + (f"resumes from {ckpts[-1]}" if ckpts else
               "no checkpoint yet: starts again") + ")")
        print(msg, flush=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(msg + "\n")

    def on_term(signum: int, frame: Any) -> None:  # the scheduler stops the job (requeue, cancel, time limit)
        run.stop()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        return run.executor.run_one(run.stage, spec.job, reg)
    finally:
        signal.signal(signal.SIGTERM, old)
        _ACTIVE.pop("run", None)


def node_rank(spec: Spec, rank: int, requeues: int) -> str:
    """Another task (``rank`` > 0) of a job on several processes (``resources: {nodes: N, tasks: T}``): the same
    command, which joins rank 0's through torch.distributed (:func:`suite.distributed.slurm_env`); its log
    ``<hash>.rank<r>.log``. The registry is rank 0's (its row, its end); this task only runs and stops its process."""
    from suite.registry import Registry

    if requeues > spec.max_requeues:  # rank 0 fails the job
        return "failed"
    os.chdir(spec.cwd)
    os.environ.update(spec.env)
    run = _OneJob(spec)
    done = threading.Event()

    def follow_rank0() -> None:  # rank 0 ended the job (failed before its command started, cancelled...): stop too,
        reg = Registry(spec.registry_url)  # not wait for a rendezvous that never comes (torch's timeout: 30 min)
        ended = lambda: (reg.job(spec.job.hash) or {}).get("status") in ENDED  # noqa: E731
        while not done.wait(RANK0_POLL_S):
            # still ended after the grace: a finished job's other ranks end with it, and a requeued task's rank 0
            # takes the row of the attempt before back within it
            if ended() and not done.wait(spec.grace) and ended():
                run.stop()
                return

    old = signal.signal(signal.SIGTERM, lambda signum, frame: run.stop())
    threading.Thread(target=follow_rank0, daemon=True).start()
    try:
        rc = run.executor.spawn(run.stage, spec.job, Path(spec.log_dir) / f"{spec.job.hash}.rank{rank}.log",
                                append=requeues > 0)
    finally:
        done.set()
        signal.signal(signal.SIGTERM, old)
    return "finished" if rc == 0 else "failed"


def _alive(proc: subprocess.Popen) -> bool:  # type: ignore[type-arg]
    """Whether a child still runs, without reaping it (its waiting thread may be the one this signal handler
    interrupted, holding the Popen's lock): a zombie has ended."""
    try:
        return Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: what the Popen knows
        return proc.returncode is None


def _now() -> str:
    from suite.registry.schema import _now as now

    return now()


class SlurmTask:
    """The callable submitit runs in each array task: :func:`node_main` with SLURM's ids; :meth:`checkpoint` is
    submitit's hook on the time-limit / preemption signal (stop the job's command, requeue the same task)."""

    def __call__(self, spec: Spec) -> str:
        array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        sid = f"slurm:{array}_{task}" if array and task else f"slurm:{os.environ.get('SLURM_JOB_ID', '?')}"
        requeues = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        rank = int(os.environ.get("SLURM_PROCID") or 0)
        return node_main(spec, sid, requeues) if rank == 0 else node_rank(spec, rank, requeues)

    def checkpoint(self, spec: Spec) -> Any:
        import submitit

        run = _ACTIVE.get("run")
        if run is not None:  # the run owner ends the run interrupted; its checkpoints stay for the next start
            run.stop()
            deadline = time.monotonic() + spec.grace
            while any(map(_alive, run.executor.children())) and time.monotonic() < deadline:
                time.sleep(0.2)
        if int(os.environ.get("SLURM_RESTART_COUNT") or 0) >= spec.max_requeues:
            return None
        return submitit.helpers.DelayedSubmission(self, spec)


def ray_task(spec: Spec) -> str:
    """The function Ray runs as each job's task: :func:`node_main` with Ray's task id (its retries counted from the
    row)."""
    import ray

    return node_main(spec, f"ray:{ray.get_runtime_context().get_task_id()}", None)
