"""A finished job whose every run comes from uncommitted code (code version ``-dirty``) runs again when the runner's
code is committed, and its new run supersedes the old ones; a job with a clean run is skipped."""
from __future__ import annotations

from pathlib import Path

from benchmarks.runner.suitefile import Job
from benchmarks.runner.plan import Runner
from suite.registry import Registry


def test_jobs_with_only_dirty_runs_run_again(tmp_path: Path, monkeypatch) -> None:
    from suite.registry import store

    reg = Registry(str(tmp_path / "r.sqlite"))
    dirty, clean = Job("losses", "x", (("a", 1),), 0), Job("losses", "x", (("a", 2),), 0)
    for job, version in ((dirty, "0123456789ab-dirty"), (clean, "0123456789ab")):
        monkeypatch.setattr(store, "code_version", lambda root=None, v=version: v)
        assert reg.claim_job(job.hash, job.label())
        with reg.run(modality="core", task="t", dataset="d", loss="l", seed=0, cfg_hash=job.hash):
            pass
        reg.finish_job(job.hash, "finished")
    from suite.registry import schema

    monkeypatch.setattr(schema, "code_version", lambda root=None: "0123456789ab")  # this checkout: committed code
    runner = Runner(reg.url, dry_run=True)
    assert runner.dirty_only([dirty, clean], reg) == {dirty.hash: "0123456789ab-dirty"}
    assert runner.run([dirty, clean]) == {"dry-run": 1, "skipped": 1}
    monkeypatch.setattr(schema, "code_version", lambda root=None: "0123456789ab-dirty")  # from dirty code: no point
    assert Runner(reg.url, dry_run=True).run([dirty, clean]) == {"skipped": 2}


def test_tables_use_committed_runs_and_the_newest_of_a_setting(tmp_path: Path, monkeypatch) -> None:
    """a run from uncommitted code stands in no table (a try-out may let it in: SUITE_ALLOW_DIRTY=1); the same
    setting and seed run twice (another suite, newer code): the newest run is the cell, the older is superseded"""
    from benchmarks.report import collect
    from benchmarks.tables import suite_runs
    from suite.registry import store

    from benchmarks.runner.suitefile import load_suite

    reg = Registry(str(tmp_path / "r.sqlite"))
    job = next(j for j in load_suite("graph-tu")[1] if dict(j.args) == {"dataset": "MUTAG", "epochs": 20, "loss": "macl"})
    for version, acc, h in (("0123456789ab-dirty", 0.70, job.hash), ("0123456789ab", 0.80, "older-suite"),
                            ("fedcba987654", 0.90, "newer-suite")):
        monkeypatch.setattr(store, "code_version", lambda root=None, v=version: v)
        with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="macl", seed=job.seed,
                     config={"epochs": 20}, cfg_hash=h) as run:
            run.log("acc", acc, split="test")
    monkeypatch.delenv("SUITE_ALLOW_DIRTY", raising=False)
    (jr,) = [jr for jr in suite_runs(reg, "graph-tu") if jr.job.hash == job.hash]
    assert jr.runs == []  # only a dirty run: not run
    (table,) = collect(reg).values()
    assert [c.values for c in table.by_ds["MUTAG"].values()] == [[90.0]]  # the newest committed run of the setting
    assert table.superseded == 1  # the older committed run: shown as superseded under the history table
    monkeypatch.setenv("SUITE_ALLOW_DIRTY", "1")
    (jr,) = [jr for jr in suite_runs(reg, "graph-tu") if jr.job.hash == job.hash]
    assert len(jr.runs) == 1
