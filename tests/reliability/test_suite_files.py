"""Benchmark suite files (`suite bench run <file>`) and config YAML files with values a runner would only trip over
later: every one is refused when the file is loaded, with one line naming the file, the job group and the key;
nothing is run or written. A later stage whose earlier stage failed is not started; an earlier stage's lost output is
rebuilt before a later stage reads it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite
from benchmarks.runner.plan import Runner
from suite.cli import main


def _suite(tmp_path: Path, group: dict, name: str = "s") -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "jobs": [{"frontend": "graph", "command": "tu", **group}]}))
    return p


BAD_GROUPS = {
    "empty grid list": ({"grid": {"dataset": []}}, r"grid.*dataset.*empty"),
    "empty seeds": ({"seeds": []}, r"seeds.*empty"),
    "seed not an int": ({"seeds": [0, "one"]}, r"seeds.*'one'"),
    "stage a word": ({"stage": "late"}, r"stage.*'late'"),
    "stage a list": ({"stage": [1]}, r"stage.*\[1\]"),
    "negative stage": ({"stage": -1}, r"stage.*-1"),
    "timeout a word": ({"timeout": "10m"}, r"timeout.*'10m'"),
    "arg a mapping": ({"args": {"epochs": {"a": 1}}}, r"args.*epochs.*mapping"),
    "unknown placeholder": ({"args": {"out": "runs/{nope}"}}, r"out.*\{nope\}"),
    "seed flag not a flag": ({"seed_flag": "seed"}, r"seed_flag.*'seed'"),
    "frontend not a word": ({"frontend": ["graph"]}, r"frontend.*\['graph'\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_GROUPS))
def test_suite_group_with_a_bad_value(tmp_path, capsys, monkeypatch, case):
    """a suite job group with an empty grid list or seeds, a seed/stage/timeout of the wrong type, a mapping as an
    arg, an unknown {placeholder} -> exit 2, one line naming the file, group and key; no job started, no log folder
    (they gave zero jobs silently, a traceback mid-run, or a failed job)"""
    group, match = BAD_GROUPS[case]
    path = _suite(tmp_path, group)
    with pytest.raises(ValueError, match=match) as exc:
        load_suite(path)
    assert str(path) in str(exc.value) and "job group 0" in str(exc.value)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "run", str(path), "--registry", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert not (tmp_path / "results").exists() and not (tmp_path / "r.sqlite").exists()


def test_suite_with_an_unknown_frontend_or_command(tmp_path, capsys, monkeypatch):
    """`suite bench run` on a suite naming front-end 'grpah' or command 'tuu' -> exit 2 before any job starts, naming
    the file, the group and the known choices (each job used to start and fail)"""
    monkeypatch.chdir(tmp_path)
    for group, match in (({"frontend": "grpah"}, r"frontend 'grpah'.*graph"), ({"command": "tuu"}, r"command 'tuu'.*tu")):
        path = _suite(tmp_path, group)
        assert main(["bench", "run", str(path), "--registry", str(tmp_path / "r.sqlite")]) == 2
        err = capsys.readouterr().err.strip()
        import re
        assert re.search(match, err) and str(path) in err and err.count("\n") == 0, err
        assert not (tmp_path / "results").exists()


def test_suite_group_with_an_unknown_key(tmp_path, capsys, monkeypatch):
    """a suite job group with a misspelt key (`seed: [0, 1]` for `seeds`, `gird:` for `grid`) -> exit 2, one line
    naming the file, the group and the unknown key with the known ones; no job started, no log folder (the key would
    otherwise be dropped: one job with no seed, or no grid)"""
    monkeypatch.chdir(tmp_path)
    for group, key in (({"seed": [0, 1]}, "seed"), ({"gird": {"dataset": ["MUTAG"]}}, "gird")):
        path = _suite(tmp_path, group)
        with pytest.raises(ValueError, match=rf"job group 0.*unknown key.*'{key}'.*seeds") as exc:
            load_suite(path)
        assert str(path) in str(exc.value)
        _refused_on_the_command_line(path, key, tmp_path, capsys)


def _refused_on_the_command_line(path, key, tmp_path, capsys):
    """`suite bench run` on the file: exit 2, one line naming the file and the key, no traceback, nothing written"""
    assert main(["bench", "run", str(path), "--registry", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and str(path) in err and key in err, err
    assert not (tmp_path / "results").exists() and not (tmp_path / "r.sqlite").exists()


def test_suite_with_an_unknown_top_level_key(tmp_path, capsys, monkeypatch):
    """a suite file with a top-level key beside name and jobs (`seeds: [0, 1]` meant for every group, `job:` for
    `jobs:`) -> exit 2, one line naming the file and the key and saying that only name and jobs are read (`seeds:`
    was silently ignored: every group ran without seeds)"""
    monkeypatch.chdir(tmp_path)
    group = {"frontend": "graph", "command": "tu"}
    for spec, key in (({"name": "s", "seeds": [0, 1], "jobs": [group]}, "seeds"),
                      ({"name": "s", "jobs": [group], "job": [group]}, "job")):
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(spec))
        with pytest.raises(ValueError, match=rf"unknown top-level key.*'{key}'.*name.*jobs") as exc:
            load_suite(path)
        assert str(path) in str(exc.value)
        _refused_on_the_command_line(path, key, tmp_path, capsys)


class _ExitRunner(Runner):
    """Jobs whose command is ``python -c 'exit(<code>)'``: the ``code`` arg of the job."""

    def command(self, job):
        return [sys.executable, "-c", f"raise SystemExit({dict(job.args)['code']})"]


def test_later_stage_after_a_failed_stage(tmp_path, capsys):
    """a suite whose stage-1 jobs use what stage 0 makes, and a stage-0 job fails -> the stage-1 jobs are not started
    but reported 'blocked' naming the failed stage; the runner exits 1; a fixed re-run runs them"""
    p = tmp_path / "staged.yaml"
    p.write_text(yaml.safe_dump({"name": "staged", "jobs": [
        {"frontend": "probe", "command": "make", "stage": 0, "grid": {"code": [0, 1]}},
        {"frontend": "probe", "command": "use", "stage": 1, "grid": {"code": [0]}, "args": {"x": 1}}]}))
    _, jobs = load_suite(p)
    db = str(tmp_path / "r.sqlite")
    runner = _ExitRunner(db, log_dir=tmp_path / "logs")
    counts = runner.run(jobs)
    assert counts == {"finished": 1, "failed": 1, "blocked": 1}, counts
    out = capsys.readouterr().out
    assert "[blocked]" in out and "stage 0" in out
    from suite.registry import Registry

    later = [j for j in jobs if j.stage == 1][0]
    assert Registry(db).job_status(later.hash) is None  # never claimed: a later run starts it
    fixed = [j for j in jobs if dict(j.args)["code"] == 0]
    assert _ExitRunner(db, log_dir=tmp_path / "logs").run(fixed) == {"skipped": 1, "finished": 1}


class _MakeRunner(Runner):
    """Jobs that create their ``out`` folder (``models:NAME`` resolved as the runner resolves it) and exit 0."""

    def command(self, job):
        return [sys.executable, "-c", f"import pathlib; pathlib.Path({str(job.output())!r}).mkdir(parents=True)"]


def test_lost_output_of_an_earlier_stage_is_rebuilt(tmp_path, monkeypatch, capsys):
    """a stage-0 job finished and its output folder (models:NAME) was deleted; a stage-1 job that reads it has still
    to run -> the stage-0 job is reported '[rebuild]' naming the folder and runs again before stage 1 (a dry run says
    so and changes nothing); with its folder present, with no later job left to run, or where no later job names the
    folder (a finished job whose output nothing reads), a finished job is skipped as before"""
    monkeypatch.setenv("SUITE_MODELS", str(tmp_path / "models"))
    p = tmp_path / "staged.yaml"
    p.write_text(yaml.safe_dump({"name": "staged", "jobs": [
        {"frontend": "probe", "command": "make", "stage": 0, "args": {"out": "models:enc-{seed}"}, "seeds": [0]},
        {"frontend": "probe", "command": "use", "stage": 1,
         "args": {"init": "models:enc-0", "out": str(tmp_path / "use-{seed}")}, "seeds": [0, 1]}]}))
    _, jobs = load_suite(p)
    make, use0, use1 = jobs
    db, logs = str(tmp_path / "r.sqlite"), tmp_path / "logs"
    assert _MakeRunner(db, log_dir=logs).run([make, use0]) == {"finished": 2}
    enc = tmp_path / "models" / "enc-0"
    assert make.output() == enc and enc.is_dir()
    capsys.readouterr()
    enc.rmdir()
    assert _MakeRunner(db, log_dir=logs).run([make, use0]) == {"skipped": 2}  # nothing left to run: not rebuilt
    assert not enc.exists() and "[rebuild]" not in capsys.readouterr().out
    dry = _MakeRunner(db, log_dir=logs, dry_run=True)
    assert dry.run(jobs) == {"dry-run": 2, "skipped": 1}
    out = capsys.readouterr().out
    assert f"[rebuild] {make.label()}" in out and str(enc) in out and not enc.exists()
    assert _MakeRunner(db, log_dir=logs).run(jobs) == {"finished": 2, "skipped": 1}
    assert enc.is_dir() and "[rebuild]" in capsys.readouterr().out
    from suite.registry import Registry

    assert Registry(db).job_status(make.hash) == "finished"
    assert _MakeRunner(db, log_dir=logs).run(jobs) == {"skipped": 3}
    enc.rmdir()  # gone again; a later job still to run that names it -> rebuilt, one that does not -> not
    later = {"frontend": "probe", "command": "use", "stage": 1, "seeds": [5]}
    _, (reads,) = load_suite(_one_job_suite(tmp_path, "reads", {**later, "args": {"init": "models:enc-0", "out": "x"}}))
    _, (other,) = load_suite(_one_job_suite(tmp_path, "other", {**later, "args": {"out": "y"}}))
    runner = _MakeRunner(db, log_dir=logs)
    assert runner.lost_outputs([make, use0, use1, reads], Registry(db)) == {make.hash: enc}
    assert runner.lost_outputs([make, use0, use1, other], Registry(db)) == {}


PROBE = """
import json, os, sys
from pathlib import Path
from suite.registry import Registry
from suite.inputs import input_identity
cmd, args, here = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
reg = Registry(os.environ["SUITE_REGISTRY"])
if cmd == "make":  # an encoder: its files from content.txt, its training loss per epoch from trace.json
    with reg.run(modality="probe", task="make", dataset="d", loss="l", config=args) as run:
        for epoch, v in enumerate(json.loads((here / "trace.json").read_text()), 1):
            run.log("loss", v, split="train", step=epoch)
        exp = Path(args["out"]) / "export"
        exp.mkdir(parents=True, exist_ok=True)
        (exp / "model.safetensors").write_text((here / "content.txt").read_text())
        (exp / "run.json").write_text(json.dumps({"run_id": run.id, "note": str(os.getpid())}))
else:  # reads it, recording what it read as the run owner does (or nothing: a run from before inputs were recorded)
    inputs = {"inputs": {"init": input_identity(args["init"])}} if args.get("record", True) else {}
    with reg.run(modality="probe", task="use", dataset="d", loss="l", config=args, run_options=inputs):
        pass
"""


class _ProbeRunner(Runner):
    """Jobs run by :data:`PROBE` (``make`` writes an export folder, ``use`` reads one), with their real registry rows."""

    def command(self, job):
        here = Path(self.log_dir).parent
        return [sys.executable, str(here / "probe.py"), job.command, json.dumps(dict(job.values())), str(here)]


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_a_job_whose_input_changed_runs_again(tmp_path, monkeypatch, capsys):
    """a stage-1 job read an encoder made by a stage-0 job; the encoder is then made again -> with the same files (and,
    for a run that recorded no digest, the same training loss at every epoch) every job is skipped; with other files
    the jobs that read it are reported '[rerun]' naming the folder (a dry run changes nothing), run again and their
    old runs are superseded, then skipped; an encoder rebuilt in the same call (its folder lost, a new seed to run)
    with other files makes the finished readers of the next stage run again in that call"""
    import json

    from suite.registry import Registry
    from suite.registry.jobs import SUPERSEDED

    monkeypatch.chdir(tmp_path)
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "content.txt").write_text("weights A")
    (tmp_path / "trace.json").write_text("[2.0, 1.5]")
    use = {"frontend": "probe", "command": "use", "stage": 1, "args": {"init": "enc"}}
    p = tmp_path / "staged.yaml"
    p.write_text(yaml.safe_dump({"name": "staged", "jobs": [
        {"frontend": "probe", "command": "make", "stage": 0, "args": {"out": "enc"}, "seeds": [0]},
        {**use, "seeds": [0, 1]}, {**use, "args": {"init": "enc", "record": False}, "seeds": [0]}]}))
    _, jobs = load_suite(p)
    make, readers = jobs[0], jobs[1:]
    db, logs = str(tmp_path / "r.sqlite"), tmp_path / "logs"
    reg = Registry(db)

    def remake(content: str, trace: str) -> None:  # the encoder made again, as in another tree whose runs are merged
        (tmp_path / "content.txt").write_text(content)
        (tmp_path / "trace.json").write_text(trace)
        subprocess.run([sys.executable, "probe.py", "make", json.dumps(dict(make.values())), str(tmp_path)], check=True,
                       env={**os.environ, "SUITE_REGISTRY": db, "SUITE_CONFIG_HASH": make.hash})

    assert _ProbeRunner(db, log_dir=logs).run(jobs) == {"finished": 4}
    assert _ProbeRunner(db, log_dir=logs).run(jobs) == {"skipped": 4}
    remake("weights A", "[2.0, 1.5]")  # the same files and training: nothing runs again
    assert _ProbeRunner(db, log_dir=logs).run(jobs) == {"skipped": 4}
    assert "[rerun]" not in capsys.readouterr().out
    remake("weights B", "[2.0, 1.25]")
    assert _ProbeRunner(db, log_dir=logs, dry_run=True).run(jobs) == {"skipped": 1, "dry-run": 3}
    out = capsys.readouterr().out
    assert all(f"[rerun] {j.label()}" in out for j in readers) and out.count("its input enc has changed") == 2
    assert "no digest of what it read" in out
    old = {r["id"] for r in reg.runs(task="use")}
    assert _ProbeRunner(db, log_dir=logs).run(jobs) == {"skipped": 1, "finished": 3}
    assert {r["status"] for r in reg.runs(task="use") if r["id"] in old} == {"interrupted"}
    assert {r["error"] for r in reg.runs(task="use") if r["id"] in old} == {SUPERSEDED}
    assert _ProbeRunner(db, log_dir=logs).run(jobs) == {"skipped": 4}
    # rebuilt within the call: its folder gone while a new reader is still to run; other files this time
    shutil.rmtree(tmp_path / "enc")
    (tmp_path / "content.txt").write_text("weights C")
    (tmp_path / "trace.json").write_text("[2.0, 1.0]")
    _, (new,) = load_suite(_one_job_suite(tmp_path, "new", {**use, "seeds": [2]}))
    capsys.readouterr()
    assert _ProbeRunner(db, log_dir=logs).run([*jobs, new]) == {"finished": 5}
    out = capsys.readouterr().out
    assert f"[rebuild] {make.label()}" in out and all(f"[rerun] {j.label()}" in out for j in readers)
    assert "done" in out.splitlines()[-1] or "5/5 done" in out
    assert _ProbeRunner(db, log_dir=logs).run([*jobs, new]) == {"skipped": 5}


def _one_job_suite(tmp_path, name, job):
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "jobs": [job]}))
    return p


# ----------------------------------------------------------------------------- config YAML files (suite.config)

@pytest.mark.parametrize("text,match", [
    ("epochs: ten\n", r"epochs.*int.*'ten'"),
    ("lr: fast\n", r"lr.*float.*'fast'"),
    ("loss_hparams: [1, 2]\n", r"loss_hparams.*mapping"),
    ("mode: supervised\n", r"mode.*'unsup'.*'supervised'"),
    ("bf16: maybe\n", r"bf16.*bool.*'maybe'"),
    ("batch_size: true\n", r"batch_size.*int.*True"),
])
def test_config_yaml_value_of_the_wrong_type(tmp_path, text, match):
    """a config YAML (`--config x.yaml`) with epochs: ten, lr: fast, a list for loss_hparams, mode: supervised ->
    ValueError naming the file, the key and the value (they reached the run and failed there, or not at all)"""
    from suite.config import load_config
    from text.methods.simcse import SimCSEConfig

    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ValueError, match=match) as exc:
        load_config(SimCSEConfig, f)
    assert str(f) in str(exc.value)


def test_config_yaml_valid_values_are_not_refused(tmp_path):
    """a config YAML with lr: 1 (an int for a float), epochs: 2, dropout: 0, a mapping and a Literal -> loaded with
    those values (the type checks refuse nothing valid; ints stay as written, so recorded configs keep their hash)"""
    from suite.config import load_config
    from text.methods.simcse import SimCSEConfig

    f = tmp_path / "c.yaml"
    f.write_text("lr: 1\nepochs: 2\ndropout: 0\nloss_hparams: {temperature: 0.1}\nmode: sup\n")
    cfg = load_config(SimCSEConfig, f)
    assert (cfg.lr, cfg.epochs, cfg.dropout, cfg.mode, cfg.loss_hparams) == (1, 2, 0, "sup", {"temperature": 0.1})


@pytest.mark.parametrize("cls_path,text,key", [
    ("text.methods.simcse:SimCSEConfig", "epochz: 3\n", "epochz"),
    ("suite.gmm:GMMConfig", "epochs: 10\n", "epochs"),
    ("text.mlm:MLMConfig", "stepz: 10\n", "stepz"),
])
def test_config_yaml_with_an_unknown_key(tmp_path, cls_path, text, key):
    """a config YAML (`suite text train --config x.yaml`, likewise `text mlm` and `vision gmm`) with a key its
    config class does not have -> ValueError naming the file and the key (it named the key and the class, not the
    file); an unknown key given as an override names no file"""
    import importlib

    from suite.config import load_config

    module, name = cls_path.split(":")
    cls = getattr(importlib.import_module(module), name)
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ValueError, match=rf"unknown config key.*'{key}'") as exc:
        load_config(cls, f)
    assert str(f) in str(exc.value)
    with pytest.raises(ValueError, match=rf"unknown config key.*'{key}'") as exc:
        load_config(cls, overrides={key: 1})
    assert str(f) not in str(exc.value)
