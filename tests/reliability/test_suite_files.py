"""Benchmark suite files (`suite bench run <file>`) and config YAML files with values a runner would only trip over
later: every one is refused when the file is loaded, with one line naming the file, the job group and the key;
nothing is run or written. A later stage whose earlier stage failed is not started; an earlier stage's lost output is
rebuilt before a later stage reads it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.runner.suitefile import load_suite
from benchmarks.runner.run import Runner
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
