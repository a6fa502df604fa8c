"""Where the runner's jobs run (``--executor``): one backend a module, named in :data:`EXECUTORS`.

* ``local`` (:mod:`~benchmarks.runner.executors.local`): processes of this machine, ``--jobs`` at a time;
* ``slurm`` (:mod:`~benchmarks.runner.executors.slurm`): SLURM job arrays through submitit;
* ``ray`` (:mod:`~benchmarks.runner.executors.ray`): Ray tasks.

The two clusters share the submitting side's claim-submit-follow loop (:mod:`~benchmarks.runner.executors.cluster`);
what runs on a node is :mod:`~benchmarks.runner.executors.node`. The plan (:class:`benchmarks.runner.plan.Runner`:
which jobs run, stage after stage, rebuilds, reruns, progress, ETA) hands an executor each stage's jobs and a
:class:`Stage`, the narrow context of what the plan answers; an executor never sees the plan itself, and nothing here
imports it. A new backend is one new module with an :class:`Executor` and one line in :data:`EXECUTORS`
(docs/design/executors.md)."""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from benchmarks.runner.suitefile import Job


@dataclass(frozen=True, kw_only=True)
class Stage:
    """What an executor is handed with a stage's jobs: the run's settings and the plan's answers, as callables."""
    registry_url: str
    log_dir: Path  # the jobs' logs: <log_dir>/<hash>.log
    grace: float  # seconds a job gets to stop after SIGTERM before it is killed
    command: Callable[[Job], list[str]]  # the job's command line
    env: Callable[[Job], dict[str, str]]  # the job's environment (thread budget, registry, job hash)
    finished: Callable[[Job, Any], bool]  # (job, registry): finished, so it is skipped
    rerun: Callable[[Job], bool]  # a finished job that runs again (its claim supersedes the old run)
    start: Callable[[Job], None]  # the job runs from now on (progress)
    end: Callable[[Job, float | None], None]  # the job ended (its seconds where it finished)
    progress: Callable[[], str]  # the ``[progress] ...`` line
    failed: Callable[[str, Path], None]  # (label, log) of a job that failed, for the summary
    stopping: Callable[[], bool]  # the run is stopping: start nothing more
    stop: Callable[[], None]  # stop the run (Ctrl-C inside an executor)
    jobs: int = 1  # jobs at a time (the local pool)
    threads: int = 0  # --threads (0: none asked; a cluster job then takes its resources' cpus)
    budget: int = 1  # threads per local job process
    dry_run: bool = False  # print what would run; run nothing
    claim: dict[str, Any] = field(default_factory=dict)  # a node's job process: how it takes its queued row

    def settle(self, job: Job, reg: Any, would: str) -> str | None:
        """What a job comes to before it is claimed, or None when it is to run: ``cancelled`` (the run is stopping),
        ``skipped`` (finished: counted done), ``dry-run`` (``would`` printed with its command)."""
        if self.stopping():
            return "cancelled"
        if self.finished(job, reg):
            if not self.dry_run:
                self.end(job, None)
            return "skipped"
        if self.dry_run:
            sys.stdout.write(f"{would} {' '.join(self.command(job))}\n")  # one write: two threads' lines never mix
            sys.stdout.flush()
            return "dry-run"
        return None


class Executor:
    """A backend: :meth:`run_stage` runs a stage's jobs to their ends; the rest have defaults. An instance serves one
    runner: built from the command line's options (:meth:`from_args`), checked (:meth:`check`) before any job is
    claimed, then handed each stage in turn."""
    name: ClassVar[str] = "?"  # its name in EXECUTORS

    @classmethod
    def options(cls, p: argparse.ArgumentParser) -> None:
        """Add this backend's own command-line options (``bench run``, ``bench compare``); none by default."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Executor:
        """The executor the parsed options ask for."""
        return cls()

    def check(self, registry_url: str) -> None:
        """Before anything is claimed: a ``ValueError`` (one line) where this backend cannot run the jobs here."""

    def run_stage(self, stage: Stage, jobs: list[Job], reg: Any) -> list[str]:
        """Run ``jobs`` (one stage's) and return one status each, in order: finished, failed (may be followed by
        `` (rc=..., log ...)``), skipped, busy, cancelled, interrupted or dry-run."""
        raise NotImplementedError

    def describe(self, stage: Stage) -> str:
        """Where the jobs run, for the runner's first line."""
        return f"on {self.name}"

    def stop(self) -> None:
        """Stop what runs (Ctrl-C / SIGTERM to the runner)."""

    def kill(self) -> None:
        """The runner is going away: take down what it started here and still runs."""

    @classmethod
    def cancel_tasks(cls, ids: list[str]) -> bool:
        """``suite bench cancel``: stop this backend's tasks, named by the ids its jobs' rows record as
        ``<name>:<id>`` (the part after the colon). False (the default): this backend's tasks are stopped through the
        runner that holds them, on its host (SIGTERM to its pid), as the local pool's and Ray's are."""
        return False


# name -> "module:Class" (imported when named) or the class itself
EXECUTORS: dict[str, str | type[Executor]] = {
    "local": "benchmarks.runner.executors.local:LocalExecutor",
    "slurm": "benchmarks.runner.executors.slurm:SlurmExecutor",
    "ray": "benchmarks.runner.executors.ray:RayExecutor",
}


def executor_class(name: str) -> type[Executor]:
    """The class :data:`EXECUTORS` names ``name``; an unknown name is a ``ValueError`` naming the known ones."""
    entry = EXECUTORS.get(name)
    if entry is None:
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {name!r}")
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry


def add_backend_options(p: argparse.ArgumentParser) -> None:
    """Every backend's own options (:meth:`Executor.options`), each class's once (a base two backends share adds its
    options once)."""
    added: set[type] = set()
    for name in EXECUTORS:
        for klass in reversed(executor_class(name).__mro__):
            if "options" in vars(klass) and klass not in added:
                added.add(klass)
                klass.options(p)  # type: ignore[attr-defined]
