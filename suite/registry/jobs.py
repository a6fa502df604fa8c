"""The benchmark runner's jobs table (claims, child processes, durations) and the reaping of dead runs and jobs."""
from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from suite.registry.schema import _now, jobs_t, runs_t

SUPERSEDED = "superseded: its benchmark job was re-run"  # the error of a run whose job was claimed again
IMPORTED = "(imported from a snapshot)"  # the command of a job row made by importing runs (no command recorded)


class JobsMixin:
    """The jobs of a :class:`suite.registry.Registry` (see benchmarks/runner/run.py)."""

    def job_status(self, job_hash: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(jobs_t.c.status).where(jobs_t.c.hash == job_hash)).scalar()

    def claim_job(self, job_hash: str, command: str, rerun: bool = False) -> bool:
        """Atomically claim a job for this process. False if it is finished (unless ``rerun``: a finished job run
        again), or running: its runner or its job process (``child_pid``, which may outlive a killed runner) is
        alive, or it runs on another host.

        Runs recorded by an earlier, unfinished attempt of the job are marked ``interrupted``, so a
        resumed job never leaves duplicate finished rows.
        """
        host, pid = socket.gethostname(), os.getpid()
        with self._tx() as conn:
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.hash == job_hash)).first()
            if row is not None:
                if row.status == "finished" and not rerun:
                    return False
                if row.status == "running" and _job_alive(row, host):
                    return False
                conn.execute(jobs_t.delete().where(jobs_t.c.hash == job_hash))
            conn.execute(runs_t.update().where(runs_t.c.config_hash == job_hash).values(
                status="interrupted", error=SUPERSEDED))
            conn.execute(jobs_t.insert().values(hash=job_hash, status="running", command=command, host=host,
                                                pid=pid, started_at=_now()))
        return True

    def set_job_child(self, job_hash: str, child_pid: int) -> None:
        """Record the process that runs a claimed job (checked by later claims and by ``reap``)."""
        with self._tx() as conn:
            conn.execute(jobs_t.update().where(jobs_t.c.hash == job_hash).values(child_pid=child_pid))

    def job(self, job_hash: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.hash == job_hash)).first()
        return dict(row._mapping) if row else None

    def job_durations(self) -> dict[str, list[float]]:
        """Seconds taken by the finished benchmark jobs, by the first two words of their command line (the
        front-end and its command, e.g. ``graph tu``): what the runner's ETA is estimated from. Imported job rows
        record no command: :meth:`imported_job_seconds` gives theirs by hash."""
        out: dict[str, list[float]] = {}
        with self._read() as conn:
            rows = conn.execute(sa.select(jobs_t.c.command, jobs_t.c.started_at, jobs_t.c.ended_at).where(
                jobs_t.c.status == "finished", jobs_t.c.ended_at.is_not(None), jobs_t.c.started_at.is_not(None),
                jobs_t.c.command != IMPORTED)).fetchall()
        for command, start, end in rows:
            if (secs := _seconds(start, end)) is not None:
                out.setdefault(" ".join((command or "").split()[:2]), []).append(secs)
        return out

    def imported_job_seconds(self, hashes: list[str]) -> dict[str, float]:
        """{hash: seconds} of the finished job rows among ``hashes`` that an import made (from the first start to
        the last end of the job's runs; rows imported before that was recorded span 0 s and are left out)."""
        out: dict[str, float] = {}
        with self._read() as conn:
            for i in range(0, len(hashes), 500):  # bounded IN lists (SQLite's variable limit)
                for h, start, end in conn.execute(sa.select(jobs_t.c.hash, jobs_t.c.started_at, jobs_t.c.ended_at).where(
                        jobs_t.c.hash.in_(hashes[i:i + 500]), jobs_t.c.status == "finished",
                        jobs_t.c.command == IMPORTED)):
                    if (secs := _seconds(start, end)):
                        out[h] = secs
        return out

    def finish_job(self, job_hash: str, status: str) -> None:
        with self._tx() as conn:
            conn.execute(jobs_t.update().where(jobs_t.c.hash == job_hash).values(status=status, ended_at=_now()))

    def reap(self) -> dict[str, int]:
        """Mark ``running`` runs whose process is gone on this host as ``interrupted`` (a SIGKILLed run, a
        machine that went down), and likewise benchmark jobs whose runner and job process are both gone.
        Runs of other hosts, and runs of databases too old to record a pid, are left alone.
        Returns ``{"runs": n, "jobs": m}``."""
        host = socket.gethostname()
        with self._read() as conn:  # read first: a read-only registry can still be listed
            dead = [r.id for r in conn.execute(sa.select(runs_t.c.id, runs_t.c.pid).where(
                runs_t.c.status == "running", runs_t.c.host == host, runs_t.c.pid.is_not(None)))
                if not _pid_alive(r.pid)]
            jobs = [r.hash for r in conn.execute(sa.select(jobs_t).where(jobs_t.c.status == "running"))
                    if r.host == host and not _job_alive(r, host)]
        if getattr(self, "read_only", None) is not None:  # a registry that cannot be written is listed as it is
            return {"runs": 0, "jobs": 0}
        if dead or jobs:
            now = _now()
            with self._tx() as conn:
                for run_id in dead:
                    conn.execute(runs_t.update().where(runs_t.c.id == run_id, runs_t.c.status == "running").values(
                        status="interrupted", ended_at=now, error="reaped: its process is gone"))
                for h in jobs:
                    conn.execute(jobs_t.update().where(jobs_t.c.hash == h, jobs_t.c.status == "running").values(
                        status="interrupted", ended_at=now))
        return {"runs": len(dead), "jobs": len(jobs)}


def _job_alive(row: Any, host: str) -> bool:
    """A running job row is alive when it runs on another host (cannot be checked from here) or its runner
    or its job process still exists."""
    return row.host != host or _pid_alive(row.pid) or _pid_alive(getattr(row, "child_pid", None))


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an exited child nobody has waited for yet (a zombie) is gone too
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
