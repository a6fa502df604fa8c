"""The benchmark runner's jobs table (claims, child processes, durations) and the reaping of dead runs and jobs."""
from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from suite.registry.schema import RegistryError, _now, jobs_t, runs_t

SUPERSEDED = "superseded: its benchmark job was re-run"  # the error of a run whose job was claimed again
IMPORTED = "(imported from a snapshot)"  # the command of a job row made by importing runs (no command recorded)


class JobsMixin:
    """The jobs of a :class:`suite.registry.Registry` (see benchmarks/runner/run.py)."""

    def job_status(self, job_hash: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(jobs_t.c.status).where(jobs_t.c.hash == job_hash)).scalar()

    def claim_job(self, job_hash: str, command: str, rerun: bool = False, *, status: str = "running",
                  queued_by: tuple[str, int] | None = None, scheduler_id: str | None = None,
                  requeues: int | None = None, log: str | None = None) -> bool:
        """Atomically claim a job for this process. False if it is finished (unless ``rerun``: a finished job run
        again), or running or queued: its runner or its job process (``child_pid``, which may outlive a killed runner)
        is alive, or it runs on another host.

        A cluster executor first claims with ``status="queued"`` on the submitting host; the job's own process on a node
        then takes that row with ``queued_by`` (the submitting host and pid, which it was handed), and a job the
        scheduler requeued takes its own row back by its ``scheduler_id``. ``scheduler_id``, ``requeues`` and ``log``
        are kept from the row unless given.

        Runs recorded by an earlier, unfinished attempt of the job are marked ``interrupted``, so a
        resumed job never leaves duplicate finished rows (a requeued run continues its row from its checkpoint).
        """
        try:
            return self._claim(job_hash, command, rerun, status, queued_by, scheduler_id, requeues, log)
        except RegistryError as exc:  # another process inserted the job's row between our read and our write
            if isinstance(exc.__cause__, sa.exc.IntegrityError):
                return False
            raise

    def _claim(self, job_hash: str, command: str, rerun: bool, status: str, queued_by: tuple[str, int] | None,
               scheduler_id: str | None, requeues: int | None, log: str | None) -> bool:
        host, pid = socket.gethostname(), os.getpid()
        keep: dict[str, Any] = {}
        with self._tx() as conn:
            # the row locked until this claim commits (PostgreSQL; SQLite's write transaction holds the whole file)
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.hash == job_hash).with_for_update()).first()
            if row is not None:
                ours = ((queued_by is not None and row.status == "queued" and (row.host, row.pid) == tuple(queued_by))
                        or (scheduler_id is not None and row.scheduler_id == scheduler_id
                            and row.status in ("running", "queued", "interrupted")))
                if row.status == "finished" and not rerun:
                    return False
                if row.status in ("running", "queued") and not ours and _job_alive(row, host):
                    return False
                if row.status in ("queued", "running", "interrupted") or ours:
                    keep = {k: getattr(row, k) for k in ("scheduler_id", "log", "requeues")}
            conn.execute(runs_t.update().where(runs_t.c.config_hash == job_hash).values(
                status="interrupted", error=SUPERSEDED))
            given = {k: v for k, v in (("scheduler_id", scheduler_id), ("log", log), ("requeues", requeues))
                     if v is not None}
            values = dict(status=status, command=command, host=host, pid=pid, started_at=_now(), ended_at=None,
                          child_pid=None, **{"scheduler_id": None, "log": None, "requeues": None, **keep, **given})
            if row is None:  # a process that inserts it first wins; this insert then fails (claim_job: False)
                conn.execute(jobs_t.insert().values(hash=job_hash, **values))
            else:  # the row is locked: updated in place (a delete and insert of the key deadlocked on PostgreSQL)
                conn.execute(jobs_t.update().where(jobs_t.c.hash == job_hash).values(**values))
        return True

    def update_job(self, job_hash: str, only_if: tuple[str, ...] = (), **values: Any) -> bool:
        """Set columns of a job row (``scheduler_id``, ``log``, ``status``...); with ``only_if``, only while its status
        is one of those (a job's end never overwrites a ``cancelled``). True if a row changed."""
        q = jobs_t.update().where(jobs_t.c.hash == job_hash)
        if only_if:
            q = q.where(jobs_t.c.status.in_(only_if))
        with self._tx() as conn:
            return bool(conn.execute(q.values(**values)).rowcount)

    def set_job_child(self, job_hash: str, child_pid: int) -> None:
        """Record the process that runs a claimed job (checked by later claims and by ``reap``)."""
        with self._tx() as conn:
            conn.execute(jobs_t.update().where(jobs_t.c.hash == job_hash).values(child_pid=child_pid))

    def job(self, job_hash: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.hash == job_hash)).first()
        return dict(row._mapping) if row else None

    def jobs_of(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        """{hash: row} of the job rows among ``hashes`` (one query per 500: a cluster runner polls its whole stage)."""
        out: dict[str, dict[str, Any]] = {}
        with self._read() as conn:
            for i in range(0, len(hashes), 500):
                for row in conn.execute(sa.select(jobs_t).where(jobs_t.c.hash.in_(hashes[i:i + 500]))):
                    out[row.hash] = dict(row._mapping)
        return out

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

    def finish_job(self, job_hash: str, status: str, only_if: tuple[str, ...] = ()) -> None:
        """The job's end (``only_if``: only while its status is one of those)."""
        self.update_job(job_hash, only_if, status=status, ended_at=_now())

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
