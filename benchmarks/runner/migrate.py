"""``suite bench migrate``: bring recorded configs to the current recording rules (run options apart, options at
their default left out).

Since the split every front-end records its experiment config as a run's ``config`` and its run options
(device, output folder, resume, the model evaluated, ...) as ``run_options``, so tables and the report take a
run's setting from its config as it is. Runs recorded earlier (``run_options`` empty) still hold both in the
config; this command moves, for each such run, the keys its front-end's config class declares in
``RUN_OPTIONS`` into ``run_options``. Options added later with ``omit_default`` (e.g. ``grad_cache_chunk``)
are left out of configs while at their default; runs recorded with the default written out lose it, so they
share the setting of runs recorded before the option existed. Configs that took a list of seeds (TU, MoleculeNet
fine-tuning) now take one ``seed``; a run's one-element ``seeds: [s]`` becomes ``seed: s``. Runs (and job records)
of a shipped suite's job recorded under the earlier spelling of a renamed argument (``benchmarks.runner.suitefile.RENAMED_ARGS``,
e.g. vision's ``out-dir``, now ``out``) get the job's current hash, so the runner finds them finished and the tables
find them. Everything else (ids, metrics) stays as it was; runs of tasks without a known config class are counted
and left alone.

    suite bench migrate --registry benchmarks/results/registry.jsonl   # a snapshot, rewritten in place
    suite bench migrate --registry runs/registry.sqlite
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

# task prefix -> the front-end config class whose RUN_OPTIONS name that task's run options
CONFIG_CLASSES: dict[str, str] = {
    "pretrain-": "vision.config:PretrainConfig",
    "tu-graphcl": "graph.tu.graphcl:TUConfig",
    "simcse-": "text.methods.simcse:SimCSEConfig",
    "senteval-": "text.eval.senteval:EvalConfig",
    "mol-pretrain": "graph.mol.pretrain:PretrainMolConfig",
    "molnet-finetune": "graph.mol.finetune:FinetuneMolConfig",
}


def config_class(task: str) -> type | None:
    """The front-end config class of ``task``, or None when the task has none known."""
    for prefix, spec in CONFIG_CLASSES.items():
        if task.startswith(prefix):
            module, name = spec.split(":")
            return getattr(importlib.import_module(module), name)
    return None


def split_row(row: dict[str, Any]) -> bool:
    """Bring ``row``'s recorded config (in place) to the current recording rules; True if it changed: the run
    options of a run recorded before the split move to ``run_options``, options marked ``omit_default``
    that hold their default are dropped (runs recorded before and after such an option was added then share
    their setting), and a one-element ``seeds`` list becomes the ``seed`` its config class now takes."""
    cls = config_class(str(row.get("task", "")))
    cfg = row.get("config")
    cfg = json.loads(cfg) if isinstance(cfg, str) else cfg
    if cls is None or not isinstance(cfg, dict):
        return False
    changed = False
    if row.get("run_options") in (None, "", "null"):
        known = getattr(cls, "RUN_OPTIONS", ()) + getattr(cls, "RETIRED_RUN_OPTIONS", ())  # retired: of older versions
        options = {k: cfg.pop(k) for k in known if k in cfg}
        row["run_options"] = json.dumps(options, sort_keys=True)
        changed = True
    names = {f.name for f in dataclasses.fields(cls)}
    seeds = cfg.get("seeds")
    if "seed" in names and "seeds" not in names and isinstance(seeds, list) and len(seeds) == 1 and "seed" not in cfg:
        cfg["seed"] = cfg.pop("seeds")[0]
        changed = True
    for f in dataclasses.fields(cls):
        if f.metadata.get("omit_default") and f.name in cfg and cfg[f.name] == f.default:
            del cfg[f.name]
            changed = True
    if changed:
        row["config"] = json.dumps(cfg, sort_keys=True)
    return changed


def job_hash_map() -> dict[str, str]:
    """Earlier job hash -> current job hash, over the jobs of every shipped suite (:meth:`Job.earlier_hashes`)."""
    from benchmarks.runner.suitefile import SUITES, load_suite

    out: dict[str, str] = {}
    for path in sorted(SUITES.glob("*.yaml")):
        for job in load_suite(path)[1]:
            out.update({old: job.hash for old in job.earlier_hashes()})
    return out


def migrate_jsonl(path: str | Path) -> dict[str, int]:
    """Rewrite the snapshot at ``path`` (atomically) with every legacy run split; returns the counts. Every row is
    checked before anything is written (:func:`suite.registry.check_snapshot`: column types, JSON config, known
    status, ids unique in the file); a bad line is a ValueError listing every bad line, and the file stays as it was."""
    from suite.registry import check_snapshot
    from suite.safeio import write_atomic

    p = Path(path)
    out, counts, jobs = [], {"migrated": 0, "unchanged": 0}, job_hash_map()
    for _, line, row in check_snapshot(p, nothing="the file is unchanged"):
        changed = split_row(row)
        if row.get("config_hash") in jobs:
            row["config_hash"], changed = jobs[row["config_hash"]], True
        counts["migrated" if changed else "unchanged"] += 1
        out.append(json.dumps(row, sort_keys=True, default=str, ensure_ascii=False) if changed else line)
    write_atomic(p, "".join(x + "\n" for x in out), what="registry snapshot")
    return counts


def migrate_registry(reg: Any) -> dict[str, int]:
    """Split every legacy run of a database registry; returns the counts. Runs whose config is not a JSON object
    are reported (all of them, by run id) before any run is changed."""
    import sqlalchemy as sa

    from suite.registry import jobs_t, runs_t

    counts, jobs = {"migrated": 0, "unchanged": 0}, job_hash_map()
    with reg.engine.begin() as conn:
        rows = [dict(r) for r in conn.execute(sa.select(runs_t.c.id, runs_t.c.task, runs_t.c.config,
                                                        runs_t.c.run_options, runs_t.c.config_hash)).mappings()]
        bad = []
        for row in rows:
            try:
                ok = isinstance(json.loads(row["config"]), dict)
            except (TypeError, json.JSONDecodeError):
                ok = False
            if not ok:
                bad.append(f"run {row['id']}: config is not a JSON object ({str(row['config'])[:40]!r})")
        if bad:
            raise ValueError(f"registry {reg.url}: {len(bad)} run(s) cannot be migrated (nothing changed): "
                             + "; ".join(bad[:20]) + (f"; ... and {len(bad) - 20} more" if len(bad) > 20 else ""))
        for row in rows:
            changed = split_row(row)
            if row["config_hash"] in jobs:
                row["config_hash"], changed = jobs[row["config_hash"]], True
            if changed:
                conn.execute(sa.update(runs_t).where(runs_t.c.id == row["id"]).values(
                    config=row["config"], run_options=row["run_options"], config_hash=row["config_hash"]))
                counts["migrated"] += 1
            else:
                counts["unchanged"] += 1
        have = {h for (h,) in conn.execute(sa.select(jobs_t.c.hash))}
        for old, new in jobs.items():  # the runner's job records: a finished job stays finished under its new hash
            if old in have and new not in have:
                conn.execute(sa.update(jobs_t).where(jobs_t.c.hash == old).values(hash=new))
    return counts


def register(sub: Any) -> None:
    p = sub.add_parser("migrate", help="move run options out of the config of runs recorded before the config split")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY), or a "
                                                    ".jsonl snapshot (rewritten in place)")
    p.set_defaults(func=cmd_migrate)


def sqlite_file(url: str) -> Path | None:
    """The SQLite file a registry path or ``sqlite:///`` URL names (None for another database or in-memory SQLite)."""
    if "://" not in url:
        return Path(url).expanduser()
    if url.startswith("sqlite") and url.split("://", 1)[1].startswith("/"):
        path = url.split("://", 1)[1][1:].split("?", 1)[0]
        return Path(path) if path and path != ":memory:" else None
    return None


def cmd_migrate(args: argparse.Namespace) -> int:
    spec = args.registry
    if spec and str(spec).endswith(".jsonl"):
        if not Path(spec).is_file():
            raise ValueError(f"registry snapshot not found: {spec}")
        counts, where = migrate_jsonl(spec), spec
    else:
        from suite.paths import registry_url
        from suite.registry import Registry

        url = spec or registry_url()
        db = sqlite_file(url)
        if db is not None and not db.is_file():  # opening it would create an empty database and "migrate" nothing
            raise ValueError(f"registry not found: {db} (migrate changes an existing registry; check the path"
                             f"{'' if spec else ' in $SUITE_REGISTRY'})")
        reg = Registry(url)
        counts, where = migrate_registry(reg), reg.url
    print(f"{where}: {counts['migrated']} run(s) migrated, {counts['unchanged']} unchanged")
    return 0
