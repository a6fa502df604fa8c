"""``suite bench cancel SUITE``: stop a grid's queued and running jobs, wherever they run. Each job the registry's jobs
table holds queued or running becomes ``cancelled`` there; SLURM's array tasks are cancelled with ``scancel``, and a
runner of this machine holding jobs (``--executor local`` or ``ray``) gets SIGTERM, which stops its jobs' processes
(their runs end ``interrupted`` and resume from their checkpoints when the grid is run again)."""
from __future__ import annotations

import argparse
from typing import Any


def _main(args: argparse.Namespace) -> int:
    from benchmarks.runner.executors import cancel_jobs
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
