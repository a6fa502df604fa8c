"""The registry's schema (runs, metrics, jobs), the checks of a run row, and the values every row records
(config hash, code version, package versions)."""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

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
jobs_t = sa.Table(  # benchmark-runner jobs: one row per job hash (see benchmarks/runner/run.py)
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
    sa.Column("scheduler_id", sa.String(64)),  # a cluster executor's id of the job (SLURM's 123_4, a Ray task)
    sa.Column("log", sa.Text),  # where the job's output goes
    sa.Column("requeues", sa.Integer),  # times the scheduler requeued it (preemption, time limit, node failure)
)
_ADDED_COLUMNS = {"runs": _ADDED_RUN_COLUMNS, "jobs": ("child_pid", "scheduler_id", "log", "requeues")}


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


# What a changed file does not make "-dirty": results and prose written while a grid runs (the snapshot, the rendered
# tables, the documentation), never code.
NOT_CODE = ("benchmarks/results", "*.md", "docs")


def code_version(root: Path | None = None) -> str:
    """The commit the code of this checkout (``root``, default: the repository of this package) is (12 hex digits),
    ``-dirty`` when tracked code differs from it (results files and prose do not count: :data:`NOT_CODE`), or
    ``v<version>`` outside a git checkout. A copy of the tree whose git metadata is not its own (a container, a lent
    GPU machine) says its commit by ``SUITE_CODE_VERSION``, which is then taken as it is."""
    if os.environ.get("SUITE_CODE_VERSION"):
        return os.environ["SUITE_CODE_VERSION"]
    try:
        root = root or Path(__file__).resolve().parents[2]  # the repository
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            sha = out.stdout.strip()[:12]
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                    ".", *(f":(exclude){p}" for p in NOT_CODE)],
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


def _transient(exc: Exception) -> bool:
    return "locked" in str(exc).lower() or "already exists" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    """The driver's one-line reason (``file is not a database``, ``attempt to write a readonly database``, ...)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
