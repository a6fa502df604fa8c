"""What a run reads: the exported models (a pretrained encoder a fine-tuning starts from, a model an evaluation scores)
named by its config, and their identity.

A run records what it read in its run options (``inputs``, :func:`input_identities`, written by the run owner): the
folder, the run that made it (its record, ``run.json``) and a digest of its files. The benchmark runner compares that
digest with the folder's files before it reuses the run, so a job whose input was made again with other contents runs
again (benchmarks/runner/run.py). No torch here: a runner and a probe read it cheaply.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from suite.paths import resolve_model_path

RECORD = "run.json"  # the run owner's record beside an export's weights (suite.train.run.PROVENANCE)


def read_record(folder: str | Path) -> dict[str, Any] | None:
    """The run owner's record (``run.json``) of an export folder, None without one; a file that is not a JSON object
    is a ``ValueError`` naming it."""
    path = Path(folder) / RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a run record ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a run record (a {type(record).__name__}, not a JSON object)")
    return record


def export_folder(folder: str | Path) -> Path | None:
    """The folder that holds the run owner's record of an exported model: ``folder`` or ``folder/export``; None."""
    p = Path(folder)
    return next((d for d in (p, p / "export") if (d / RECORD).is_file()), None)


DESCRIPTIONS = (RECORD, "README.md")  # what an export says about its run (metrics, timings): not its contents


def files_digest(folder: Path) -> str:
    """SHA-256 (16 hex digits) of the files of an export folder, their relative paths and bytes, less its record and
    model card (:data:`DESCRIPTIONS`): the same weights, config and tokenizer give the same digest, whichever run or
    tree wrote them."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).as_posix() not in DESCRIPTIONS)
    stats = tuple((f.relative_to(folder).as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _digest(folder.resolve(), stats)


@functools.lru_cache(maxsize=64)
def _digest(folder: Path, stats: tuple[tuple[str, int, int], ...]) -> str:
    """:func:`files_digest` of files not changed since (``stats``: name, size, mtime): read once per process."""
    h = hashlib.sha256()
    for name, size, _ in stats:
        h.update(f"{name}|{size}|".encode())
        with open(folder / name, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def input_identity(spec: str | Path) -> dict[str, Any] | None:
    """``{"path", "run_id", "files"}`` of an exported model a run reads (``spec`` as the config gives it, ``models:NAME``
    resolved): the run that made it (its record) and :func:`files_digest`; None where ``spec`` is no folder with a
    record (a hub name, a data folder)."""
    try:
        d = export_folder(resolve_model_path(spec))
    except ValueError:  # not a models:NAME the config could mean as a folder
        return None
    if d is None:
        return None
    rec = read_record(d) or {}
    return {"path": str(spec), "run_id": rec.get("run_id"), "files": files_digest(d)}


def input_identities(cfg: Any, own: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """``{field: identity}`` (:func:`input_identity`) of the config fields that name an exported model, less the run's
    own folder ``own`` (and a field named ``out``)."""
    skip = None if own is None else Path(own).resolve()
    out: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(cfg) else ():
        v = getattr(cfg, f.name)
        if f.name == "out" or not isinstance(v, str) or not v.strip():
            continue
        try:
            if skip is not None and resolve_model_path(v).resolve() in (skip, skip / "export"):
                continue
        except ValueError:  # not a models:NAME
            continue
        if (ident := input_identity(v)) is not None:
            out[f.name] = ident
    return out


def recorded_inputs(row: dict[str, Any]) -> dict[str, Any] | None:
    """The inputs a registry row recorded reading (its run options' ``inputs``), None for a row from before inputs
    were recorded."""
    try:
        inputs = json.loads(row.get("run_options") or "{}").get("inputs")
    except (json.JSONDecodeError, AttributeError):
        return None
    return inputs if isinstance(inputs, dict) else None


def changed_inputs(row: dict[str, Any], cfg: Any, own: str | Path | None = None) -> list[str]:
    """The config fields whose exported model has other files now than when the registry row read it (rows that
    recorded nothing: none)."""
    then = recorded_inputs(row) or {}
    now = input_identities(cfg, own=own)
    return [k for k, v in now.items() if isinstance(then.get(k), dict) and then[k].get("files") != v["files"]]

