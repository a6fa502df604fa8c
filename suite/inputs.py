"""What a run reads: the exported models (a pretrained encoder a fine-tuning starts from, a model an evaluation scores)
named by its config, and their identity.

A run records what it read in its run options (``inputs``, :func:`input_identities`, written by the run owner): the
folder, the run that made it (its record, ``run.json``) and a digest of its files. The benchmark runner compares that
digest with the folder's files before it reuses the run, so a job whose input was made again with other contents runs
again (benchmarks/runner/run.py). No torch here: a runner and a probe read it cheaply.

A run records the data it read the same way (``data``, :func:`data_identities` of what its task names,
:meth:`suite.train.run.Task.data_inputs`): a digest of the content of a small set, a manifest of a large one. A finished
run is reused, a checkpoint resumed and a benchmark job skipped only while that data is the same (the same data under
another path is); otherwise the line says what changed (:func:`data_changes`: ``data changed:
MUTAG_graph_labels.txt``).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from array import array
from pathlib import Path
from typing import Any, Sequence

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


def changed_inputs(row: dict[str, Any], now: dict[str, dict[str, Any]]) -> list[str]:
    """The config fields whose exported model has other files ``now`` (:func:`input_identities` of the run's config)
    than when the registry row read it (rows that recorded nothing: none)."""
    then = recorded_inputs(row) or {}
    return [k for k, v in now.items() if isinstance(then.get(k), dict) and then[k].get("files") != v["files"]]



# ----------------------------------------------------------------------------- the data a run reads

SMALL_BYTES = 256 << 20  # a data set up to this size is identified by its whole content
SAMPLE_FILES = 64  # files of a larger set read for the digest of its sample (evenly spread over its sorted names)
SAMPLE_BYTES = 8 << 20  # a sampled file past this size is read at its head and tail only (a WebDataset shard: GBs)


class _Listing:
    """Files sorted by name, packed: the names (relative to ``base``, UTF-8) in one byte buffer with their end offsets,
    sizes, modification and change times in int64 arrays (about 60 bytes a file with its name, where a ``Path`` and
    its tuple held ~850). A file's ``Path`` is made only while it is read."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.names, self.ends = bytearray(), array("q")
        self.sizes, self.mtimes, self.ctimes = array("q"), array("q"), array("q")

    def add(self, rel: str, st: os.stat_result) -> None:
        self.names += rel.encode("utf-8", "surrogateescape")
        self.ends.append(len(self.names))
        self.sizes.append(st.st_size)
        self.mtimes.append(st.st_mtime_ns)
        self.ctimes.append(st.st_ctime_ns)

    def __len__(self) -> int:
        return len(self.ends)

    def name(self, i: int) -> str:
        return self.names[self.ends[i - 1] if i else 0 : self.ends[i]].decode("utf-8", "surrogateescape")

    def entry(self, i: int) -> tuple[str, Path, int, int, int]:
        """(name, file, size, mtime in ns, ctime in ns) of the ``i``-th file."""
        rel = self.name(i)
        return rel, self.base / rel, self.sizes[i], self.mtimes[i], self.ctimes[i]


def _walk(listing: _Listing, folder: str, prefix: str) -> None:
    """Add the files under ``folder`` (``os.scandir``, hidden names and links to folders left out, as ``rglob``
    left them) in the order of their sorted relative names: a folder's entries sorted with ``/`` after a
    sub-folder's name, so that its files come where their names sort."""
    with os.scandir(folder) as it:
        entries = [(e.name + "/" if e.is_dir(follow_symlinks=False) else e.name, e) for e in it
                   if not e.name.startswith(".")]
    for key, e in sorted(entries, key=lambda t: t[0]):
        if key.endswith("/"):
            _walk(listing, e.path, prefix + key)
        elif e.is_file():
            listing.add(prefix + e.name, e.stat())


def _listing(path: Path | tuple[Path, ...]) -> _Listing:
    """The file ``path``, every file under the folder ``path`` (hidden files and folders left out: a ``.lock``, an
    editor's swap file) or the files ``path`` lists (names relative to their common folder), sorted by name."""
    if isinstance(path, tuple):
        base = Path(os.path.commonpath([p.parent for p in path]))
        out = _Listing(base)
        for rel, p in sorted((p.relative_to(base).as_posix(), p) for p in path if p.exists()):
            out.add(rel, p.stat())
    elif path.is_file():
        out = _Listing(path.parent)
        out.add(path.name, path.stat())
    else:
        out = _Listing(path)
        _walk(out, str(path), "")
    return out


@functools.lru_cache(maxsize=4096)
def _file_digest(path: Path, size: int, mtime_ns: int, ctime_ns: int, limit: int = 0) -> str:
    """SHA-256 (16 hex digits) of one file's bytes, or with ``limit`` of a file larger than that its first and last
    ``limit // 2`` bytes and its size; read once per process while its size and times stay (the ctime changes with
    any write, even one that sets the mtime back)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        if limit and size > limit:
            h.update(fh.read(limit // 2))
            fh.seek(size - limit // 2)
            h.update(fh.read())
            h.update(f"|{size}".encode())
        else:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def data_identity(path: str | Path | Sequence[str | Path]) -> dict[str, Any]:
    """The identity of a data file or folder a run reads, as data-versioning tools record it, never its path:

    * a set of at most :data:`SMALL_BYTES`: ``kind "content"``, a digest of every file's bytes (``files``: name ->
      digest), so the same files anywhere have the same ``digest`` and one changed byte another;
    * a larger set: ``kind "manifest"``, a digest of its names and sizes and of the bytes of a sample of
      :data:`SAMPLE_FILES` files, each read whole up to :data:`SAMPLE_BYTES` and at its head and tail past that
      (nothing like the whole set is read at a start), and ``stat``, a digest of the names, sizes and modification
      times, which tells a file rewritten in place at the same path.

    ``path`` is a file, a folder or a list of files (a WebDataset pattern's shards), recorded beside it; a path that
    is not there (a list none of whose files is) is ``digest "missing"``."""
    p: Path | tuple[Path, ...] = tuple(map(Path, path)) if isinstance(path, (list, tuple)) else Path(path)
    shown = str(path) if isinstance(p, Path) else f"{len(p)} files in {os.path.commonpath([q.parent for q in p])}"
    if not (p.exists() if isinstance(p, Path) else any(q.exists() for q in p)):
        return {"path": shown, "kind": "missing", "digest": "missing", "files": {}}
    listing = _listing(p)
    total = sum(listing.sizes)
    out: dict[str, Any] = {"path": shown, "count": len(listing), "bytes": total}
    h = hashlib.sha256()
    if total <= SMALL_BYTES:
        files = {rel: _file_digest(f, *stat) for rel, f, *stat in map(listing.entry, range(len(listing)))}
        for rel, d in files.items():
            h.update(f"{rel}|{d}\n".encode())
        return {**out, "kind": "content", "digest": h.hexdigest()[:16], "files": files}
    step = max(1, len(listing) // SAMPLE_FILES)
    sample = {rel: _file_digest(f, *stat, SAMPLE_BYTES) for rel, f, *stat in map(listing.entry,
                                                                                 range(0, len(listing), step))}
    stat = hashlib.sha256()
    for i in range(len(listing)):  # one name made at a time
        rel, size, mtime = listing.name(i), listing.sizes[i], listing.mtimes[i]
        h.update(f"{rel}|{size}|{sample.get(rel, '')}\n".encode())
        stat.update(f"{rel}|{size}|{mtime}\n".encode())
    return {**out, "kind": "manifest", "digest": h.hexdigest()[:16], "stat": stat.hexdigest()[:16]}


def data_identities(paths: dict[str, str | Path | list[str]]) -> dict[str, dict[str, Any]]:
    """``{name: data_identity(path)}`` of the data a run reads (:meth:`suite.train.run.Task.data_inputs`)."""
    return {name: data_identity(p) for name, p in sorted(paths.items())}


def recorded_data(row: dict[str, Any]) -> dict[str, Any] | None:
    """The data identities a registry row recorded (its run options' ``data``), None for a row from before."""
    try:
        data = json.loads(row.get("run_options") or "{}").get("data")
    except (json.JSONDecodeError, AttributeError):
        return None
    return data if isinstance(data, dict) else None


def data_changes(then: dict[str, Any], now: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between the data identities a run recorded (``then``) and those of now, in words: the files of a
    small set that changed (``MUTAG_graph_labels.txt``), are gone or are new; for a large one its path and counts. A
    large set at the same path whose files were rewritten (other modification times) counts as changed; the same data
    under another path does not. A name recorded only on one side is not compared (nothing known)."""
    out: list[str] = []
    for name in sorted(then.keys() & now.keys()):
        a, b = then[name], now[name]
        if not isinstance(a, dict):
            continue
        if a.get("digest") == b["digest"]:
            same_place = Path(str(a.get("path"))).resolve() == Path(b["path"]).resolve()
            if not (same_place and a.get("stat") and b.get("stat") and a["stat"] != b["stat"]):
                continue
            out.append(f"{b['path']} (files rewritten since: other modification times)")
        elif "missing" in (a.get("digest"), b["digest"]):
            out.append(f"{b['path']} ({'gone' if b['digest'] == 'missing' else 'there now, missing then'})")
        elif a.get("kind") == b["kind"] == "content":
            fa, fb = a.get("files") or {}, b["files"]
            out += [f + ("" if f in fa and f in fb else " (gone)" if f in fa else " (new)")
                    for f in sorted(fa.keys() | fb.keys()) if fa.get(f) != fb.get(f)]
        else:
            out.append(f"{b['path']} ({b.get('count')} files, {b.get('bytes')} bytes now; {a.get('count')} files, "
                       f"{a.get('bytes')} bytes then)")
    return out
