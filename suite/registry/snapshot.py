"""Snapshots: a registry exported as CSV / Markdown / JSON / JSONL, and a JSONL snapshot checked line by line and
imported (every bad line reported at once, nothing written before all are good)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from suite.registry.queries import markdown_table
from suite.registry.jobs import IMPORTED, SUPERSEDED
from suite.registry.schema import check_run_row, jobs_t, metrics_t, runs_t




def check_snapshot(path: str | Path, nothing: str = "nothing imported") -> list[tuple[int, str, dict[str, Any]]]:
    """Every run of the JSONL snapshot at ``path`` as ``(line number, line, row)``, each checked by
    :func:`check_run_row` and ids unique within the file. Any bad line: one ``ValueError`` listing every bad line of
    the file with its number (``nothing`` says what that means for the caller: nothing was written)."""
    rows, errors = scan_snapshot(path)
    if errors:
        shown = errors[:20] + ([f"... and {len(errors) - 20} more"] if len(errors) > 20 else [])
        head = f"{len(errors)} bad lines ({nothing}): " if len(errors) > 1 else f"({nothing}) "
        raise ValueError(head + " | ".join(shown))
    return rows


def scan_snapshot(path: str | Path) -> tuple[list[tuple[int, str, dict[str, Any]]], list[str]]:
    """The good runs of the JSONL snapshot at ``path`` (as :func:`check_snapshot` gives them) and a message per bad line
    (file, line and what is wrong): a reader shows what can be read and says what it left out."""
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
    return rows, errors



def merge_into_snapshot(path: str | Path, runs_jsonl: str,
                        checked: list[tuple[int, str, dict[str, Any]]] | None = None) -> dict[str, int]:
    """Merge runs (``runs_jsonl``: :meth:`SnapshotMixin.export_jsonl` text of a registry) into the committed JSONL
    snapshot at ``path``, so that runs made in several trees (each with its own registry) end up in one snapshot:

    - a run not in the snapshot is appended (oldest first);
    - a copy of a run that is further on (:func:`_progress`: an interrupted run resumed and finished, an older run
      superseded by a re-run of its job) replaces its line in place; an older copy (from a tree that did not see
      the resume or the re-run) never sets it back;
    - a run still ``running`` is left out (counted): it is not a result yet;
    - every other line of the snapshot stays byte for byte, so the diff shows only what changed.

    The snapshot and every merged row are checked (:func:`check_snapshot`, :func:`check_run_row`) before the file is
    written, atomically: a bad line anywhere writes nothing (``checked``: what :func:`check_snapshot` returned for
    ``path``, when the caller checked it before opening the registry). Returns ``{"added", "changed", "kept",
    "running"}``."""
    from suite.safeio import write_atomic

    p = Path(path)
    existing = checked if checked is not None else check_snapshot(p, nothing="nothing merged") if p.exists() else []
    lines = [line for _, line, _ in existing]
    at = {rec["id"]: i for i, (_, _, rec) in enumerate(existing)}
    incoming = [json.loads(line) for line in runs_jsonl.splitlines() if line.strip()]
    bad = [f"run {rec.get('id')!r}: " + "; ".join(errs) for rec in incoming if (errs := check_run_row(rec))]
    if bad:
        raise ValueError(f"{len(bad)} runs to merge into {p} are not valid (nothing merged): " + " | ".join(bad[:20]))
    n = dict(added=0, changed=0, kept=0, running=0)
    for rec in sorted(incoming, key=lambda r: r["started_at"]):
        if rec["status"] == "running":
            n["running"] += 1
            continue
        line = json.dumps(rec, sort_keys=True, default=str, ensure_ascii=False)
        i = at.get(rec["id"])
        if i is None:  # ids are unique in a registry: an appended run is never met again
            lines.append(line)
            n["added"] += 1
            continue
        if _progress(rec) > _progress(existing[i][2]):
            lines[i] = line
            n["changed"] += 1
        else:
            n["kept"] += 1
    if n["added"] or n["changed"]:
        write_atomic(p, "".join(line + "\n" for line in lines), what="registry snapshot")
    return n


def _progress(rec: dict[str, Any]) -> tuple[int, str]:
    """How far a run has got, for merging copies of one run: interrupted or failed, then finished, then superseded
    by a re-run of its job (final); within one stage the copy that ended last (a resumed run interrupted again)."""
    stage = 3 if rec.get("error") == SUPERSEDED else 2 if rec.get("status") == "finished" else 1
    return stage, rec.get("ended_at") or ""


class SnapshotMixin:
    """Export and import of a :class:`suite.registry.Registry`."""

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
        those jobs instead of running them again and superseding the imported runs. Runs superseded by a re-run
        of the job (``interrupted``, error :data:`SUPERSEDED`) are the older attempts' and do not count. The row
        spans the job's runs, first start to last end: the runner's ETA reads it."""
        known: set[str] = set()
        runs: dict[str, list[Any]] = {}
        ordered = sorted(hashes)
        for i in range(0, len(ordered), 500):  # bounded IN lists (SQLite's variable limit)
            part = ordered[i:i + 500]
            known |= {r.hash for r in conn.execute(sa.select(jobs_t.c.hash).where(jobs_t.c.hash.in_(part)))}
            for r in conn.execute(sa.select(runs_t.c.config_hash, runs_t.c.status, runs_t.c.error, runs_t.c.started_at,
                                            runs_t.c.ended_at).where(runs_t.c.config_hash.in_(part))):
                if r.error != SUPERSEDED:
                    runs.setdefault(r.config_hash, []).append(r)
        done = {h: rs for h, rs in sorted(runs.items())
                if h not in known and all(r.status == "finished" for r in rs)}
        if done:
            conn.execute(jobs_t.insert(), [dict(hash=h, status="finished", command=IMPORTED, host="", pid=None,
                                                started_at=min(r.started_at for r in rs),
                                                ended_at=max(r.ended_at or r.started_at for r in rs))
                                           for h, rs in done.items()])
