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

import json
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy import event

from suite.registry.schema import (_ADDED_COLUMNS, STATUSES, RegistryError, _jsonable, _meta, _now, _reason, _transient,
                                   code_version, config_hash, metrics_t, package_versions, runs_t)

from suite.paths import registry_url
from suite.registry.jobs import JobsMixin
from suite.registry.queries import QueryMixin

from suite.registry.snapshot import SnapshotMixin


def _writable(folder: Path) -> bool:
    """Whether this process may create files in ``folder`` (SQLite's WAL needs its -wal and -shm files there)."""
    return os.access(folder, os.W_OK | os.X_OK)


def _make_engine(url: str) -> tuple[sa.Engine, Path | None]:
    """The engine, and the folder of a SQLite file that is opened read-only because that folder is not writable
    (else None): reading such a registry works (``suite results list``), writing is refused by name."""
    read_only: Path | None = None
    if "://" not in url:  # a plain path -> SQLite file
        path = Path(url).expanduser()
        parent = path.parent
        if parent.is_dir() and not _writable(parent):
            if not path.is_file():
                raise RegistryError(f"cannot create the registry {path}: the folder {parent} is read-only")
            read_only = parent
            url = f"sqlite:///file:{path}?immutable=1&uri=true"  # no -wal/-shm files, no locks: a read-only view
        else:
            parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{path}"
    if url.startswith("sqlite"):
        wait = lock_timeout()
        engine = sa.create_engine(url, connect_args={"timeout": wait, "isolation_level": None}, poolclass=sa.pool.NullPool)
        if read_only is not None:
            return engine, read_only

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={int(wait * 1000)}")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock up front: no upgrade deadlocks

        return engine, None
    return sa.create_engine(url, pool_pre_ping=True), None


def lock_timeout() -> float:
    """Seconds a SQLite registry waits for another process's write to end, and a database server's registry for its
    server to answer again (a restart, a failover) (``$SUITE_REGISTRY_TIMEOUT``, default 60)."""
    raw = os.environ.get("SUITE_REGISTRY_TIMEOUT", "60")
    try:
        wait = float(raw)
    except ValueError:
        wait = math.nan
    if not (math.isfinite(wait) and wait >= 0):
        raise ValueError(f"SUITE_REGISTRY_TIMEOUT must be a number of seconds >= 0, got {raw!r}")
    return wait


def _why(exc: BaseException) -> str:
    """The driver's reason, and for a lock what it means: another process holds the registry."""
    reason = _reason(exc)
    if "database is locked" in reason or "database table is locked" in reason:
        return (f"locked by another process, which held it for more than {lock_timeout():g} s "
                f"(SUITE_REGISTRY_TIMEOUT) ({reason}); nothing was written, what was recorded before is kept")
    return reason


# a database server that does not answer for now (stopped, restarting, a failover), as its driver says it: waited for
_UNREACHABLE = ("connection refused", "could not connect", "server closed the connection", "terminating connection",
                "the database system is shutting down", "the database system is starting up", "connection reset",
                "no route to host", "timeout expired", "connection timed out", "is in recovery mode",
                "lost connection", "can't connect", "server has gone away")


def _unreachable(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return bool(getattr(exc, "connection_invalidated", False)) or any(s in text for s in _UNREACHABLE)


def display_url(url: str) -> str:
    """``url`` as messages show it: a database URL's password masked (``postgresql://me:***@host/db``)."""
    if "://" not in url:
        return url
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError, TypeError):
        return url


_DRIVERS = {"MySQLdb": "mysqlclient", "pymysql": "pymysql", "psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]",
            "asyncpg": "asyncpg", "cx_Oracle": "cx_Oracle", "oracledb": "oracledb", "pyodbc": "pyodbc"}


class Registry(QueryMixin, JobsMixin, SnapshotMixin):
    """Handle on a results database (created on first use)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or registry_url()
        self.shown = display_url(self.url)  # as messages show it (a password masked)
        self.source = self.url  # where the runs come from (a .jsonl snapshot for open_registry's copies)
        self.read_only: Path | None = None  # the read-only folder of a SQLite registry opened for reading only
        try:
            self.engine, self.read_only = _make_engine(self.url)
            if self.read_only is not None:
                return  # nothing is created or migrated in a folder that cannot be written
            if self.engine.dialect.name != "sqlite":  # a server restarting is waited for here too
                with self._connected(self.engine.connect):
                    pass
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
            raise RegistryError(f"cannot open the registry {self.shown}: {_why(exc)}") from exc
        except ImportError as exc:  # a database URL whose driver is not installed (mysql:// without MySQLdb)
            name = exc.name or str(exc)
            hint = f" (pip install {_DRIVERS[name]})" if name in _DRIVERS else ""
            raise RegistryError(f"cannot open the registry {self.shown}: its database driver {name!r} is not "
                                f"installed{hint}") from None

    @contextmanager
    def _tx(self) -> Iterator[sa.Connection]:
        """One write transaction; a database error becomes a one-line RegistryError naming the registry."""
        if self.read_only is not None:
            raise RegistryError(f"registry {self.shown}: cannot write, the folder {self.read_only} is read-only "
                                "(reading works: suite results list / show / export)")
        try:
            with self._connected(self.engine.begin) as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise RegistryError(f"registry {self.shown}: {_why(exc)}") from exc

    @contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        try:
            with self._connected(self.engine.connect) as conn:
                yield conn
        except sa.exc.DBAPIError as exc:
            raise RegistryError(f"registry {self.shown}: {_why(exc)}") from exc

    @contextmanager
    def _connected(self, connect: Any) -> Iterator[sa.Connection]:
        """``connect()`` entered; a database server that does not answer (stopped, restarting) is tried again with a
        growing pause (0.5 s, 1 s, 2 s, then every 4 s) for up to ``$SUITE_REGISTRY_TIMEOUT`` seconds, then one
        RegistryError saying so. What was recorded before stays in the database; a transaction the server drops
        midway is not repeated (its error is said)."""
        wait, t0, pause = lock_timeout(), time.monotonic(), 0.5
        with ExitStack() as stack:
            while True:
                try:
                    conn = stack.enter_context(connect())
                    break
                except sa.exc.OperationalError as exc:
                    left = wait - (time.monotonic() - t0)
                    if self.engine.dialect.name == "sqlite" or not _unreachable(exc):
                        raise
                    if left <= 0:
                        raise RegistryError(
                            f"registry {self.shown}: its database server did not answer for {wait:g} s "
                            f"(SUITE_REGISTRY_TIMEOUT) ({_reason(exc)}); nothing was written, what was recorded before "
                            "is kept") from exc
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, 4.0)
            yield conn

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

    def drop_metrics(self, run_id: str, split: str, after_step: int) -> int:
        """Remove the run's metrics of ``split`` logged at a step above ``after_step`` (a resumed run continues from
        its checkpoint's step: what its interrupted process logged beyond it is logged again, never twice); returns
        how many."""
        with self._tx() as conn:
            return conn.execute(metrics_t.delete().where(metrics_t.c.run_id == run_id, metrics_t.c.split == split,
                                                         metrics_t.c.step > after_step)).rowcount

    def drop_metrics_since(self, run_id: str, saved_at: str, but: str | None = None) -> int:
        """Remove the run's metrics, of every split but ``but``, logged after ``saved_at`` (when the checkpoint a
        resumed run continues from was written, by the process that logged them): the resumed run logs them again,
        never twice; returns how many."""
        q = metrics_t.delete().where(metrics_t.c.run_id == run_id, metrics_t.c.logged_at > saved_at)
        if but is not None:
            q = q.where(sa.or_(metrics_t.c.split.is_(None), metrics_t.c.split != but))
        with self._tx() as conn:
            return conn.execute(q).rowcount

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
        """Context manager: ``finished`` on success, ``interrupted`` on Ctrl-C / SIGTERM / SIGUSR2, ``failed`` otherwise.

        ``resume_id`` continues that run's row (a resumed training run: one row per run, its metrics
        not split) instead of inserting a new one; the keyword arguments are then ignored."""
        # SIGTERM is held back while the row is written and the handler installed: a SIGTERM that arrives
        # just after the row says ``running`` is delivered inside the try below and marks it interrupted
        # (before, it killed the process in that gap and left the row ``running`` until a reap).
        release = _SigtermHold()  # the signal mask as it is; nothing is blocked before the try, which restores it
        try:
            release.hold()
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
            run.record_undefined()
        except KeyboardInterrupt as exc:  # Ctrl-C, or the stop signal the handler names
            self.finish(run.id, "interrupted", error=f"KeyboardInterrupt/{str(exc).split(',')[0] or 'SIGINT'}")
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
            # a prefix taken literally: '%' and '_' are escaped (startswith builds a LIKE pattern)
            row = conn.execute(sa.select(runs_t).where(runs_t.c.id.startswith(run_id, autoescape=True))).fetchall()
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

    def metrics_for(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """``{run id: its metrics in logging order}`` of many runs in a few queries (the ids in chunks of 500)."""
        out: dict[str, list[dict[str, Any]]] = {r: [] for r in run_ids}
        ids = list(out)
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                q = sa.select(metrics_t).where(metrics_t.c.run_id.in_(ids[i:i + 500])).order_by(metrics_t.c.id)
                for r in conn.execute(q):
                    out[r.run_id].append(dict(r._mapping))
        return out

    def fingerprint(self) -> tuple[Any, ...]:
        """What changes whenever a run is recorded, ends or logs a metric (counts and the latest end): readers that
        cache what they computed from the registry compare it."""
        with self._read() as conn:
            runs = conn.execute(sa.select(sa.func.count(), sa.func.max(runs_t.c.ended_at),
                                          sa.func.count(runs_t.c.ended_at))).one()
            metrics = conn.execute(sa.select(sa.func.count(), sa.func.max(metrics_t.c.id))).one()
        return (*runs, *metrics)


class Run:
    """A started run: ``log`` metrics, read its ``id``."""

    def __init__(self, registry: Registry, run_id: str) -> None:
        self.registry = registry
        self.id = run_id
        self.undefined: dict[str, int] = {}  # "split/name" -> how many undefined (NaN) values were not logged

    def log(self, name: str, value: float, split: str | None = None, step: int | None = None) -> None:
        self.log_many({name: value}, split=split, step=step)

    def log_many(self, values: dict[str, float], split: str | None = None, step: int | None = None) -> None:
        """Log ``values``; a value that is undefined (NaN: a rate of nothing, the ROC-AUC of one class) is not logged
        but counted (:attr:`undefined`, recorded as ``undefined_values`` when the run ends), so that no run dies
        at its last step over a metric. A value that is not a number at all is still refused."""
        kept = {}
        for k, v in values.items():
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"metric {k!r} must be a number, got {v!r}") from None
            if math.isnan(f):
                key = f"{split}/{k}" if split else k
                self.undefined[key] = self.undefined.get(key, 0) + 1
            else:
                kept[k] = f
        self.registry.log_metrics(self.id, kept, split=split, step=step)

    def record_undefined(self) -> None:
        """Write how many undefined values were left out (metric ``undefined_values``, split ``info``; named in the
        run's error column only when the run fails)."""
        if self.undefined:
            self.registry.log_metrics(self.id, {"undefined_values": float(sum(self.undefined.values()))}, split="info")

    def set_primary(self, metric: str, split: str | None) -> None:
        """Name the run's headline metric (an evaluator's ``primary_metric``) for tables and the report."""
        self.registry.set_primary(self.id, metric, split)


# what ends an open run like Ctrl-C: SIGTERM (a scheduler stopping or requeuing the job, `kill`, the runner) and
# SIGUSR2, SLURM's customary warning before a job's --time (submitit's --signal): without a handler it kills the process
# with no end recorded; with it the run ends interrupted, its checkpoints kept, and resumes when run again
STOP_SIGNALS = ("SIGTERM", "SIGUSR2")


class _SigtermHold:
    """Block the :data:`STOP_SIGNALS` (main thread, where Python runs its handlers) with :meth:`hold`; calling the
    object restores the mask it found, which delivers a stop signal that arrived meanwhile. The mask is read before anything is blocked, so a
    handler that raises just as the mask changes (a signal that had already arrived) leaves nothing for the caller's
    ``except`` to lose: before, the mask was returned by the call that blocked, and an exception there left SIGTERM
    blocked in the process and in every process it started (their SIGTERM then did nothing)."""

    def __init__(self) -> None:
        self.active = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
        self.old = signal.pthread_sigmask(signal.SIG_BLOCK, set()) if self.active else None

    def hold(self) -> None:
        if self.active:
            signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, n) for n in STOP_SIGNALS if hasattr(signal, n)})

    def __call__(self) -> None:
        if self.active:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


def _dropped(signum: int, frame: Any) -> None:
    """A stop signal after the first one: nothing (see :func:`_sigterm_as_interrupt`)."""


def _sigterm_as_interrupt() -> Any:
    """Turn :data:`STOP_SIGNALS` into KeyboardInterrupt (naming the signal) while a run is open (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    sigs = [getattr(signal, n) for n in STOP_SIGNALS if hasattr(signal, n)]
    old = {s: signal.getsignal(s) for s in sigs}

    def handler(signum: int, frame: Any) -> None:
        # one stop is enough: a second signal (SLURM's warning reaches every process of the job, and the runner's
        # SIGTERM follows it) must not interrupt the row's end being written. Handled and dropped, not SIG_IGN: a
        # signal that arrived while this handler ran is already pending in Python, and Python raises "OSError:
        # Signal 15 ignored due to race condition" for a pending signal whose handler became SIG_IGN (a requeued
        # SLURM job then ended failed, not interrupted)
        for s in sigs:
            signal.signal(s, _dropped)
        name = signal.Signals(signum).name
        raise KeyboardInterrupt(name + (", SLURM's warning before the time limit" if name == "SIGUSR2" else ""))

    try:
        for s in sigs:
            signal.signal(s, handler)
    except ValueError:
        return lambda: None

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return restore


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
        from suite.registry.snapshot import check_snapshot, scan_snapshot

        rows, bad = scan_snapshot(src)  # a line that does not parse is left out and said; the others are read
        if bad and not rows:  # nothing readable: the one error of check_snapshot
            check_snapshot(src, nothing="nothing read")
        if bad:
            print(f"warning: {len(bad)} bad line(s) of {src} left out, the other {len(rows)} runs read: "
                  + " | ".join(b.replace(f"{src}, ", "") for b in bad[:5]) + (" | ..." if len(bad) > 5 else ""),
                  file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(prefix="suite-registry-"))
        atexit.register(shutil.rmtree, tmp, True)
        reg = Registry(str(tmp / "registry.sqlite"))
        reg.import_jsonl(src, checked=rows)
        reg.source = str(src)  # what reports name (the temporary database is gone after the process)
        return reg
    return Registry(spec)


def default_registry() -> Registry:
    return Registry(os.environ.get("SUITE_REGISTRY"))
