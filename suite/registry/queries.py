"""Queries over the runs: a finished run by hash, a run's final metrics, one metric compared across runs, which runs
may stand in a table (:func:`committed`) and the code versions they came from (:func:`versions_text`), and
Markdown tables."""
from __future__ import annotations

import os
import statistics
from typing import Any, Iterable, Mapping, Sequence

import sqlalchemy as sa

from suite.registry.schema import runs_t

CURVE_SPLIT = "train-step"  # the split of the step curves the engine logs every log_every steps (issue 51)


def step_curve(metrics: Iterable[dict[str, Any]], name: str, split: str = CURVE_SPLIT) -> list[tuple[int, float]]:
    """The curve of ``name`` in a run's metric rows (:meth:`Registry.metrics`, :meth:`Registry.metrics_for`): its
    (step, value) points of ``split`` in step order, the last value logged at a step winning."""
    points: dict[int, float] = {}
    for m in metrics:
        if m["name"] == name and m["split"] == split and m["step"] is not None:
            points[int(m["step"])] = float(m["value"])
    return sorted(points.items())


def committed(run: Mapping[str, Any]) -> bool:
    """Whether a run may stand in a table: its code version names a commit (not ``-dirty``). ``$SUITE_ALLOW_DIRTY=1``
    (a try-out of uncommitted code, the tests) lets every run in."""
    return not str(run.get("code_version")).endswith("-dirty") or os.environ.get("SUITE_ALLOW_DIRTY") == "1"


def versions_text(counts: Mapping[str, int]) -> str:
    """``Code versions of these runs (commit: runs): 1a2b3c: 40, 4d5e6f: 2.`` (most runs first), or "" for none."""
    if not counts:
        return ""
    return "Code versions of these runs (commit: runs): " + ", ".join(
        f"{v}: {n}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) + "."


class QueryMixin:
    """Read-only questions to a :class:`suite.registry.Registry`."""

    def curve(self, run_id: str, name: str, split: str = CURVE_SPLIT) -> list[tuple[int, float]]:
        """A run's step curve of ``name`` (:func:`step_curve`)."""
        return step_curve(self.metrics(run_id, name), name, split)

    def find_finished(self, cfg_hash: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(sa.select(runs_t).where(runs_t.c.config_hash == cfg_hash, runs_t.c.status == "finished")
                               .order_by(runs_t.c.started_at.desc())).first()
        return dict(row._mapping) if row else None

    def final_metrics(self, run_id: str) -> dict[tuple[str, str | None], float]:
        """Last logged value of each (name, split) of a run (highest step, then latest)."""
        return _final(self.metrics(run_id))

    def final_metrics_for(self, run_ids: list[str]) -> dict[str, dict[tuple[str, str | None], float]]:
        """:meth:`final_metrics` of many runs in a few queries."""
        return {r: _final(ms) for r, ms in self.metrics_for(run_ids).items()}

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


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _final(metrics: list[dict[str, Any]]) -> dict[tuple[str, str | None], float]:
    out: dict[tuple[str, str | None], tuple[int, int, float]] = {}
    for m in metrics:
        key = (m["name"], m["split"])
        rank = (m["step"] if m["step"] is not None else -1, m["id"])
        if key not in out or rank >= out[key][:2]:
            out[key] = (*rank, m["value"])
    return {k: v[2] for k, v in out.items()}
