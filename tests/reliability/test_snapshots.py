"""Registry snapshots (`suite results import`, `suite bench migrate`): every row is checked before any is written,
every bad line is reported at once with the file name and line number, and a write that fails leaves nothing
half-written. Also two processes importing one snapshot into one registry at the same time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite.cli import main
from suite.registry import Registry
from suite.registry.jobs import SUPERSEDED

ROOT = Path(__file__).resolve().parents[2]


def _good_rows(tmp_path: Path, n: int = 2) -> list[dict]:
    reg = Registry(str(tmp_path / "src.sqlite"))
    for seed in range(n):
        with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="macl", loss_hparams={"tau0": 0.2},
                     config={"dataset": "MUTAG", "seed": seed, "device": "cpu"}, seed=seed) as run:
            run.log("acc", 0.8 + seed / 100, split="test", step=1)
    return [json.loads(line) for line in reg.export_jsonl().splitlines()]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _import(tmp_path: Path, snap: Path, capsys) -> tuple[int, str, Registry]:
    db = tmp_path / "dst.sqlite"
    rc = main(["results", "import", str(snap), "--registry", str(db)])
    return rc, capsys.readouterr().err.strip(), Registry(str(db))


# ----------------------------------------------------------------------------- import (items 4, 5)

BAD_IMPORTS = {
    "config not JSON": ({"config": "{not json"}, r"config .*not JSON"),
    "seed 'abc'": ({"seed": "abc"}, r"seed .*'abc'"),
    "integer id": ({"id": 12345}, r"id .*12345"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_import_refuses_a_silently_wrong_row(tmp_path, capsys, case):
    """`suite results import` of a row whose config is '{not json', whose seed is 'abc' or whose id is an integer ->
    exit 2 naming the file, line and column; nothing imported (all three were accepted and listed as runs)"""
    change, match = BAD_IMPORTS[case]
    good = _good_rows(tmp_path)
    snap = _write(tmp_path / "snap.jsonl", [good[0], {**good[1], **change}])
    rc, err, reg = _import(tmp_path, snap, capsys)
    assert rc == 2 and f"{snap}, line 2" in err and "Traceback" not in err, err
    import re
    assert re.search(match, err), err
    assert reg.runs() == []


NAMELESS = {
    "config null": ({"config": None}, "config"),
    "id null": ({"id": None}, "id"),
}


@pytest.mark.parametrize("case", sorted(NAMELESS) + ["duplicate id"])
def test_import_errors_name_the_snapshot_line(tmp_path, capsys, case):
    """`suite results import` of a row with config null, id null, or an id used twice in the file -> the error
    names the snapshot file and line (not the registry), nothing imported"""
    good = _good_rows(tmp_path)
    if case == "duplicate id":
        rows, what = [good[0], good[1], {**good[1], "seed": 7}], f"id {good[1]['id']!r} .*also on line 2"
    else:
        change, what = NAMELESS[case]
        rows = [good[0], good[1], {**good[1], **change}]
    snap = _write(tmp_path / "snap.jsonl", rows)
    rc, err, reg = _import(tmp_path, snap, capsys)
    import re
    assert rc == 2 and f"{snap}, line 3" in err and re.search(what, err), err
    assert "dst.sqlite" not in err and reg.runs() == []


def test_import_reports_every_bad_line_at_once(tmp_path, capsys):
    """a snapshot with 5 bad lines among good ones -> one error listing all 5 line numbers, nothing imported"""
    good = _good_rows(tmp_path, 3)
    rows = [good[0], {**good[1], "id": "b1", "status": "done"}, "[1, 2]", good[1], "{broken",
            {**good[2], "id": "b2", "wall_time": "slow"}, {**good[2], "id": "b3", "metrics": [["acc", "high", "test", 1, None]]},
            good[2]]
    snap = _write(tmp_path / "snap.jsonl", rows)
    rc, err, reg = _import(tmp_path, snap, capsys)
    assert rc == 2 and reg.runs() == []
    for line in (2, 3, 5, 6, 7):
        assert f"line {line}:" in err, err
    for line in (1, 4, 8):
        assert f"line {line}:" not in err, err
    assert "5 bad lines" in err


def test_import_of_a_non_utf8_snapshot(tmp_path, capsys):
    """`suite results import` of a latin-1 snapshot -> exit 2 naming the file and line, nothing imported"""
    good = _good_rows(tmp_path, 1)
    snap = tmp_path / "snap.jsonl"
    snap.write_bytes(json.dumps(good[0]).encode() + b"\n" + json.dumps({**good[0], "id": "x"}).replace(
        '"MUTAG"', '"MUT\xc9G"').encode("latin-1") + b"\n")
    rc, err, reg = _import(tmp_path, snap, capsys)
    assert rc == 2 and str(snap) in err and "line 2" in err and reg.runs() == []


def test_committed_snapshot_passes_the_row_checks(tmp_path):
    """the committed registry snapshot (benchmarks/results/registry.jsonl) -> every row passes the new checks and
    imports (the checks refuse nothing real)"""
    from suite.registry import check_snapshot

    snap = ROOT / "benchmarks" / "results" / "registry.jsonl"
    rows = check_snapshot(snap)
    assert len(rows) == sum(1 for line in snap.read_text().splitlines() if line.strip()) > 100


# ----------------------------------------------------------------------------- migrate (item 6)

def _migrate(path: Path, capsys) -> tuple[int, str]:
    rc = main(["bench", "migrate", "--registry", str(path)])
    return rc, capsys.readouterr().err.strip()


def test_migrate_a_json_list_on_a_line(tmp_path, capsys):
    """`suite bench migrate` on a snapshot with a JSON list on a line -> exit 2 naming file and line (was an
    AttributeError), the file unchanged"""
    good = _good_rows(tmp_path, 1)
    snap = _write(tmp_path / "snap.jsonl", [good[0], "[1, 2, 3]"])
    before = snap.read_bytes()
    rc, err = _migrate(snap, capsys)
    assert rc == 2 and f"{snap}, line 2" in err and "JSON object" in err and "Traceback" not in err, err
    assert snap.read_bytes() == before


def test_migrate_a_non_utf8_snapshot(tmp_path, capsys):
    """`suite bench migrate` on a latin-1 snapshot -> exit 2 naming the file (was a decode error without it)"""
    snap = tmp_path / "snap.jsonl"
    snap.write_bytes(b'{"id": "caf\xe9"}\n')
    before = snap.read_bytes()
    rc, err = _migrate(snap, capsys)
    assert rc == 2 and str(snap) in err and "line 1" in err, err
    assert snap.read_bytes() == before


def test_migrate_a_bad_config(tmp_path, capsys):
    """`suite bench migrate` on rows whose config is not JSON (2 of them) -> exit 2 naming the file, both lines and
    both run ids, the file unchanged"""
    good = _good_rows(tmp_path, 3)
    rows = [good[0], {**good[1], "config": "{oops"}, {**good[2], "config": "[1"}]
    snap = _write(tmp_path / "snap.jsonl", rows)
    before = snap.read_bytes()
    rc, err = _migrate(snap, capsys)
    assert rc == 2 and snap.read_bytes() == before
    for line, row in ((2, good[1]), (3, good[2])):
        assert f"{snap}, line {line}" in err and row["id"] in err, err


def test_migrate_a_database_with_a_bad_config(tmp_path, capsys):
    """`suite bench migrate` on an SQLite registry holding a run whose config is not JSON -> exit 2 naming the
    registry and run id, no run changed"""
    import sqlalchemy as sa

    from suite.registry import runs_t

    db = tmp_path / "r.sqlite"
    reg = Registry(str(db))
    with reg.run(modality="text", task="simcse-unsup", dataset="d", loss="infonce", config={"device": "cpu"}, seed=0):
        pass
    with reg.run(modality="text", task="simcse-unsup", dataset="d", loss="infonce", config={"device": "cpu"}, seed=1) as r:
        bad = r.id
    with reg.engine.begin() as conn:
        conn.execute(sa.update(runs_t).values(run_options=None))
        conn.execute(sa.update(runs_t).where(runs_t.c.id == bad).values(config="{nope"))
    before = [dict(r) for r in reg.runs()]
    rc, err = _migrate(db, capsys)
    assert rc == 2 and bad in err and str(db) in err, err
    assert [dict(r) for r in reg.runs()] == before


@pytest.mark.parametrize("case", ["bad row", "not UTF-8", "missing file"])
def test_refused_import_leaves_no_registry_behind(tmp_path, capsys, case):
    """`suite results import SNAP --registry new.sqlite` where the snapshot has a bad row, is not UTF-8 or is not
    there, and new.sqlite does not exist yet -> exit 2 with one line, and new.sqlite (with its -wal / -shm files) is
    not created: the snapshot is checked before the registry is opened (a refused import left an empty 32 KB
    database behind)"""
    good = _good_rows(tmp_path, 1)
    snap = tmp_path / "snap.jsonl"
    if case == "bad row":
        _write(snap, [good[0], {**good[0], "id": "x", "seed": "abc"}])
    elif case == "not UTF-8":
        snap.write_bytes(b'{"id": "caf\xe9"}\n')
    db = tmp_path / "new.sqlite"
    rc = main(["results", "import", str(snap), "--registry", str(db)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and str(snap) in err, err
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("new.sqlite")]


def test_migrate_a_registry_that_is_not_there(tmp_path, capsys, monkeypatch):
    """`suite bench migrate --registry typo.sqlite` (a path that does not exist, also as a sqlite:/// URL or through
    $SUITE_REGISTRY) -> exit 2 with one line naming the path; no database created (it made an empty one and said
    '0 run(s) migrated', exit 0)"""
    monkeypatch.setattr(sys, "argv", ["suite", "bench", "migrate"])  # the bench plugin imports only migrate
    db = tmp_path / "typo.sqlite"
    for argv in (["--registry", str(db)], ["--registry", f"sqlite:///{db}"], []):
        monkeypatch.setenv("SUITE_REGISTRY", str(db))
        rc = main(["bench", "migrate", *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.count("\n") == 0 and str(db) in err and "not found" in err, (argv, err)
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("typo.sqlite")], argv


# ----------------------------------------------------------------------------- full disk, two writers

def _big_snapshot(path: Path, n: int, task: str = "simcse-unsup") -> Path:
    """``n`` legacy-shaped rows (config holding run options, no run_options): what migrate rewrites."""
    rows = [{"id": f"{i:032x}", "started_at": "2026-01-01T00:00:00+00:00", "ended_at": None, "status": "finished",
             "modality": "text", "task": task, "dataset": "d", "loss": "infonce", "loss_hparams": "{}",
             "config": json.dumps({"device": "cpu", "seed": i, "out": "runs/x" * 5}), "config_hash": f"{i:032x}",
             "seed": i, "code_version": None, "packages": None, "host": "h", "wall_time": 1.0, "error": None,
             "pid": None, "run_options": None, "primary_metric": None, "primary_split": None,
             "metrics": [["acc", 0.5, "test", 1, None]]} for i in range(n)]
    return _write(path, rows)


def test_disk_full_while_migrate_rewrites_a_snapshot(tmp_path, capsys):
    """the disk fills while `suite bench migrate` rewrites a snapshot -> exit 2 naming the file; the snapshot as it
    was and no temporary file left"""
    from tests.reliability.limits import file_size_limit

    snap = _big_snapshot(tmp_path / "snap.jsonl", 200)
    before = snap.read_bytes()
    with file_size_limit(len(before) // 2):
        rc, err = _migrate(snap, capsys)
    assert rc == 2 and "snap.jsonl" in err and "File too large" in err and err.count("\n") == 0, err
    assert snap.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap.jsonl"]


def test_disk_full_while_exporting_results(tmp_path, capsys):
    """the disk fills while `suite results export --out x.csv` writes over an earlier export -> exit 2 naming the
    file; the earlier export intact, no half-written file or temporary left"""
    from tests.reliability.limits import file_size_limit

    db = tmp_path / "r.sqlite"
    Registry(str(db)).import_jsonl(_big_snapshot(tmp_path / "snap.jsonl", 800))
    out = tmp_path / "x.csv"
    out.write_text("earlier export\n")
    with file_size_limit(40_000):  # above SQLite's 32 KiB shared-memory file, below the export (about 60 KB)
        rc = main(["results", "export", "--format", "csv", "--out", str(out), "--registry", str(db)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "x.csv" in err and "File too large" in err and err.count("\n") == 0, err
    assert out.read_text() == "earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("x.csv")) == ["x.csv"]


IMPORTER = """
import sys
from suite.registry import Registry
from suite.registry.jobs import SUPERSEDED
n = Registry(sys.argv[1]).import_jsonl(sys.argv[2])
print(n["added"], n["skipped"])
"""


def test_two_processes_import_one_snapshot_at_once(tmp_path):
    """two processes import the same 40-run snapshot into one registry at the same time -> both exit 0, every run
    present once (one process adds it, the other skips it), no UNIQUE-constraint error"""
    snap = _big_snapshot(tmp_path / "snap.jsonl", 40)
    db = str(tmp_path / "dst.sqlite")
    Registry(db)  # created first: the race is on the rows, not on creating the tables
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", IMPORTER, db, str(snap)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    added = sorted(int(o[0].split()[0]) for o in outs)
    assert sum(added) == 40 and sorted(int(o[0].split()[1]) for o in outs) == sorted(40 - a for a in added)
    dst = Registry(db)
    assert len(dst.runs()) == 40 and len(dst.metrics()) == 40


WRITER = """
import sys
from suite.registry import Registry
from suite.registry.jobs import SUPERSEDED
reg = Registry(sys.argv[1])
for i in range(10):
    with reg.run(modality="m", task="t", dataset=sys.argv[2], loss="l", config={"i": i, "w": sys.argv[2]}, seed=i) as r:
        r.log_many({"a": 1.0, "b": 2.0}, split="test", step=1)
"""


def test_two_processes_record_runs_in_one_registry_at_once(tmp_path):
    """two processes each record 10 runs with their metrics into one SQLite registry at the same time -> both exit 0,
    20 finished runs, every metric present (no 'database is locked', nothing lost)"""
    db = str(tmp_path / "r.sqlite")
    Registry(db)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, name], stderr=subprocess.PIPE, text=True, env=env)
             for name in ("a", "b")]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    reg = Registry(db)
    runs = reg.runs()
    assert len(runs) == 20 and {r["status"] for r in runs} == {"finished"} and len(reg.metrics()) == 40


# ----------------------------------------------------------------------------- merge (runs of several trees)

def _tree(tmp_path: Path, name: str, snap: Path) -> Registry:
    reg = Registry(str(tmp_path / f"{name}.sqlite"))
    reg.import_jsonl(snap)
    return reg


def _add(reg: Registry, seed: int, finish: bool = True) -> str:
    cfg = {"dataset": "MUTAG", "seed": seed, "device": "cpu"}
    if not finish:
        return reg.start_run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="macl", config=cfg, seed=seed)
    with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="macl", config=cfg, seed=seed) as run:
        run.log("acc", 0.9, split="test", step=1)
    return run.id


def test_merge_two_trees_into_one_snapshot(tmp_path, capsys):
    """`suite results merge` of two trees that imported one snapshot and ran beside each other (one resumed an
    interrupted run, the other re-ran a job and left a run running), merged in either order and again -> each new run
    added once, the resume and the supersession applied and never set back by the other tree's older copy, the
    running run left out, every other line kept byte for byte"""
    good = _good_rows(tmp_path, n=3)
    stale = {**good[2], "status": "interrupted", "error": "KeyboardInterrupt"}
    snap = _write(tmp_path / "snap.jsonl", [json.dumps(r, sort_keys=True) for r in (good[0], good[1], stale)])
    before = snap.read_text().splitlines()
    x, y = _tree(tmp_path, "x", snap), _tree(tmp_path, "y", snap)
    x.reopen_run(stale["id"])  # tree x resumes the interrupted run and finishes it
    x.finish(stale["id"])
    new_x = _add(x, 10)
    assert y.claim_job(good[0]["config_hash"], "re-run", rerun=True)  # tree y runs seed 0's job again
    new_y = _add(y, 0)
    running = _add(y, 11, finish=False)

    for order in ((x, y), (y, x), (x, y)):
        for reg in order:
            assert main(["results", "merge", str(snap), "--registry", reg.url]) == 0
        after = {json.loads(line)["id"]: json.loads(line) for line in snap.read_text().splitlines()}
        assert set(after) == {r["id"] for r in good} | {new_x, new_y}  # each new run once; the running one left out
        assert running not in after
        assert (after[good[0]["id"]]["status"], after[good[0]["id"]]["error"]) == ("interrupted", SUPERSEDED)
        assert after[stale["id"]]["status"] == "finished" and after[stale["id"]]["error"] is None
        assert snap.read_text().splitlines()[1] == before[1]  # the untouched run: its line as committed
    out = capsys.readouterr().out
    assert "1 still running left out" in out and "0 runs added, 0 changed" in out, out
    imported = Registry(str(tmp_path / "all.sqlite"))  # the merged snapshot is a valid snapshot
    assert imported.import_jsonl(snap)["added"] == 5


def test_merge_refuses_a_bad_snapshot_and_writes_nothing(tmp_path, capsys):
    """`suite results merge` into a snapshot with a bad line, into a folder, into a missing folder -> exit 2 naming
    the file and line (or the folder), the snapshot unchanged; into a snapshot not there yet -> created"""
    good = _good_rows(tmp_path, n=2)
    src = Registry(str(tmp_path / "src.sqlite"))
    snap = _write(tmp_path / "snap.jsonl", [good[0], {**good[1], "seed": "abc"}])
    text = snap.read_text()
    assert main(["results", "merge", str(snap), "--registry", src.url]) == 2
    err = capsys.readouterr().err
    assert f"{snap}, line 2" in err and "nothing merged" in err, err
    assert snap.read_text() == text
    for where, says in ((tmp_path, "it is a folder"), (tmp_path / "no" / "s.jsonl", "not found")):
        assert main(["results", "merge", str(where), "--registry", src.url]) == 2
        assert says in capsys.readouterr().err
    fresh = tmp_path / "fresh.jsonl"
    assert main(["results", "merge", str(fresh), "--registry", src.url]) == 0
    assert [json.loads(line)["id"] for line in fresh.read_text().splitlines()] == [r["id"] for r in good]


def test_disk_full_while_merging_into_a_snapshot(tmp_path, capsys):
    """the disk fills while `suite results merge` writes the merged snapshot -> exit 2 naming the file; the snapshot
    as it was and no temporary file left"""
    from tests.reliability.limits import file_size_limit

    db = tmp_path / "r.sqlite"
    Registry(str(db)).import_jsonl(_big_snapshot(tmp_path / "big.jsonl", 800))
    (tmp_path / "src").mkdir()
    snap = _write(tmp_path / "snap.jsonl", _good_rows(tmp_path / "src", n=2))
    before = snap.read_bytes()
    with file_size_limit(40_000):  # above SQLite's 32 KiB shared-memory file, below the merged snapshot
        rc = main(["results", "merge", str(snap), "--registry", str(db)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "snap.jsonl" in err and "File too large" in err and err.count("\n") == 0, err
    assert snap.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("snap", ".snap"))) == ["snap.jsonl"]
