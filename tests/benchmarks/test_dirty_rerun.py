"""A finished job whose every run comes from uncommitted code (code version ``-dirty``) runs again when the runner's
code is committed, and its new run supersedes the old ones; a job with a clean run is skipped."""
from __future__ import annotations

from pathlib import Path

from benchmarks.run import Job, Runner
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
