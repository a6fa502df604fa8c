"""``suite bench cancel SUITE``: stop a grid's queued and running jobs, wherever they run. Each job the registry's jobs
table holds queued or running becomes ``cancelled`` there; a backend that stops its own tasks does so
(:meth:`~benchmarks.runner.executors.Executor.cancel_tasks`: SLURM's array tasks with ``scancel``), and a runner of this
machine holding jobs (``--executor local`` or ``ray``) gets SIGTERM, which stops its jobs' processes
(their runs end ``interrupted`` and resume from their checkpoints when the grid is run again)."""
from __future__ import annotations

import argparse
import os
import signal
import socket
from typing import Any

from benchmarks.runner.suitefile import Job


def cancel_jobs(reg: Any, jobs: list[Job]) -> list[tuple[Job, str]]:
    """Stop a grid's queued and running jobs: each row becomes ``cancelled`` (its end never overwrites that), a
    backend that stops its own tasks does (:meth:`Executor.cancel_tasks`: SLURM's ``scancel``), and a runner of this
    host that holds the others (local, Ray) gets SIGTERM, which stops its jobs. [(job, what it was)] of the jobs
    cancelled."""
    from benchmarks.runner.executors import EXECUTORS, executor_class
    from suite.registry.schema import _now as now

    done: list[tuple[Job, str]] = []
    tasks: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # backend -> [(its task id, the job's row)]
    for j in jobs:
        row = reg.job(j.hash) or {}
        if row.get("status") not in ("queued", "running"):
            continue
        sid = str(row.get("scheduler_id") or "")
        if reg.update_job(j.hash, ("queued", "running"), status="cancelled", ended_at=now()):
            done.append((j, f"{row['status']}" + (f", {sid}" if sid else "") + f" on {row.get('host')}"))
        backend, _, task = sid.partition(":")
        tasks.setdefault(backend if task and backend in EXECUTORS else "", []).append((task, row))
    runners: set[int] = set()
    host = socket.gethostname()
    for backend, held in tasks.items():
        if backend and executor_class(backend).cancel_tasks(sorted(t for t, _ in held)):
            continue
        runners |= {int(row["pid"]) for _, row in held
                    if row.get("host") == host and row.get("pid") and row["pid"] != os.getpid()}
    for pid in sorted(runners):
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    return done


def _main(args: argparse.Namespace) -> int:
    from benchmarks.runner.run import only_jobs
    from benchmarks.runner.suitefile import load_suite
    from suite.registry import open_registry

    name, jobs = load_suite(args.suite)
    jobs = only_jobs(jobs, args.only, name)
    done = cancel_jobs(open_registry(args.registry), jobs)
    for job, was in done:
        print(f"[cancelled] {job.label()}  (was {was})")
    print(f"{name}: {len(done)} job(s) cancelled" + ("" if done else " (none was queued or running)"))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("cancel", help="stop a suite's queued and running jobs (SLURM, Ray or this machine's runner)")
    p.add_argument("suite", help="suite YAML file, or the name of a shipped suite (quick, cpu, paper)")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY)")
    p.add_argument("--only", default=None, metavar="REGEX", help="only the jobs whose command line matches")
    p.set_defaults(func=_main)
