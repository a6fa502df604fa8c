"""Reliability probes of the results registry (suite/registry/) and `suite results`: runs whose process is gone,
corrupt or unopenable databases, unknown ids, exports to bad paths, old databases."""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap

import pytest
import sqlalchemy as sa

from suite.cli import main
from suite.registry import Registry, RegistryError, jobs_t, runs_t


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _set(reg: Registry, run_id: str, **values) -> None:
    with reg.engine.begin() as conn:
        conn.execute(sa.update(runs_t).where(runs_t.c.id == run_id).values(**values))


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_sigkilled_run_is_reaped_as_interrupted(tmp_path):
    """a run left 'running' by a SIGKILLed process -> `suite results reap` marks it interrupted; live runs and runs of
    other hosts are left alone"""
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    ids = [reg.start_run(modality="m", task="t", dataset="d", loss="l", seed=s) for s in range(3)]
    _set(reg, ids[0], pid=_dead_pid())  # killed
    _set(reg, ids[2], pid=_dead_pid(), host=socket.gethostname() + "-elsewhere")  # cannot be checked from here
    assert reg.reap() == {"runs": 1, "jobs": 0}
    assert [reg.get(i)["status"] for i in ids] == ["interrupted", "running", "running"]
    assert "process is gone" in reg.get(ids[0])["error"] and reg.get(ids[0])["ended_at"]
    assert reg.reap() == {"runs": 0, "jobs": 0}


@pytest.mark.parametrize("resume", [False, True])
def test_sigterm_just_after_the_row_is_written_marks_it_interrupted(tmp_path, resume):
    """SIGTERM just after `Registry.run` wrote its 'running' row, before its handler is set -> run marked interrupted
    (before, the process died in that gap and left the row 'running': a killed benchmark runner's job hit it under
    load), as for a SIGTERM during the run"""
    db = str(tmp_path / "r.sqlite")
    code = textwrap.dedent(f"""
        import os, signal, sys
        from suite.registry import Registry
        reg = Registry({db!r})
        resume = {resume!r}
        rid = reg.start_run(modality="m", task="t", dataset="d", loss="l") if resume else None
        if resume:
            reg.finish(rid, "interrupted")
        write = reg.reopen_run if resume else reg.start_run
        def write_then_term(*a, **kw):
            out = write(*a, **kw)
            os.kill(os.getpid(), signal.SIGTERM)  # the row says running, the handler is not installed yet
            return out
        setattr(reg, "reopen_run" if resume else "start_run", write_then_term)
        try:
            with reg.run(resume_id=rid, modality="m", task="t", dataset="d", loss="l"):
                print("body ran")
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert "body ran" not in proc.stdout
    runs = Registry(db).runs()
    assert [r["status"] for r in runs] == ["interrupted"] and runs[0]["error"] == "KeyboardInterrupt/SIGTERM"


def test_a_second_stop_signal_while_the_interrupted_end_is_written(tmp_path):
    """SLURM's time-limit warning (SIGUSR2) and the runner's SIGTERM reaching a run one after the other, the second
    while the first's 'interrupted' end is being written -> the row is 'interrupted', naming the first signal (before,
    the second raised inside the write and left the row 'running' though the command had printed its interrupted line;
    found under a real SLURM time-limit signal)"""
    db = str(tmp_path / "r.sqlite")
    code = textwrap.dedent(f"""
        import os, signal, sys
        from suite.registry import Registry
        reg = Registry({db!r})
        finish = reg.finish
        def finish_under_a_second_signal(*a, **kw):
            os.kill(os.getpid(), signal.SIGTERM)
            return finish(*a, **kw)
        reg.finish = finish_under_a_second_signal
        try:
            with reg.run(modality="m", task="t", dataset="d", loss="l"):
                os.kill(os.getpid(), signal.SIGUSR2)
        except KeyboardInterrupt as exc:
            print(exc)
            sys.exit(130)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and "SIGUSR2, SLURM's warning" in proc.stdout, proc.stdout + proc.stderr
    runs = Registry(db).runs()
    assert [(r["status"], r["error"]) for r in runs] == [("interrupted", "KeyboardInterrupt/SIGUSR2")]


def test_an_interrupt_as_sigterm_is_held_leaves_it_unblocked(tmp_path, monkeypatch):
    """a KeyboardInterrupt raised just as `Registry.run` blocks SIGTERM (the handler of a signal that had already
    arrived runs there) -> it propagates and SIGTERM is not left blocked (before, it stayed blocked in the process and
    in every process it started, whose SIGTERM then did nothing)"""
    real = signal.pthread_sigmask

    def raising(how, mask):
        out = real(how, mask)
        if how == signal.SIG_BLOCK and signal.SIGTERM in mask:
            raise KeyboardInterrupt("arrived as the mask changed")
        return out

    reg = Registry(str(tmp_path / "r.sqlite"))
    monkeypatch.setattr(signal, "pthread_sigmask", raising)
    try:
        with pytest.raises(KeyboardInterrupt):
            with reg.run(modality="m", task="t", dataset="d", loss="l"):
                pass
        monkeypatch.undo()
        assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        real(signal.SIG_UNBLOCK, {signal.SIGTERM})  # this worker's later tests start processes


def test_results_list_reaps_and_reap_command_reports(tmp_path, capsys):
    """`suite results list` with a dead 'running' run -> listed as interrupted (with a note); `suite results reap`
    prints what it marked"""
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    rid = reg.start_run(modality="m", task="t", dataset="d", loss="l")
    _set(reg, rid, pid=_dead_pid())
    assert main(["results", "list", "--registry", db]) == 0
    out = capsys.readouterr()
    assert "| interrupted |" in out.out and "1 runs" in out.err
    rid2 = reg.start_run(modality="m", task="t", dataset="d", loss="l")
    _set(reg, rid2, pid=_dead_pid())
    assert main(["results", "reap", "--registry", db]) == 0
    assert "reaped: 1 runs" in capsys.readouterr().out and reg.get(rid2)["status"] == "interrupted"


def test_dead_benchmark_job_is_reaped(tmp_path):
    """a benchmark job 'running' whose runner and job process are both gone -> reaped as interrupted"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    assert reg.claim_job("h", "cmd")
    with reg.engine.begin() as conn:
        conn.execute(sa.update(jobs_t).where(jobs_t.c.hash == "h").values(pid=_dead_pid(), child_pid=_dead_pid()))
    assert reg.reap() == {"runs": 0, "jobs": 1} and reg.job_status("h") == "interrupted"


def test_corrupt_registry_is_one_line_naming_the_file(tmp_path, capsys):
    """a registry file that is not a database -> RegistryError / exit 2 with one line naming the path"""
    db = tmp_path / "r.sqlite"
    db.write_bytes(b"this is not sqlite " * 100)
    with pytest.raises(RegistryError, match=f"cannot open the registry {db}: file is not a database"):
        Registry(str(db))
    assert main(["results", "list", "--registry", str(db)]) == 2
    assert str(db) in _one_line_error(capsys)


def test_unopenable_registry_is_one_line_naming_the_path(tmp_path, capsys):
    """a registry path under a regular file (cannot be created) -> exit 2, one line naming the path"""
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "r.sqlite"
    assert main(["results", "list", "--registry", str(bad)]) == 2
    assert str(bad) in _one_line_error(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
def test_read_only_registry_write_is_one_line(tmp_path):
    """a read-only registry -> writing a run fails with a RegistryError naming the path, not a raw SQL traceback"""
    db = tmp_path / "r.sqlite"
    Registry(str(db))
    os.chmod(tmp_path, 0o555)
    os.chmod(db, 0o444)
    try:
        with pytest.raises(RegistryError, match=str(db)):
            Registry(str(db)).start_run(modality="m", task="t", dataset="d", loss="l")
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(db, 0o644)


def test_read_only_registry_url_write_is_one_line(tmp_path, capsys):
    """a registry opened read-only (SQLite mode=ro URL) -> reading works, writing a run fails with one line naming it"""
    db = tmp_path / "r.sqlite"
    Registry(str(db)).start_run(modality="m", task="t", dataset="d", loss="l")
    url = f"sqlite:///file:{db}?mode=ro&uri=true"
    ro = Registry(url)
    assert len(ro.runs()) == 1
    assert main(["results", "list", "--registry", url]) == 0 and "| running |" in capsys.readouterr().out
    with pytest.raises(RegistryError, match="attempt to write a readonly database") as exc:
        ro.start_run(modality="m", task="t", dataset="d", loss="l")
    assert str(db) in str(exc.value) and "\n" not in str(exc.value)


def test_write_error_is_a_registry_error(tmp_path):
    """a database error during a write (here: a table dropped under the registry) -> RegistryError naming the
    registry, one line"""
    db = tmp_path / "r.sqlite"
    reg = Registry(str(db))
    con = sqlite3.connect(db)
    con.execute("DROP TABLE metrics")
    con.close()
    rid = reg.start_run(modality="m", task="t", dataset="d", loss="l")
    with pytest.raises(RegistryError, match=rf"registry {db}: no such table: metrics") as exc:
        reg.log_metric(rid, "acc", 0.5)
    assert "\n" not in str(exc.value)


def test_show_unknown_id_is_a_clear_error(tmp_path, capsys):
    """`suite results show <unknown id>` -> exit 2, 'no run with id ...' naming the registry (no KeyError)"""
    db = str(tmp_path / "r.sqlite")
    Registry(db)
    assert main(["results", "show", "nosuchid", "--registry", db]) == 2
    err = _one_line_error(capsys)
    assert "no run with id 'nosuchid'" in err and db in err


def test_export_to_a_bad_path_is_a_clear_error(tmp_path, capsys):
    """`suite results export --out <missing dir>/x.csv` or --out <a directory> -> exit 2, one line naming the path"""
    db = str(tmp_path / "r.sqlite")
    Registry(db)
    for out in (tmp_path / "missing" / "x.csv", tmp_path):
        assert main(["results", "export", "--format", "csv", "--out", str(out), "--registry", db]) == 2
        err = _one_line_error(capsys)
        assert f"cannot write the export to {out}" in err


def test_old_jobs_table_gets_the_child_pid_column(tmp_path):
    """a registry whose jobs table predates child_pid -> migrated on open; claims and reap work"""
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE jobs (hash VARCHAR(64) PRIMARY KEY, status VARCHAR(16) NOT NULL, command TEXT, "
                "host VARCHAR(128), pid INTEGER, started_at VARCHAR(32), ended_at VARCHAR(32))")
    con.execute(f"INSERT INTO jobs VALUES ('old', 'running', 'c', '{socket.gethostname()}', {_dead_pid()}, NULL, NULL)")
    con.commit()
    con.close()
    reg = Registry(str(db))
    assert reg.job("old")["child_pid"] is None
    assert reg.reap()["jobs"] == 1
    assert reg.claim_job("old", "c")
    reg.set_job_child("old", os.getpid())
    assert reg.job("old")["child_pid"] == os.getpid()


def test_sweep_resumed_on_an_imported_snapshot_skips_its_finished_jobs(tmp_path):
    """a registry built by importing a .jsonl snapshot (runs only, no jobs table) -> the runner's claim skips a job
    whose imported runs all finished (not re-run, its runs not superseded); a job with an interrupted run is
    claimable again; importing twice adds nothing"""
    a = Registry(str(tmp_path / "a.sqlite"))
    for h, statuses in (("done", ["finished", "finished"]), ("half", ["finished", "interrupted"])):
        assert a.claim_job(h, "cmd")
        for st in statuses:
            rid = a.start_run(modality="m", task="t", dataset="d", loss="l", cfg_hash=h)
            a.finish(rid, st)
        a.finish_job(h, "finished" if h == "done" else "interrupted")
    snap = tmp_path / "snap.jsonl"
    snap.write_text(a.export_jsonl())
    b = Registry(str(tmp_path / "b.sqlite"))
    assert b.import_jsonl(snap) == {"added": 4, "skipped": 0}
    assert b.job_status("done") == "finished" and not b.claim_job("done", "cmd")
    assert [r["status"] for r in b.runs(config_hash="done")] == ["finished", "finished"]
    assert b.claim_job("half", "cmd")
    assert b.import_jsonl(snap) == {"added": 0, "skipped": 4}


def test_imported_job_that_was_run_again_is_finished_and_keeps_its_duration(tmp_path):
    """a job run again (its first runs superseded: interrupted, SUPERSEDED) whose new run finished, exported and
    imported -> the import records the job finished (it was re-run: 37 Gaussian-mixture and 5 TU jobs of the
    snapshot were planned again), spanning its runs' first start to last end (the runner's ETA; it read 0 s)"""
    import sqlalchemy as sa

    from suite.registry import runs_t
    from suite.registry.jobs import SUPERSEDED

    a = Registry(str(tmp_path / "a.sqlite"))
    assert a.claim_job("again", "vision gmm --seed 0")
    a.finish(a.start_run(modality="m", task="t", dataset="d", loss="l", cfg_hash="again"), "finished")
    a.finish_job("again", "finished")
    assert a.claim_job("again", "vision gmm --seed 0", rerun=True)
    new = a.start_run(modality="m", task="t", dataset="d", loss="l", cfg_hash="again")
    a.finish(new, "finished")
    with a.engine.begin() as conn:
        conn.execute(sa.update(runs_t).where(runs_t.c.id == new).values(
            started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T00:01:40+00:00"))
    assert sorted((r["status"], r["error"]) for r in a.runs(config_hash="again")) == [
        ("finished", None), ("interrupted", SUPERSEDED)]
    snap = tmp_path / "snap.jsonl"
    snap.write_text(a.export_jsonl())
    b = Registry(str(tmp_path / "b.sqlite"))
    b.import_jsonl(snap)
    assert b.job_status("again") == "finished" and not b.claim_job("again", "cmd")
    assert b.imported_job_seconds(["again", "other"]) == {"again": 100.0}
    assert b.job_durations() == {}  # an imported row names no command: the runner keys it by the suite's job
