"""``suite bench run <suite.yaml>``: run the jobs of a suite file (:mod:`benchmarks.runner.suitefile`) through the
front-ends' own CLIs, claimed in the registry's ``jobs`` table, resumable, in parallel up to ``--jobs`` or on a cluster
(``--executor``, :mod:`benchmarks.runner.executors`). This module is the command line; the plan (which jobs run, stage
after stage) is :class:`benchmarks.runner.plan.Runner`; see the suite file module for the whole contract."""
from __future__ import annotations

import argparse
import atexit
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from benchmarks.runner.executors import EXECUTORS, Executor, add_backend_options, executor_class
from benchmarks.runner.plan import Runner
from benchmarks.runner.progress import duration_text
from benchmarks.runner.suitefile import Job, check_commands, load_suite, missing_data
from suite.registry import Registry


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run a benchmark suite (grid of front-end jobs), skipping finished ones")
    p.add_argument("suite", help="suite YAML file, or the name of a shipped suite (quick, cpu, paper)")
    p.add_argument("--jobs", type=int, default=1, help="jobs run in parallel")
    p.add_argument("--threads", type=int, default=0,
                   help="threads per job (OMP/MKL/torch; default: cores // jobs, so jobs x threads <= cores)")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY)")
    p.add_argument("--launcher", choices=["local", "torchrun"], default="local")
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--rdzv-endpoint", default=None, help="host:port for multi-node torchrun")
    add_executor_options(p)
    p.add_argument("--dry-run", action="store_true", help="print the commands that would run and the time they would "
                                                           "take, from durations recorded in the registry")
    p.add_argument("--explain", action="store_true",
                   help="with --dry-run: per job, each setting as its run would resolve it beside the paper's value "
                        "and source (the suite's paper: blocks), every departure marked with its reading")
    p.add_argument("--only", default=None, metavar="REGEX",
                   help="run only the jobs whose command line matches this regular expression (a part of a grid)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run although tracked code differs from the commit (a try-out: runs are recorded as -dirty)")
    p.add_argument("--budget", type=float, default=0.0,
                   help="with --dry-run: exit 1 if the estimated wall time exceeds this many seconds (or a job's "
                        "duration is unknown)")
    p.set_defaults(func=_main)


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """``--executor`` and the options of every executor (``bench run`` and ``bench compare``)."""
    p.add_argument("--executor", choices=list(EXECUTORS), default="local",
                   help="where the jobs run: processes of this machine (local), SLURM job arrays through submitit "
                        "(slurm), Ray tasks (ray); a suite file's resources: say what a job asks a cluster for")
    add_backend_options(p)


def executor_of(args: argparse.Namespace, registry_url: str, check: bool = True) -> Executor:
    """The executor the options name (``check``: its package, scheduler and registry checked before any job is
    claimed; a dry run plans on a machine that need not be a login node)."""
    ex = executor_class(args.executor).from_args(args)
    if check:
        ex.check(registry_url)
    return ex


def only_jobs(jobs: list[Job], only: str | None, suite: str) -> list[Job]:
    """The jobs whose command line matches the regular expression ``only`` (``--only``; None: all of them); a bad
    expression, or one that matches no job, is a ``ValueError`` naming it."""
    if not only:
        return jobs
    try:
        pattern = re.compile(only)
    except re.error as exc:
        raise ValueError(f"--only {only!r} is not a regular expression ({exc})") from None
    out = [j for j in jobs if pattern.search(j.label())]
    if not out:
        raise ValueError(f"--only {only!r} matches no job of suite {suite}")
    return out


def require_committed_code(allow_dirty: bool) -> None:
    """Benchmark runs record the commit their code is, so it must name code that exists: a checkout whose tracked code
    differs from its commit is refused (results files and prose may differ), unless ``allow_dirty`` (a try-out; its
    runs are recorded with a ``-dirty`` code version) or ``$SUITE_ALLOW_DIRTY=1``."""
    from suite.registry.schema import code_version

    if allow_dirty or os.environ.get("SUITE_ALLOW_DIRTY") == "1":
        return
    version = code_version()
    if version.endswith("-dirty"):
        raise ValueError(f"uncommitted code changes (commit {version[:-6]} plus `git status`): benchmark runs must "
                         "come from committed code, so that their recorded code version names code that exists; commit "
                         "first, or pass --allow-dirty for a try-out (its runs are recorded as -dirty)")


def _main(args: argparse.Namespace) -> int:
    from suite.paths import registry_url

    name, jobs = load_suite(args.suite)
    whole = jobs
    jobs = only_jobs(jobs, args.only, name)
    if not args.dry_run:
        require_committed_code(args.allow_dirty)
    url = args.registry or registry_url()
    runner = Runner(url, jobs=args.jobs, launcher=args.launcher, nproc_per_node=args.nproc_per_node,
                    nnodes=args.nnodes, rdzv_endpoint=args.rdzv_endpoint, log_dir=Path("results/bench-logs") / name,
                    dry_run=args.dry_run, threads=args.threads, whole=whole)
    if args.jobs < 1 or args.threads < 0:
        raise ValueError(f"--jobs must be >= 1 and --threads >= 0, got --jobs {args.jobs} --threads {args.threads}")
    if args.executor != "local" and args.launcher != "local":
        raise ValueError("--launcher torchrun is for --executor local (a cluster job runs one process)")
    missing = missing_data(args.suite, jobs)
    if missing and not args.dry_run:  # one line naming each root, before anything is submitted
        raise ValueError(f"suite {name}: " + "; ".join(missing))
    runner.executor = executor_of(args, url, check=not args.dry_run)  # a dry run asks no scheduler
    check_commands(_unfinished(jobs, url), args.suite)
    for line in missing:
        print(f"note: {line}")
    if args.explain and not args.dry_run:
        raise ValueError("--explain goes with --dry-run (it prints the settings; nothing runs)")
    if args.dry_run:
        from benchmarks.runner.gpu_hours import estimate, job_hours

        for line in estimate(args.suite, jobs, Registry(url)):
            print(line)
        if args.explain:
            from benchmarks.runner.explain import explain, not_run

            hours = job_hours(args.suite, jobs, Registry(url))
            for line in explain(args.suite, {j.hash for j in jobs}, hours):
                print(line)
            for what, why in not_run(args.suite).items():
                print(f"not run: {what}: {why}")

    rc = execute(runner, name, jobs)
    if args.budget and runner.estimated is not None:
        _, wall, unknown = runner.estimated
        ok = wall <= args.budget and not unknown
        print(f"budget {duration_text(args.budget)}: {'fits' if ok else 'EXCEEDED or unknown'} (estimated wall "
              f"{duration_text(wall)}" + (f", {unknown} jobs without a recorded duration" if unknown else "") + ")")
        return rc or (0 if ok else 1)
    return rc


def _unfinished(jobs: list[Job], url: str) -> list[Job]:
    """The jobs the registry has not recorded finished (all of them when the registry file does not exist yet; it is
    not created here)."""
    if "://" not in url and not Path(url).expanduser().exists():
        return jobs
    reg = Registry(url)
    return [j for j in jobs if reg.job_status(j.hash) != "finished"]


def execute(runner: Runner, name: str, jobs: list[Job]) -> int:
    """Run the suite in this (main) thread; SIGTERM / SIGHUP / Ctrl-C stop it and its jobs, and any exit of
    the runner takes its jobs' process groups down (a SIGKILLed runner: see ``SUITE_RUNNER_PID`` in suite.cli)."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGHUP)}
    atexit.register(runner.kill_all)
    where = runner.executor.describe(runner.stage())
    print(f"suite {name}: {len(jobs)} jobs, {where}, registry {runner.registry_url}", flush=True)
    try:
        counts = runner.run(jobs)
    except KeyboardInterrupt:
        runner.stop()
        print("interrupted: finished jobs are kept; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if runner.failures:
        print(f"{len(runner.failures)} job(s) failed; their logs:")
        for label, log in runner.failures:
            print(f"  {label}\n    log: {log}")
    return 0 if all(k in ("finished", "skipped", "dry-run", "busy") for k in counts) else 1  # blocked, failed: 1

