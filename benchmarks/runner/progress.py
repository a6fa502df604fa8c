"""What the runner says of a suite while it runs: the jobs pending, running and done, and the ETA from the durations
of finished jobs of the same front-end and command (``[progress] 3/12 done, 2 running (...); ETA 4.2 min``). The plan
(:class:`benchmarks.runner.plan.Runner`) holds one; a job's own process on a cluster node holds its own
(:mod:`benchmarks.runner.executors.node`)."""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from benchmarks.runner.suitefile import Job


def job_kind(job: Job) -> str:
    """What a job's duration is estimated from: its front-end and command (``graph tu``)."""
    return f"{job.frontend} {job.command}"


def duration_text(secs: float) -> str:
    return f"{secs:.0f} s" if secs < 90 else (f"{secs / 60:.1f} min" if secs < 5400 else f"{secs / 3600:.1f} h")


@dataclass
class Progress:
    """The jobs of a run by state, and the durations of finished jobs by kind (:func:`job_kind`); thread-safe."""
    jobs: int = 1  # jobs run in parallel: the ETA divides by it
    _pending: dict[str, Job] = field(default_factory=dict)  # not started yet
    _running: dict[str, tuple[Job, float]] = field(default_factory=dict)  # hash -> (job, start time)
    _durations: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds of finished jobs
    _done: int = 0
    _total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, jobs: list[Job], durations: dict[str, list[float]] | None = None) -> None:
        """A run of ``jobs`` starts: all pending; ``durations`` (seconds by kind, from the registry) join the known
        ones."""
        with self._lock:
            self._pending = {j.hash: j for j in jobs}
            self._running, self._done, self._total = {}, 0, len(jobs)
            for k, v in (durations or {}).items():
                self._durations.setdefault(k, []).extend(v)

    def start(self, job: Job) -> None:
        """The job runs from now on."""
        with self._lock:
            self._pending.pop(job.hash, None)
            self._running[job.hash] = (job, time.monotonic())

    def end(self, job: Job, took: float | None) -> None:
        """The job has ended (``took``: its seconds where it finished, None otherwise)."""
        with self._lock:  # once per job: a job found finished up front is not counted again when its turn comes
            if self._pending.pop(job.hash, None) is not None or self._running.pop(job.hash, None) is not None:
                self._done += 1
            if took is not None:
                self._durations.setdefault(job_kind(job), []).append(took)

    def again(self, job: Job) -> None:
        """A job counted done runs again (its input changed): it goes back to the pending ones."""
        with self._lock:
            if job.hash not in self._pending and job.hash not in self._running and self._total:
                self._pending[job.hash] = job
                self._done -= 1

    def eta(self) -> tuple[float, int]:
        """(seconds left, jobs with no recorded duration of their kind): the median duration of the finished
        jobs of the same front-end and command (registry, and this run's) for each pending job, what is left of
        it for each running one, divided by the jobs run in parallel."""
        now = time.monotonic()
        with self._lock:
            med = {k: statistics.median(v) for k, v in self._durations.items() if v}
            left = [(med.get(job_kind(j)), 0.0) for j in self._pending.values()]
            left += [(med.get(job_kind(j)), now - t0) for j, t0 in self._running.values()]
        known = sum(max(0.0, e - ran) for e, ran in left if e is not None)
        return known / max(1, self.jobs), sum(e is None for e, _ in left)

    def text(self) -> str:
        """``[progress] 3/12 done, 2 running (...); ETA 4.2 min``."""
        now = time.monotonic()
        with self._lock:
            running = [f"{' '.join(j.argv())[:70]} ({now - t0:.0f} s)" for j, t0 in self._running.values()]
            done, total = self._done, self._total
        secs, unknown = self.eta()
        if unknown and secs == 0:
            eta = f"ETA unknown ({unknown} jobs of commands with no recorded duration yet)"
        else:
            eta = f"ETA {duration_text(secs)}" + (f" + {unknown} jobs with no recorded duration" if unknown else "")
        return f"[progress] {done}/{total} done, {len(running)} running" + (
            f" ({'; '.join(running)})" if running else "") + f"; {eta}"
