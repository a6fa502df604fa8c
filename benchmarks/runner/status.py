"""``suite bench status SUITE``: a grid seen from anywhere the registry is (issue 51, item 4), on one machine or spread
over a cluster (``--executor slurm|ray``, :mod:`benchmarks.runner.executors`, report into the same jobs table). For each
job of the suite: its state in the registry's jobs table (not started, queued, running, finished, failed, interrupted,
cancelled; ``requeued n`` when the scheduler requeued it), the run recorded under its hash, that run's last logged step
(its step curve, else its last epoch), where it runs (the scheduler's id and the host) and its log, so a grid started on
another machine can be followed by pointing ``--registry`` at its database."""
from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from benchmarks.runner.suitefile import Job, load_suite


def job_rows(reg: Any, jobs: list[Job]) -> list[list[str]]:
    """One row a job: label, state (queued, running, finished, failed, cancelled...; ``requeued n`` where the
    scheduler requeued it), its newest run (id, status), the run's last logged step and when it was logged, where it
    runs (the scheduler's id, the host) and its log."""
    rows = []
    for j in jobs:
        row = reg.job(j.hash) or {}
        state = row.get("status") or "not started"
        if row.get("requeues"):
            state += f", requeued {row['requeues']}"
        where = " on ".join(str(x) for x in (row.get("scheduler_id"), row.get("host")) if x) or "-"
        log = str(row.get("log") or "-")
        runs = reg.runs(config_hash=j.hash)
        if not runs:
            rows.append([j.label(), state, "-", "-", "-", "-", where, log])
            continue
        run = runs[-1]
        ms = reg.metrics(run["id"])
        steps = [m for m in ms if m["split"] == "train-step" and m["step"] is not None]
        epochs = [m for m in ms if m["split"] == "train" and m["step"] is not None]
        last = (f"step {max(m['step'] for m in steps)}" if steps else
                f"epoch {max(m['step'] for m in epochs)}" if epochs else "-")
        when = max((str(m["logged_at"] or "") for m in ms), default="")[:19] or "-"
        rows.append([j.label(), state, run["id"][:10], run["status"], last, when, where, log])
    return rows


def _main(args: argparse.Namespace) -> int:
    from suite.registry import markdown_table, open_registry

    from benchmarks.runner.run import only_jobs

    name, jobs = load_suite(args.suite)
    jobs = only_jobs(jobs, args.only, name)
    reg = open_registry(args.registry)
    rows = job_rows(reg, jobs)
    print(markdown_table(["job", "state", "run", "run status", "last logged", "at (UTC)", "where", "log"], rows))
    counts = Counter(r[1].split(",")[0] for r in rows)
    print(f"{name}: {len(rows)} jobs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="each job of a suite: its state in the registry and its run's last logged step")
    p.add_argument("suite", help="suite YAML file, or the name of a shipped suite (quick, cpu, paper)")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY), or a "
                                                    ".jsonl snapshot")
    p.add_argument("--only", default=None, metavar="REGEX", help="only the jobs whose command line matches")
    p.set_defaults(func=_main)
