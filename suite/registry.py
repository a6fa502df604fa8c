"""The common results registry of every front-end.

An SQL database through SQLAlchemy Core: embedded SQLite by default (``$SUITE_REGISTRY``, default
``./results/registry.sqlite``; WAL mode, ``BEGIN IMMEDIATE`` transactions, busy timeout) or any
SQLAlchemy URL (e.g. ``postgresql+psycopg://user@host/db``) for a shared database. Every write is
one transaction, so concurrent writers lose nothing.

A run records id, start/end time, status (running / finished / failed / interrupted), modality,
task, dataset, loss and its hyper-parameters, the whole config as JSON (and its hash), seed, code
version (git commit), package versions, host, wall time, and any number of metrics
(name, value, split, step).

    reg = Registry()
    with reg.run(modality="graph", task="tu", dataset="MUTAG", loss="macl",
                 loss_hparams={...}, config=cfg_dict, seed=0) as run:
        run.log("acc", 0.89, split="test", step=20)
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy import event

from suite.paths import registry_url

STATUSES = ("running", "finished", "failed", "interrupted")

_meta = sa.MetaData()
runs_t = sa.Table(
    "runs",
    _meta,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("started_at", sa.String(32), nullable=False),
    sa.Column("ended_at", sa.String(32)),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("modality", sa.String(32), nullable=False),
    sa.Column("task", sa.String(64), nullable=False),
    sa.Column("dataset", sa.String(128), nullable=False),
    sa.Column("loss", sa.String(64), nullable=False),
    sa.Column("loss_hparams", sa.Text, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("config_hash", sa.String(64), nullable=False, index=True),
    sa.Column("seed", sa.Integer),
    sa.Column("code_version", sa.String(64)),
    sa.Column("packages", sa.Text),
    sa.Column("host", sa.String(128)),
    sa.Column("wall_time", sa.Float),
    sa.Column("error", sa.Text),
    # added in round 2 (older databases get them through _migrate):
    sa.Column("pid", sa.Integer),  # process that is (or was) writing the run: lets `suite results reap` find dead runs
    sa.Column("run_options", sa.Text),  # JSON: where/how it ran (device, output folder, threads, ...), never hashed
    sa.Column("primary_metric", sa.String(128)),  # the evaluator's headline metric name ...
    sa.Column("primary_split", sa.String(32)),  # ... and its split (set by Run.set_primary)
)
_ADDED_RUN_COLUMNS = ("pid", "run_options", "primary_metric", "primary_split")
metrics_t = sa.Table(
    "metrics",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id"), nullable=False, index=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("split", sa.String(32)),
    sa.Column("step", sa.Integer),
    sa.Column("logged_at", sa.String(32)),
)
jobs_t = sa.Table(  # benchmark-runner jobs: one row per job hash (see benchmarks/run.py)
    "jobs",
    _meta,
    sa.Column("hash", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("command", sa.Text),
    sa.Column("host", sa.String(128)),
    sa.Column("pid", sa.Integer),
    sa.Column("started_at", sa.String(32)),
    sa.Column("ended_at", sa.String(32)),
    sa.Column("child_pid", sa.Integer),  # the job's own process (pid is the runner's); added in round 2
)
_ADDED_COLUMNS = {"runs": _ADDED_RUN_COLUMNS, "jobs": ("child_pid",)}


class RegistryError(ValueError):
    """The registry cannot be opened, read or written (corrupt, read-only, unreachable): the message names it."""


_JSON_COLUMNS = ("loss_hparams", "config", "packages", "run_options")


def check_run_row(rec: Any) -> list[str]:
    """What is wrong with one run of a snapshot (:meth:`Registry.export_jsonl`'s row), as short phrases; empty when
    it can be imported: every column of ``runs`` has its type (strings, integers, numbers; null only where the
    column allows it), the JSON columns hold JSON (``config`` and ``loss_hparams`` an object), the status is known,
    the times are ISO dates, and every metric is ``[name, value, split, step, logged_at]`` with a numeric value."""
    if not isinstance(rec, dict):
        return [f"a JSON object per line, got a JSON {type(rec).__name__}"]
    required = [c.name for c in runs_t.columns if not c.nullable or c.name == "id"]
    missing = sorted(k for k in required if k not in rec)
    bad: list[str] = [f"not a registry run (missing {missing})"] if missing else []
    for col in runs_t.columns:
        v = rec.get(col.name)
        if v is None:
            if col.name in required and col.name in rec:
                bad.append(f"{col.name} is null")
            continue
        if isinstance(col.type, sa.Integer):
            if isinstance(v, bool) or not isinstance(v, int):
                bad.append(f"{col.name} must be an integer or null, got {v!r}")
        elif isinstance(col.type, sa.Float):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                bad.append(f"{col.name} must be a finite number or null, got {v!r}")
        elif not isinstance(v, str) or (col.name == "id" and not v.strip()):
            bad.append(f"{col.name} must be a {'non-empty ' if col.name == 'id' else ''}string, got {v!r}")
        elif col.name in _JSON_COLUMNS and not (col.name == "run_options" and v in ("", "null")):
            try:
                parsed = json.loads(v)
            except json.JSONDecodeError as exc:
                bad.append(f"{col.name} is not JSON ({exc.msg}: {v[:40]!r})")
                continue
            if col.name in ("config", "loss_hparams") and not isinstance(parsed, dict):
                bad.append(f"{col.name} must be a JSON object, got {type(parsed).__name__}")
        elif col.name in ("started_at", "ended_at"):
            try:
                datetime.fromisoformat(v)
            except ValueError:
                bad.append(f"{col.name} is not an ISO date and time, got {v!r}")
    if isinstance(rec.get("status"), str) and rec["status"] not in STATUSES:
        bad.append(f"status {rec['status']!r} is not one of {STATUSES}")
    metrics = rec.get("metrics", [])
    if not isinstance(metrics, list):
        bad.append(f"metrics must be a list, got {type(metrics).__name__}")
        metrics = []
    for k, m in enumerate(metrics, 1):
        if not (isinstance(m, list) and len(m) == 5):
            bad.append(f"metric {k} must be [name, value, split, step, logged_at], got {m!r}")
            continue
        name, value, split, step, at = m
        if not isinstance(name, str) or not name:
            bad.append(f"metric {k}: name must be a non-empty string, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            bad.append(f"metric {k} ({name!r}): value must be a number, got {value!r}")
        if split is not None and not isinstance(split, str):
            bad.append(f"metric {k} ({name!r}): split must be a string or null, got {split!r}")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            bad.append(f"metric {k} ({name!r}): step must be an integer or null, got {step!r}")
        if at is not None and not isinstance(at, str):
            bad.append(f"metric {k} ({name!r}): logged_at must be a string or null, got {at!r}")
    return bad


def check_snapshot(path: str | Path, nothing: str = "nothing imported") -> list[tuple[int, str, dict[str, Any]]]:
    """Every run of the JSONL snapshot at ``path`` as ``(line number, line, row)``, each checked by
    :func:`check_run_row` and ids unique within the file. Any bad line: one ``ValueError`` listing every bad line of
    the file with its number (``nothing`` says what that means for the caller: nothing was written)."""
    from suite.safeio import read_text

    p = Path(path)
    text = read_text(p, what="registry snapshot")  # a binary or non-UTF-8 file: named with the line and byte
    rows: list[tuple[int, str, dict[str, Any]]] = []
    errors: list[str] = []
    first: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{p}, line {i}: not JSON ({exc.msg}, column {exc.colno})")
            continue
        bad = check_run_row(rec)
        rid = rec.get("id") if isinstance(rec, dict) else None
        if isinstance(rid, str) and rid:
            if rid in first:
                bad.append(f"id {rid!r} is also on line {first[rid]}")
            else:
                first[rid] = i
        if bad:
            errors.append(f"{p}, line {i}: " + "; ".join(bad) + (f" (run {rid})" if isinstance(rid, str) else ""))
        else:
            rows.append((i, line, rec))
    if errors:
        shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
        head = f"{len(errors)} bad lines ({nothing}): " if len(errors) > 1 else f"({nothing}) "
        raise ValueError(head + " | ".join(shown))
    return rows


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _jsonable(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        x = asdict(x)
    return json.loads(json.dumps(x, sort_keys=True, default=str))


def config_hash(config: Any) -> str:
    """Stable hash of a config (dataclass or dict) including the seed if it holds one."""
    blob = json.dumps(_jsonable(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def code_version() -> str:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            sha = out.stdout.strip()[:12]
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from suite import __version__

    return f"v{__version__}"


def package_versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("torch", "numpy", "scikit-learn", "torch-geometric", "rdkit", "ogb", "transformers",
                 "sentence-transformers", "kornia", "contrastive-suite"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _make_engine(url: str) -> sa.Engine:
    if "://" not in url:  # a plain path -> SQLite file
        path = Path(url).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 60, "isolation_level": None}, poolclass=sa.pool.NullPool)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock up front: no upgrade deadlocks

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


class Registry:
    """Handle on a results database (created on first use)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or registry_url()
        self.source = self.url  # where the runs come from (a .jsonl snapshot for open_registry's copies)
        try:
            self.engine = _make_engine(self.url)
            for attempt in range(5):
                try:
                    _meta.create_all(self.engine)
                    break
                except sa.exc.OperationalError as exc:  # two processes creating at once
                    if attempt == 4 or not _transient(exc):
                        raise
                    time.sleep(0.2 * (attempt + 1))
            self._migrate()
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise RegistryError(f"cannot open the registry {self.url}: {_reason(exc)}") from exc

    @contextmanager
    def _tx(self) -> Iterator[sa.Connection]:
        """One write transaction; a database error becomes a one-line RegistryError naming the registry."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise RegistryError(f"registry {self.url}: {_reason(exc)}") from exc

    @contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise RegistryError(f"registry {self.url}: {_reason(exc)}") from exc

    def _migrate(self) -> None:
        """Add the columns of newer versions to a database made by an older one (ALTER TABLE ADD COLUMN)."""
        insp = sa.inspect(self.engine)
        for table, added in _ADDED_COLUMNS.items():
            have = {c["name"] for c in insp.get_columns(table)}
            missing = [c for c in added if c not in have]
            if not missing:
                continue
            with self.engine.begin() as conn:
                for name in missing:
                    col = _meta.tables[table].c[name]
                    try:
                        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {col.type.compile(self.engine.dialect)}")
                    except sa.exc.OperationalError as exc:  # another process added it first
                        if "duplicate column" not in str(exc).lower():
                            raise

    # ------------------------------------------------------------------ writes
    def start_run(
        self,
        *,
        modality: str,
        task: str,
        dataset: str,
        loss: str,
        loss_hparams: dict[str, Any] | None = None,
        config: Any = None,
        seed: int | None = None,
        cfg_hash: str | None = None,
        run_options: Any = None,
    ) -> str:
        """Insert a ``running`` row. ``config`` is the experiment (hashed: it identifies the setting);
        ``run_options`` (device, output folder, threads, ...) are recorded but never hashed."""
        cfg = _jsonable(config if config is not None else {})
        run_id = uuid.uuid4().hex
        row = dict(
            id=run_id, started_at=_now(), status="running", modality=modality, task=task, dataset=dataset,
            loss=loss, loss_hparams=json.dumps(_jsonable(loss_hparams or {}), sort_keys=True),
            config=json.dumps(cfg, sort_keys=True),
            # a benchmark runner sets SUITE_CONFIG_HASH to its job hash so that finished jobs are skipped
            config_hash=cfg_hash or os.environ.get("SUITE_CONFIG_HASH") or config_hash(cfg), seed=seed,
            code_version=code_version(), packages=json.dumps(package_versions(), sort_keys=True),
            host=socket.gethostname(), pid=os.getpid(),
            run_options=json.dumps(_jsonable(run_options), sort_keys=True) if run_options is not None else None,
        )
        with self._tx() as conn:
            conn.execute(runs_t.insert().values(**row))
        return run_id

    def reopen_run(self, run_id: str) -> None:
        """Continue an existing run (a resumed training run keeps its own row): status back to
        ``running``, this process's pid and host, end time and error cleared."""
        with self._tx() as conn:
            n = conn.execute(runs_t.update().where(runs_t.c.id == run_id).values(
                status="running", ended_at=None, error=None, wall_time=None, pid=os.getpid(),
                host=socket.gethostname())).rowcount
        if n != 1:
            raise KeyError(f"no run with id {run_id!r} to resume")

    def set_primary(self, run_id: str, metric: str, split: str | None) -> None:
        """Record the run's headline metric (the evaluator's ``primary_metric``) and its split."""
        with self._tx() as conn:
            conn.execute(runs_t.update().where(runs_t.c.id == run_id).values(primary_metric=metric, primary_split=split))

    def log_metric(self, run_id: str, name: str, value: float, split: str | None = None, step: int | None = None) -> None:
        self.log_metrics(run_id, {name: value}, split=split, step=step)

    def log_metrics(self, run_id: str, values: dict[str, float], split: str | None = None, step: int | None = None) -> None:
        rows = []
        for k, v in values.items():
            v = float(v)
            if math.isnan(v):
                raise ValueError(f"metric {k!r} is NaN")
            rows.append(dict(run_id=run_id, name=k, value=v, split=split, step=step, logged_at=_now()))
        if rows:
            with self._tx() as conn:
                conn.execute(metrics_t.insert(), rows)

    def finish(self, run_id: str, status: str = "finished", error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        with self._tx() as conn:
            start = conn.execute(sa.select(runs_t.c.started_at).where(runs_t.c.id == run_id)).scalar_one()
            wall = (datetime.now(timezone.utc) - datetime.fromisoformat(start)).total_seconds()
            conn.execute(runs_t.update().where(runs_t.c.id == run_id).values(
                status=status, ended_at=_now(), wall_time=wall, error=error))

    @contextmanager
    def run(self, resume_id: str | None = None, **kwargs: Any) -> Iterator["Run"]:
        """Context manager: ``finished`` on success, ``interrupted`` on Ctrl-C / SIGTERM, ``failed`` otherwise.

        ``resume_id`` continues that run's row (a resumed training run: one row per run, its metrics
        not split) instead of inserting a new one; the keyword arguments are then ignored."""
        # SIGTERM is held back while the row is written and the handler installed: a SIGTERM that arrives
        # just after the row says ``running`` is delivered inside the try below and marks it interrupted
        # (before, it killed the process in that gap and left the row ``running`` until a reap).
        release = _hold_sigterm()
        try:
            if resume_id is not None:
                self.reopen_run(resume_id)
                run = Run(self, resume_id)
            else:
                run = Run(self, self.start_run(**kwargs))
            restore = _sigterm_as_interrupt()
        except BaseException:
            release()
            raise
        try:
            release()
            yield run
        except KeyboardInterrupt:
            self.finish(run.id, "interrupted", error="KeyboardInterrupt/SIGTERM")
            raise
        except BaseException as exc:
            self.finish(run.id, "failed", error=f"{type(exc).__name__}: {exc}"[:2000])
            raise
        else:
            self.finish(run.id, "finished")
        finally:
            restore()

    # ------------------------------------------------------------------ reads
    def runs(self, **filters: Any) -> list[dict[str, Any]]:
        q = sa.select(runs_t)
        for k, v in filters.items():
            if v is None:
                continue
            col = runs_t.c[k]
            q = q.where(col.in_(v) if isinstance(v, (list, tuple, set)) else col == v)
        with self._read() as conn:
            return [dict(r._mapping) for r in conn.execute(q.order_by(runs_t.c.started_at))]

    def get(self, run_id: str) -> dict[str, Any]:
        with self._read() as conn:
            row = conn.execute(sa.select(runs_t).where(runs_t.c.id.startswith(run_id))).fetchall()
        if not row:
            raise KeyError(f"no run with id {run_id!r}")
        if len(row) > 1:
            raise KeyError(f"run id prefix {run_id!r} is ambiguous ({len(row)} runs)")
        out = dict(row[0]._mapping)
        out["metrics"] = self.metrics(out["id"])
        return out

    def metrics(self, run_id: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        q = sa.select(metrics_t)
        if run_id is not None:
            q = q.where(metrics_t.c.run_id == run_id)
        if name is not None:
            q = q.where(metrics_t.c.name == name)
        with self._read() as conn:
            return [dict(r._mapping) for r in conn.execute(q.order_by(metrics_t.c.id))]

    def find_finished(self, cfg_hash: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(sa.select(runs_t).where(runs_t.c.config_hash == cfg_hash, runs_t.c.status == "finished")
                               .order_by(runs_t.c.started_at.desc())).first()
        return dict(row._mapping) if row else None

    def final_metrics(self, run_id: str) -> dict[tuple[str, str | None], float]:
        """Last logged value of each (name, split) of a run (highest step, then latest)."""
        out: dict[tuple[str, str | None], tuple[int, int, float]] = {}
        for m in self.metrics(run_id):
            key = (m["name"], m["split"])
            rank = (m["step"] if m["step"] is not None else -1, m["id"])
            if key not in out or rank >= out[key][:2]:
                out[key] = (*rank, m["value"])
        return {k: v[2] for k, v in out.items()}

    def compare(self, metric: str, split: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Mean ± std over seeds of a metric's final value, grouped by (modality, task, dataset, loss)."""
        groups: dict[tuple[str, str, str, str], list[tuple[int | None, float]]] = {}
        for r in self.runs(status="finished", **filters):
            fm = self.final_metrics(r["id"])
            vals = [v for (n, s), v in fm.items() if n == metric and (split is None or s == split)]
            if vals:
                groups.setdefault((r["modality"], r["task"], r["dataset"], r["loss"]), []).append((r["seed"], vals[-1]))
        rows = []
        for (mod, task, ds, loss), vs in sorted(groups.items()):
            values = [v for _, v in vs]
            rows.append(dict(modality=mod, task=task, dataset=ds, loss=loss, metric=metric, n=len(values),
                             mean=statistics.fmean(values), std=statistics.stdev(values) if len(values) > 1 else 0.0,
                             seeds=sorted(s for s, _ in vs if s is not None)))
        return rows

    # ------------------------------------------------------------------ benchmark jobs
    def job_status(self, job_hash: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(jobs_t.c.status).where(jobs_t.c.hash == job_hash)).scalar()

    def claim_job(self, job_hash: str, command: str) -> bool:
        """Atomically claim a job for this process. False if it is finished, or running: its runner or its
        job process (``child_pid``, which may outlive a killed runner) is alive, or it runs on another host.

        Runs recorded by an earlier, unfinished attempt of the job are marked ``interrupted``, so a
        resumed job never leaves duplicate finished rows.
        """
        host, pid = socket.gethostname(), os.getpid()
        with self._tx() as conn:
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.hash == job_hash)).first()
            if row is not None:
                if row.status == "finished":
                    return False
                if row.status == "running" and _job_alive(row, host):
                    return False
                conn.execute(jobs_t.delete().where(jobs_t.c.hash == job_hash))
            conn.execute(runs_t.update().where(runs_t.c.config_hash == job_hash).values(
                status="interrupted", error="superseded: its benchmark job was re-run"))
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
        front-end and its command, e.g. ``graph tu``): what the runner's ETA is estimated from."""
        out: dict[str, list[float]] = {}
        with self._read() as conn:
            rows = conn.execute(sa.select(jobs_t.c.command, jobs_t.c.started_at, jobs_t.c.ended_at).where(
                jobs_t.c.status == "finished", jobs_t.c.ended_at.is_not(None), jobs_t.c.started_at.is_not(None))).fetchall()
        for command, start, end in rows:
            try:
                secs = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
            except (TypeError, ValueError):
                continue
            out.setdefault(" ".join((command or "").split()[:2]), []).append(secs)
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

    def export(self, fmt: str, **filters: Any) -> str:
        """All runs (with their final metrics) as ``csv``, ``json`` or ``md``; ``jsonl``: one JSON object per
        run with every column and every logged metric (a text snapshot that :meth:`import_jsonl` reads back)."""
        if fmt == "jsonl":
            return self.export_jsonl(**filters)
        runs = self.runs(**filters)
        for r in runs:
            r["metrics"] = {f"{n}[{s}]" if s else n: v for (n, s), v in self.final_metrics(r["id"]).items()}
        if fmt == "json":
            return json.dumps(runs, indent=2, default=str)
        cols = ["id", "status", "modality", "task", "dataset", "loss", "seed", "wall_time"]
        mcols = sorted({k for r in runs for k in r["metrics"]})
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.writer(buf)
            w.writerow(cols + mcols)
            for r in runs:
                w.writerow([r[c] for c in cols] + [r["metrics"].get(m, "") for m in mcols])
            return buf.getvalue()
        if fmt == "md":
            return markdown_table(cols + mcols, [[r[c] for c in cols] + [r["metrics"].get(m, "") for m in mcols] for r in runs])
        raise ValueError(f"export format must be csv, json, jsonl or md, got {fmt!r}")

    def export_jsonl(self, **filters: Any) -> str:
        """One line per run, oldest first: the run's columns and ``metrics``, every logged value as
        ``[name, value, split, step, logged_at]`` in logging order. Sorted keys: a stable, diffable text."""
        lines = []
        for r in self.runs(**filters):
            r["metrics"] = [[m["name"], m["value"], m["split"], m["step"], m["logged_at"]] for m in self.metrics(r["id"])]
            lines.append(json.dumps(r, sort_keys=True, default=str, ensure_ascii=False))
        return "".join(line + "\n" for line in lines)

    def import_jsonl(self, path: str | Path, checked: list[tuple[int, str, dict[str, Any]]] | None = None) -> dict[str, int]:
        """Add the runs of a JSONL snapshot (:meth:`export_jsonl`) with their metrics; a run whose id is already
        here is skipped, so importing twice changes nothing (two processes importing at once add each run once).
        Every row is checked first (:func:`check_snapshot`): any bad line is a ValueError listing every bad line with
        the file name and line number, and nothing of the file is imported. ``checked``: what :func:`check_snapshot`
        returned for ``path`` when the caller checked it before opening the registry (`suite results import` does,
        so a refused file leaves no new empty database behind). Returns ``{"added": n, "skipped": m}``."""
        cols = {c.name for c in runs_t.columns}
        rows = []
        for _, _, rec in (check_snapshot(path) if checked is None else checked):
            metrics = [dict(run_id=rec["id"], name=n, value=float(v), split=sp, step=st, logged_at=at)
                       for n, v, sp, st, at in rec.get("metrics", [])]
            rows.append(({k: v for k, v in rec.items() if k in cols}, metrics))
        with self._tx() as conn:  # the ids present are read inside the write lock: two importers never both add a run
            ids = [r["id"] for r, _ in rows]
            have: set[str] = set()
            for i in range(0, len(ids), 500):  # bounded IN lists (SQLite's variable limit)
                have |= {r.id for r in conn.execute(sa.select(runs_t.c.id).where(runs_t.c.id.in_(ids[i:i + 500])))}
            new = [(r, m) for r, m in rows if r["id"] not in have]
            if new:
                conn.execute(runs_t.insert(), [r for r, _ in new])
                ms = [x for _, m in new for x in m]
                if ms:
                    conn.execute(metrics_t.insert(), ms)
                self._finish_imported_jobs(conn, {r.get("config_hash") for r, _ in new} - {None})
        return {"added": len(new), "skipped": len(rows) - len(new)}

    def _finish_imported_jobs(self, conn: Any, hashes: set[str]) -> None:
        """A snapshot carries runs, not the runner's jobs table: record a finished job for every imported hash
        whose runs all finished (and that has no job row), so a sweep resumed on an imported snapshot skips
        those jobs instead of running them again and superseding the imported runs."""
        known: set[str] = set()
        status: dict[str, set[str]] = {}
        ordered = sorted(hashes)
        for i in range(0, len(ordered), 500):  # bounded IN lists (SQLite's variable limit)
            part = ordered[i:i + 500]
            known |= {r.hash for r in conn.execute(sa.select(jobs_t.c.hash).where(jobs_t.c.hash.in_(part)))}
            for r in conn.execute(sa.select(runs_t.c.config_hash, runs_t.c.status).where(runs_t.c.config_hash.in_(part))):
                status.setdefault(r.config_hash, set()).add(r.status)
        done = sorted(h for h, st in status.items() if st == {"finished"} and h not in known)
        if done:
            now = _now()
            conn.execute(jobs_t.insert(), [dict(hash=h, status="finished", command="(imported from a snapshot)",
                                                host="", pid=None, started_at=now, ended_at=now) for h in done])


class Run:
    """A started run: ``log`` metrics, read its ``id``."""

    def __init__(self, registry: Registry, run_id: str) -> None:
        self.registry = registry
        self.id = run_id

    def log(self, name: str, value: float, split: str | None = None, step: int | None = None) -> None:
        self.registry.log_metric(self.id, name, value, split=split, step=step)

    def log_many(self, values: dict[str, float], split: str | None = None, step: int | None = None) -> None:
        self.registry.log_metrics(self.id, values, split=split, step=step)

    def set_primary(self, metric: str, split: str | None) -> None:
        """Name the run's headline metric (an evaluator's ``primary_metric``) for tables and the report."""
        self.registry.set_primary(self.id, metric, split)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _hold_sigterm() -> Any:
    """Block SIGTERM (main thread, where Python runs its handlers); returns the function that unblocks it, which
    delivers a SIGTERM that arrived meanwhile."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return lambda: None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    return lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _sigterm_as_interrupt() -> Any:
    """Turn SIGTERM into KeyboardInterrupt while a run is open (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, old)


def _transient(exc: Exception) -> bool:
    return "locked" in str(exc).lower() or "already exists" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    """The driver's one-line reason (``file is not a database``, ``attempt to write a readonly database``, ...)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


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


def open_registry(spec: str | None = None) -> Registry:
    """A registry from a path or SQLAlchemy URL (default ``$SUITE_REGISTRY``), or from a JSONL snapshot
    (``suite results export --format jsonl``) imported into a temporary SQLite file removed at exit."""
    if spec and str(spec).endswith(".jsonl"):
        import atexit
        import shutil
        import tempfile

        src = Path(spec)
        if not src.is_file():
            raise ValueError(f"registry snapshot not found: {src}")
        tmp = Path(tempfile.mkdtemp(prefix="suite-registry-"))
        atexit.register(shutil.rmtree, tmp, True)
        reg = Registry(str(tmp / "registry.sqlite"))
        reg.import_jsonl(src)
        reg.source = str(src)  # what reports name (the temporary database is gone after the process)
        return reg
    return Registry(spec)


def default_registry() -> Registry:
    return Registry(os.environ.get("SUITE_REGISTRY"))
