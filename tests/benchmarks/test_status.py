"""``suite bench status``: a grid's jobs as the registry sees them, with each run's last logged step."""
from __future__ import annotations

from pathlib import Path

from benchmarks.runner.status import job_rows
from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry


def test_status_of_a_grid_from_the_registry(tmp_path: Path, capsys) -> None:
    """the quick suite in a registry where one job runs (its run logged step curves up to step 150) and one finished
    (epoch curves only) -> their states and last steps; every other job 'not started'; the command prints the table
    and the counts"""
    from suite.cli import main

    reg_path = tmp_path / "r.sqlite"
    reg = Registry(str(reg_path))
    _, jobs = load_suite("quick")
    a, b = jobs[0], jobs[1]
    assert reg.claim_job(a.hash, a.label()) and reg.claim_job(b.hash, b.label())
    with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="graphcl", seed=0, cfg_hash=b.hash) as r:
        r.log_many({"loss": 2.0}, split="train", step=20)
    reg.finish_job(b.hash, "finished")
    run_a = reg.start_run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="macl", seed=0, cfg_hash=a.hash)
    for step in (50, 100, 150):
        reg.log_metrics(run_a, {"loss": 3.0 / step}, split="train-step", step=step)
    rows = {r[0]: r for r in job_rows(reg, jobs)}
    assert rows[a.label()][1] == "running" and rows[a.label()][3] == "running" and rows[a.label()][4] == "step 150"
    assert rows[b.label()][1:2] == ["finished"] and rows[b.label()][3] == "finished" and rows[b.label()][4] == "epoch 20"
    assert all(r[1] == "not started" and r[2] == "-" for k, r in rows.items() if k not in (a.label(), b.label()))
    assert main(["bench", "status", "quick", "--registry", str(reg_path)]) == 0
    out = capsys.readouterr().out
    assert "| job | state | run |" in out and f"quick: {len(jobs)} jobs:" in out and "not started" in out
