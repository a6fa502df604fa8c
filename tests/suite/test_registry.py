"""Results registry: records, concurrency, interruption, compare and export."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from suite.registry import Registry, config_hash


def _start(reg: Registry, seed: int, dataset: str = "MUTAG", loss: str = "macl") -> str:
    return reg.start_run(modality="graph", task="tu", dataset=dataset, loss=loss, loss_hparams={"tau0": 0.2},
                         config={"epochs": 20, "seed": seed}, seed=seed)


def test_run_records_everything(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    with reg.run(modality="graph", task="tu", dataset="MUTAG", loss="macl", loss_hparams={"tau0": 0.2},
                 config={"epochs": 20}, seed=3) as run:
        run.log("acc", 0.5, split="test", step=10)
        run.log("acc", 0.8, split="test", step=20)
        run.log_many({"loss": 1.2, "tau": 0.21}, split="train", step=20)
    r = reg.get(run.id[:8])
    assert r["status"] == "finished" and r["seed"] == 3 and r["wall_time"] >= 0
    assert json.loads(r["loss_hparams"]) == {"tau0": 0.2}
    assert json.loads(r["config"]) == {"epochs": 20}
    assert r["code_version"] and "torch" in json.loads(r["packages"]) and r["host"]
    assert len(r["metrics"]) == 4
    assert reg.final_metrics(run.id)[("acc", "test")] == 0.8  # highest step wins
    assert reg.find_finished(config_hash({"epochs": 20}))["id"] == run.id


def test_failed_run_is_marked_and_reraised(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    with pytest.raises(RuntimeError):
        with reg.run(modality="m", task="t", dataset="d", loss="l", seed=0):
            raise RuntimeError("boom")
    (r,) = reg.runs()
    assert r["status"] == "failed" and "boom" in r["error"]
    with pytest.raises(ValueError, match="NaN"):
        reg.log_metric(r["id"], "acc", float("nan"))


def test_compare_and_export(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    for seed, acc in enumerate([0.8, 0.9, 1.0]):
        rid = _start(reg, seed)
        reg.log_metric(rid, "acc", acc, split="test")
        reg.finish(rid)
    rid = _start(reg, 9, loss="infonce")  # still running: not compared
    reg.log_metric(rid, "acc", 0.1, split="test")
    (row,) = reg.compare("acc", split="test")
    assert row["loss"] == "macl" and row["n"] == 3 and row["seeds"] == [0, 1, 2]
    assert row["mean"] == pytest.approx(0.9) and row["std"] == pytest.approx(0.1)
    csv_text = reg.export("csv")
    assert csv_text.splitlines()[0].startswith("id,status") and len(csv_text.splitlines()) == 5
    assert len(json.loads(reg.export("json"))) == 4
    assert reg.export("md").count("\n") == 6
    with pytest.raises(ValueError, match="export format"):
        reg.export("xml")


WRITER = textwrap.dedent("""
    import sys
    from suite.registry import Registry
    reg = Registry(sys.argv[1])
    for i in range(int(sys.argv[3])):
        rid = reg.start_run(modality="m", task="t", dataset=sys.argv[2], loss="l", config={"i": i}, seed=i)
        reg.log_metrics(rid, {"a": i, "b": 2 * i}, split="test", step=i)
        reg.finish(rid)
""")


def test_concurrent_writers_lose_nothing(tmp_path):
    db = str(tmp_path / "c.sqlite")
    Registry(db)  # create schema once
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, f"w{k}", str(n)]) for k in range(2)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    reg = Registry(db)
    for k in range(2):
        runs = reg.runs(dataset=f"w{k}")
        assert len(runs) == n and all(r["status"] == "finished" for r in runs)
    assert len(reg.metrics()) == 2 * n * 2


SLEEPER = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if started from a background job
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # and not blocked, whatever the parent had blocked
    from suite.registry import Registry
    reg = Registry(sys.argv[1])
    with reg.run(modality="m", task="t", dataset="d", loss="l", seed=0) as run:
        run.log("step", 1)
        print("started", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_is_marked_interrupted(tmp_path, sig):
    db = str(tmp_path / "i.sqlite")
    p = subprocess.Popen([sys.executable, "-c", SLEEPER, db], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    p.send_signal(sig)
    p.wait(timeout=30)
    (r,) = Registry(db).runs()
    assert r["status"] == "interrupted" and r["ended_at"]
