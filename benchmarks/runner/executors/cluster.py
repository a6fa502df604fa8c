"""What the cluster executors (``slurm``, ``ray``) share: the submitting side's loop, the resource spellings and the
registry a cluster may use.

A cluster executor keeps the runner's rules, and does not repeat them: the plan decides per stage which jobs run
(finished ones skipped, rebuilds and reruns as with ``local``); the executor claims each in the registry's ``jobs``
table as ``queued`` (so a second runner on the same registry does not submit it again), submits them
(:meth:`ClusterExecutor.submit`: one SLURM job array, or one Ray task each, per stage and set of resources), and follows
them through the scheduler and the registry (:meth:`ClusterExecutor._follow`), printing their ends and progress. On the
node, the job's own process runs it as ``local`` does (:mod:`benchmarks.runner.executors.node`).

The runner takes a job whose row has not ended as gone only when the scheduler no longer holds it (a backend may wait
longer: a SLURM task ending to be requeued passes through ended states); after ``--max-requeues`` restarts the job
fails with one line. An SQLite registry on a network file system is refused (:func:`check_registry`): SQLite's locks
are not safe there."""
from __future__ import annotations

import argparse
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmarks.runner.executors import Executor, Stage
from benchmarks.runner.executors.node import Spec
from benchmarks.runner.suitefile import Job, resources_of

# file systems a registry file must not be on (SQLite's locking is unreliable there); /proc/mounts' type names
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p", "afs",
              "panfs", "wekafs", "orangefs", "pvfs2", "ncpfs", "coda", "davfs", "fuse.sshfs", "fuse.glusterfs",
              "fuse.ceph", "fuse.beegfs", "fuse.gcsfuse", "fuse.s3fs", "fuse.juicefs"}
_PASSED_ENV = re.compile(r"^(SUITE_|HF_|TRANSFORMERS_|TORCH_|OMP_|MKL_|CUDA_VISIBLE|PYTHON|TRITON_|WANDB_|MLFLOW_)")


def mount_of(path: str | Path, mounts: str = "/proc/mounts") -> tuple[str, str]:
    """(mount point, file system type) of the mount that holds ``path`` (the longest mount point above it)."""
    p = os.path.realpath(os.path.abspath(os.path.expanduser(str(path))))
    best = ("/", "")
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (p == point or p.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def check_registry(url: str, executor: str, mounts: str = "/proc/mounts") -> None:
    """A cluster executor on an SQLite registry file on a network file system: a ``ValueError``, one line saying why."""
    if executor == "local":
        return
    if "://" in url and not url.startswith("sqlite"):
        return
    path = url.split(":///", 1)[1] if url.startswith("sqlite") else url
    point, fs = mount_of(Path(path).expanduser().parent if not Path(path).exists() else path, mounts)
    if fs in NETWORK_FS or fs.startswith("nfs"):
        raise ValueError(f"--executor {executor}: the registry {path} is an SQLite file on a network file system "
                         f"({fs} at {point}), where SQLite's locking is not safe for jobs on several nodes; use a "
                         "PostgreSQL registry (--registry postgresql+psycopg://user@host/db)")


def time_minutes(value: Any) -> int:
    """``time:`` of ``resources`` in minutes (an integer, or SLURM's [D-]H:MM[:SS] / MM:SS spelling)."""
    if isinstance(value, int):
        return value
    days, _, rest = str(value).rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    if len(parts) == 2:  # H:MM with a day, MM:SS without (SLURM's reading)
        h, m, s = (parts[0], parts[1], 0) if days else (0, parts[0], parts[1])
    return max(1, (int(days or 0) * 24 + h) * 60 + m + (1 if s else 0))


def mem_string(value: Any) -> str:
    """``mem:`` as SLURM spells it: a number is GB."""
    return f"{value}G" if isinstance(value, (int, float)) else str(value).upper().rstrip("B")


def mem_bytes(value: Any) -> int:
    text = mem_string(value)
    unit = text[-1] if text[-1] in "KMGT" else "M"
    num = float(text[:-1] if text[-1] in "KMGT" else text)
    return int(num * 1024 ** ("KMGT".index(unit) + 1))


@dataclass
class ClusterExecutor(Executor):
    """Runs a stage's jobs on a cluster: claims them ``queued``, :meth:`submit` s them, follows them to their ends. A
    backend writes :meth:`submit`, :meth:`_poll` and :meth:`_cancel_all`, and where it needs them :meth:`_hold`,
    :meth:`_gone` and :meth:`_lost`."""
    max_requeues: int = 3
    poll: float = 1.0  # seconds between the follow loop's looks at the scheduler and the registry
    _cancel: list[Any] = field(default_factory=list, repr=False)  # what stop() cancels: this runner's handles
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def options(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--max-requeues", type=int, default=3, help="slurm/ray: times a preempted or timed-out job is "
                                                                      "requeued (it resumes from its checkpoint)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Executor:
        """The executor with the options its fields name (``--max-requeues`` for ``max_requeues``...)."""
        if getattr(args, "max_parallel", 0) < 0 or args.max_requeues < 0:
            raise ValueError(f"--max-parallel and --max-requeues must be >= 0, got {getattr(args, 'max_parallel', 0)} "
                             f"and {args.max_requeues}")
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)
                      if f.init and not f.name.startswith("_") and hasattr(args, f.name)})

    def check(self, registry_url: str) -> None:
        """Before anything is claimed: a registry the nodes can share (a backend checks its package and scheduler)."""
        check_registry(registry_url, self.name)

    def spec(self, stage: Stage, job: Job) -> Spec:
        """What the job's process on a node is handed."""
        res = resources_of(job)
        return Spec(job, stage.registry_url, str(stage.log_dir.resolve()), os.getcwd(),
                    (socket.gethostname(), os.getpid()), stage.threads or int(res.get("cpus") or 1),
                    self.max_requeues, stage.grace, {k: v for k, v in os.environ.items() if _PASSED_ENV.match(k)})

    def run_stage(self, stage: Stage, jobs: list[Job], reg: Any) -> list[str]:
        out: dict[str, str] = {}
        todo: list[Job] = []
        for j in jobs:
            settled = stage.settle(j, reg, f"would submit ({self.name}, {resources_of(j) or 'default resources'}):")
            if settled is not None:
                out[j.hash] = settled
            elif not reg.claim_job(j.hash, j.label(), rerun=stage.rerun(j), status="queued",
                                   log=str(stage.log_dir / f"{j.hash}.log")):
                stage.end(j, None)
                held = reg.job(j.hash) or {}
                out[j.hash] = "skipped" if held.get("status") == "finished" else "busy"
                if out[j.hash] == "busy":
                    print(f"[busy] {j.label()}  ({held.get('status')} on {held.get('host')}"
                          f"{', ' + held['scheduler_id'] if held.get('scheduler_id') else ''}; run again when it has "
                          "ended)", flush=True)
            else:
                todo.append(j)
        if todo:
            stage.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                handles = self.submit(stage, todo, reg)
            except Exception:
                for j in todo:  # nothing was submitted: the rows are not left queued
                    reg.finish_job(j.hash, "failed", only_if=("queued",))
                raise
            out.update(self._follow(stage, todo, handles, reg))
        return [out[j.hash] for j in jobs]

    # ---------------------------------------------------------------- what a backend writes
    def submit(self, stage: Stage, jobs: list[Job], reg: Any) -> dict[str, Any]:
        """Submit the claimed jobs (each handed :meth:`spec`); {job hash: the scheduler's handle}, each also kept for
        :meth:`stop` (:meth:`_remember`)."""
        raise NotImplementedError

    def _poll(self, handles: dict[str, Any], left: dict[str, Job], state: dict[str, Any]) -> tuple[
            set[str], dict[str, str | None]]:
        """(the hashes of ``left`` the scheduler no longer holds, {hash: the scheduler's word on its task}); ``state``
        is the backend's own across the polls of one stage."""
        raise NotImplementedError

    def _hold(self, job: Job, handle: Any, row: dict[str, Any], said: str | None, state: dict[str, Any]) -> bool:
        """A job the scheduler no longer holds whose row has not ended: True to follow it on (it may come back)."""
        return False

    def _gone(self, job: Job, handle: Any) -> None:
        """The job's task has ended (a backend may say how)."""

    def _lost(self, stage: Stage, handle: Any, said: str | None, log: str) -> str:
        """Where to look for a job that ended without recording its end: ``log`` and what the scheduler adds."""
        return log

    def _cancel_all(self, handles: list[Any]) -> None:
        """Cancel the tasks of these handles."""
        raise NotImplementedError

    # ---------------------------------------------------------------- following
    def _remember(self, handle: Any) -> None:
        with self._lock:
            self._cancel.append(handle)

    def _follow(self, stage: Stage, jobs: list[Job], handles: dict[str, Any], reg: Any) -> dict[str, str]:
        """Wait for the submitted jobs; each one's status when the scheduler no longer holds it, read from its row."""
        out: dict[str, str] = {}
        started: set[str] = set()
        requeued: dict[str, int] = {}
        t0 = {j.hash: time.monotonic() for j in jobs}
        left = {j.hash: j for j in jobs}
        state: dict[str, Any] = {}
        while left:
            gone, said_by = self._poll(handles, left, state)
            rows = reg.jobs_of(list(left))
            for h in list(left):
                row = rows.get(h) or {}
                if (row.get("requeues") or 0) > requeued.get(h, 0):
                    requeued[h] = row["requeues"]
                    print(f"[requeued {row['requeues']}] {left[h].label()}  ({row.get('scheduler_id')}; it resumes "
                          "from its last checkpoint)", flush=True)
                if h not in started and row.get("status") == "running":
                    started.add(h)
                    t0[h] = time.monotonic()
                    stage.start(left[h])
                    print(f"[start] {left[h].label()}  ({row.get('scheduler_id')} on {row.get('host')})\n"
                          f"{stage.progress()}", flush=True)
                if h not in gone:
                    continue
                if row.get("status") in ("queued", "running", "interrupted") and self._hold(
                        left[h], handles[h], row, said_by.get(h), state):
                    continue
                job = left.pop(h)
                self._gone(job, handles[h])
                row = reg.job(h) or {}
                status = row.get("status") or "failed"
                log = row.get("log") or str(stage.log_dir / f"{h}.log")
                if status in ("queued", "running", "interrupted"):  # it ended without recording its end
                    reg.finish_job(h, "failed", only_if=("queued", "running", "interrupted"))
                    status = "failed"
                    log = self._lost(stage, handles[h], said_by.get(h), log)
                took = time.monotonic() - t0[h]
                stage.end(job, took if status == "finished" else None)
                if status == "failed":
                    stage.failed(job.label(), Path(log))
                again = f", requeued {row['requeues']}x" if row.get("requeues") else ""
                shown = f"failed (log {log})" if status == "failed" else status
                print(f"[{shown}] {job.label()}  ({took:.1f} s{again})\n{stage.progress()}", flush=True)
                out[h] = status
            if left:
                time.sleep(self.poll)
        return out

    def stop(self) -> None:
        """Cancel what this runner submitted (Ctrl-C / SIGTERM to the runner)."""
        with self._lock:
            handles, self._cancel = list(self._cancel), []
        if handles:
            self._cancel_all(handles)
