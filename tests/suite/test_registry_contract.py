"""Registry columns added in round 2: run options (never hashed), pid, primary metric, resuming a run's row,
and migration of a database made by the older schema."""
import json
import os
import sqlite3

from suite.registry import Registry, config_hash


def test_run_options_not_hashed_pid_and_primary(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    with reg.run(modality="m", task="t", dataset="d", loss="l", config={"lr": 1}, seed=0,
                 run_options={"device": "cpu", "out": "x"}) as run:
        run.log_many({"acc": 0.5}, split="test", step=1)
        run.set_primary("acc", "test")
    r = reg.get(run.id)
    assert r["config_hash"] == config_hash({"lr": 1})
    assert json.loads(r["run_options"]) == {"device": "cpu", "out": "x"}
    assert r["pid"] == os.getpid() and (r["primary_metric"], r["primary_split"]) == ("acc", "test")


def test_resume_continues_the_same_row(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    try:
        with reg.run(modality="m", task="t", dataset="d", loss="l", config={}, seed=0) as run:
            run.log("loss", 2.0, split="train", step=1)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert reg.get(run.id)["status"] == "interrupted"
    with reg.run(resume_id=run.id) as again:
        again.log("loss", 1.0, split="train", step=2)
    assert again.id == run.id and len(reg.runs()) == 1
    r = reg.get(run.id)
    assert r["status"] == "finished" and [m["step"] for m in r["metrics"]] == [1, 2]


def test_old_database_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (id VARCHAR(32) PRIMARY KEY, started_at VARCHAR(32) NOT NULL, ended_at VARCHAR(32), "
                "status VARCHAR(16) NOT NULL, modality VARCHAR(32) NOT NULL, task VARCHAR(64) NOT NULL, dataset VARCHAR(128) "
                "NOT NULL, loss VARCHAR(64) NOT NULL, loss_hparams TEXT NOT NULL, config TEXT NOT NULL, config_hash VARCHAR(64) "
                "NOT NULL, seed INTEGER, code_version VARCHAR(64), packages TEXT, host VARCHAR(128), wall_time FLOAT, error TEXT)")
    con.execute("INSERT INTO runs VALUES ('a', '2026-01-01T00:00:00+00:00', NULL, 'finished', 'm', 't', 'd', 'l', '{}', '{}', "
                "'h', 0, NULL, NULL, NULL, NULL, NULL)")
    con.commit()
    con.close()
    reg = Registry(str(path))
    assert reg.get("a")["pid"] is None
    with reg.run(modality="m", task="t", dataset="d", loss="l", config={}, seed=1, run_options={"x": 1}) as run:
        pass
    assert reg.get(run.id)["pid"] == os.getpid()


def test_migrate_maps_a_renamed_argument_to_the_current_job_hash(tmp_path):
    """a vision job recorded under its earlier spelling (out-dir, now out): `suite bench migrate` gives its runs
    (database and snapshot) and its job record the suite job's current hash, so the runner finds it finished;
    runs of other hashes keep theirs"""
    from benchmarks.runner.migrate import job_hash_map, migrate_jsonl, migrate_registry
    from benchmarks.runner.suitefile import RENAMED_ARGS, load_suite

    job = next(j for j in load_suite("fidelity")[1] if (j.frontend, j.command) in RENAMED_ARGS)
    (old,) = job.earlier_hashes()
    assert old != job.hash and job_hash_map()[old] == job.hash
    assert dict(job.args).get("out") and "out-dir" not in dict(job.args)
    reg = Registry(str(tmp_path / "r.sqlite"))
    for h in (old, "other"):
        with reg.run(modality="vision", task="pretrain-simclr", dataset="d", loss="infonce", config={"lr": 1.0},
                     seed=0, cfg_hash=h):
            pass
    assert reg.claim_job(old, job.label())
    reg.finish_job(old, "finished")
    snap = tmp_path / "s.jsonl"
    snap.write_text(reg.export_jsonl())
    migrate_registry(reg)
    assert sorted(r["config_hash"] for r in reg.runs()) == sorted([job.hash, "other"])
    assert reg.job_status(job.hash) == "finished" and reg.job_status(old) is None
    migrate_jsonl(snap)
    assert sorted(json.loads(x)["config_hash"] for x in snap.read_text().splitlines()) == sorted([job.hash, "other"])
