"""Reliability round six (issue 69): options parsed strictly before any work (class B: a key given twice, NaN and
infinity, options that must be positive, unknown keys), a run's identity covering the data it read (class A), and the
new code paths under faults (class C: two processes building one cache, a tracker's writer killed). Each docstring
says what is tried, what must happen, and what happened before."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suite.cli import main
from suite.config import load_config
from tests.conftest import data_or_skip
from tests.reliability.test_round_four import _one_line, _rows, tu  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


def _code(argv: list[str]) -> int:
    """``suite ARGV``'s exit status (argparse's refusals exit through SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

# ----------------------------------------------------------------------------- B. a key given twice


def test_loss_hparam_given_twice_is_refused(tu, capsys):  # noqa: F811
    """`suite graph tu --loss infonce --loss-hparams temperature=0.1,temperature=5` -> exit 2, one line naming the
    key 'temperature', no run (before: trained with temperature 5 and said nothing)"""
    args, db, _ = tu
    assert _code([*args, "--loss", "infonce", "--loss-hparams", "temperature=0.1,temperature=5"]) == 2
    err = _one_line(capsys)
    assert "'temperature'" in err and "twice" in err and "--loss-hparams" in err, err
    assert _rows(db) == []


def test_config_file_key_given_twice_is_refused(tmp_path):
    """a config YAML with `epochs:` twice, and a JSON one with "lr" twice -> ValueError naming the file, the key and
    its line (before: the last one won, silently)"""
    from graph.tu.graphcl import TUConfig

    y = tmp_path / "tu.yaml"
    y.write_text("dataset: MUTAG\nepochs: 3\nhidden: 8\nepochs: 30\n")
    with pytest.raises(ValueError, match=r"tu\.yaml: not valid YAML at line 4 \(key 'epochs' is given twice\)"):
        load_config(TUConfig, y)
    j = tmp_path / "tu.json"
    j.write_text('{"lr": 0.01, "loss_hparams": {"temperature": 0.1, "temperature": 0.2}}')
    with pytest.raises(ValueError, match=r"tu\.json: .*key 'temperature' is given twice"):
        load_config(TUConfig, j)


SUITE = """\
name: twice
jobs:
  - frontend: graph
    command: tu
    args: {{dataset: MUTAG, epochs: 1{extra}}}
{tail}"""


@pytest.mark.parametrize("extra,tail,needle", [
    (", epochs: 2", "", "key 'epochs' is given twice"),  # twice in one args mapping (YAML flow style)
    ("", "    seeds: [0]\n    seeds: [1, 2]\n", "key 'seeds' is given twice"),  # a group key twice
    ("", "name: again\n", "key 'name' is given twice"),  # a top-level key twice
])
def test_suite_file_key_given_twice_is_refused(tmp_path, extra, tail, needle):
    """a suite file with a key twice (in a job's args, in a group, at the top level, in both grid and args) ->
    ValueError naming the file and the key, before any job (before: the last one, or the grid's, won silently)"""
    from benchmarks.runner.suitefile import load_suite

    p = tmp_path / "twice.yaml"
    p.write_text(SUITE.format(extra=extra, tail=tail))
    with pytest.raises(ValueError, match=needle) as exc:
        load_suite(p)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_a_grid_key_replaces_the_same_arg(tmp_path):
    """a grid key that is also an anchored arg -> the grid's values make the jobs (a group's args are often a YAML anchor
    shared with other groups, and its grid varies one of them: text-sts, text-mlm-diagnose and vision-cifar-* do this;
    refusing it left them unloadable, and suite bench report with them)"""
    from benchmarks.runner.suitefile import load_suite

    p = tmp_path / "anchor.yaml"
    p.write_text(SUITE.format(extra="", tail="    grid: {epochs: [1, 2]}\n"))
    _, jobs = load_suite(p)
    assert sorted(dict(j.args)["epochs"] for j in jobs) == [1, 2]


def test_json_suite_file_key_given_twice_is_refused(tmp_path):
    """a suite file written as JSON with "epochs" twice in a job's args -> ValueError naming the file and the key
    (before: the last one won)"""
    from benchmarks.runner.suitefile import load_suite

    p = tmp_path / "twice.json"
    p.write_text('{"name": "j", "jobs": [{"frontend": "graph", "command": "tu", '
                 '"args": {"epochs": 1, "epochs": 5}}]}')
    with pytest.raises(ValueError, match=r"twice\.json: .*key 'epochs' is given twice"):
        load_suite(p)


# ----------------------------------------------------------------------------- B. ranges: positive, finite

def test_knn_temperature_zero_is_refused():
    """`suite vision pretrain --knn-t 0` (and -0.1) -> one line naming knn_t and its range, before any data is read
    (before: a kNN accuracy computed from infinite votes)"""
    from vision.config import PretrainConfig

    for bad in (0.0, -0.1):
        with pytest.raises(ValueError, match=r"knn_t must be > 0, in \(0, inf\), got") as exc:
            load_config(PretrainConfig, overrides={"knn_t": bad})
        assert "\n" not in str(exc.value)


def test_knn_temperature_zero_on_the_command_line(tmp_path, monkeypatch, capsys):
    """`suite vision pretrain --knn-t 0` as a user types it -> exit 2, one line naming knn_t, nothing written
    (before: it trained and reported a kNN accuracy)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "r.sqlite"))
    assert _code(["vision", "pretrain", "--knn-t", "0", "--out", str(tmp_path / "run")]) == 2
    assert "knn_t must be > 0" in _one_line(capsys)
    assert not (tmp_path / "run").exists() and not (tmp_path / "r.sqlite").exists()


POSITIVE_CASES = [  # (config module, class, field, a bad value)
    ("vision.config", "PretrainConfig", "knn_k", 0), ("vision.config", "PretrainConfig", "epochs", -1),
    ("vision.config", "PretrainConfig", "batch_size", -1), ("vision.config", "PretrainConfig", "lr", -0.1),
    ("vision.config", "PretrainConfig", "iou_tau", 0.0), ("vision.config", "PretrainConfig", "eval_every", -1),
    ("graph.tu.graphcl", "TUConfig", "lr", 0.0), ("graph.tu.graphcl", "TUConfig", "epochs", 0),
    ("graph.tu.graphcl", "TUConfig", "batch_size", 0), ("graph.tu.graphcl", "TUConfig", "checkpoint_every", -1),
    ("text.methods.simcse", "SimCSEConfig", "lr", 0.0), ("text.methods.simcse", "SimCSEConfig", "max_length", 0),
    ("graph.mol.finetune", "FinetuneMolConfig", "epochs", 0),
]


@pytest.mark.parametrize("module,cls,name,bad", POSITIVE_CASES)
def test_options_that_must_be_positive(module, cls, name, bad):
    """every option that must be positive (temperatures, k, learning rates, epochs, batch sizes, intervals) at 0 or
    below -> one line naming the option and its range, from a flag or a config built in code (before: several trained,
    e.g. lr 0 for 20 epochs, or failed deep inside the run)"""
    import dataclasses
    import importlib

    from suite.train.folders import check_run_options

    config = getattr(importlib.import_module(module), cls)
    with pytest.raises(ValueError, match=rf"{name} must be > 0.*got {bad}") as exc:
        load_config(config, overrides={name: bad})
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match=name):  # a config's own check (__post_init__) may say it first
        check_run_options(dataclasses.replace(config(), **{name: bad}))


def test_zero_that_means_something_is_taken():
    """0 where the option says what it means (checkpoint_every 0: at the end only; vision's lr 0: the recipe's) -> taken
    as before"""
    from graph.tu.graphcl import TUConfig
    from vision.config import PretrainConfig

    assert load_config(TUConfig, overrides={"checkpoint_every": 0}).checkpoint_every == 0
    assert load_config(PretrainConfig, overrides={"lr": 0.0, "eval_every": 0}).lr == 0.0


@pytest.mark.parametrize("flag,value", [("--lr", "nan"), ("--lr", "inf"), ("--aug-ratio=-inf", ""),
                                        ("--loss-hparams", "temperature=.nan")])
def test_nan_and_infinity_are_refused(tu, capsys, flag, value):  # noqa: F811
    """`suite graph tu --lr nan` (inf, -inf; a loss hyper-parameter .nan) -> exit 2, one line naming the option and the
    value, no run (before: --lr nan trained to a NaN loss, --aug-ratio -inf dropped nothing)"""
    args, db, _ = tu
    assert _code([*args, flag, value] if value else [*args, flag]) == 2
    err = _one_line(capsys)
    name = flag.removeprefix("--").split("=")[0].replace("-", "_")
    assert name in err and "finite" in err, err
    assert _rows(db) == []


def test_nan_in_a_config_file_is_refused(tmp_path):
    """a config YAML with `lr: .nan` or `eval_epochs: [10, .inf]` -> ValueError naming the file and the key (before:
    taken)"""
    from graph.tu.graphcl import TUConfig

    for text, key in (("lr: .nan\n", "lr"), ("eval_epochs: [10, .inf]\n", "eval_epochs")):
        p = tmp_path / "c.yaml"
        p.write_text(text)
        with pytest.raises(ValueError, match=rf"c\.yaml.*{key}"):
            load_config(TUConfig, p)


def test_unknown_key_in_a_suite_file_is_refused(tmp_path):
    """a suite file with an unknown key in a job group (`epoch:` beside `args:`) -> ValueError naming the key and the
    file"""
    from benchmarks.runner.suitefile import load_suite

    p = tmp_path / "typo.yaml"
    p.write_text("name: t\njobs:\n  - frontend: graph\n    command: tu\n    epoch: 3\n")
    with pytest.raises(ValueError, match=r"typo\.yaml.*unknown key\(s\) \['epoch'\]"):
        load_suite(p)


# ----------------------------------------------------------------------------- A. a run's identity is what it read

@pytest.mark.slow  # four one-epoch TU runs (about 15 s)
def test_reuse_decided_on_the_data(tu, capsys):  # noqa: F811
    """issue 69, case 1: a finished TU run, then the same command on other data -> reused only while the data is the
    same: on a copy of its data under another root (reused), on the copy with its graph labels file deleted (not
    reused: `data changed: SYNTH_graph_labels.txt (gone)`, then the loader's own error), and with one label changed
    (run again, the line naming the file); the fingerprint is in the row and in `suite results show` (before: every
    one of them 'reused finished run', the old number back)"""
    args, db, folder = tu
    root = Path(args[args.index("--data-root") + 1])
    assert _code(args) == 0
    first = _rows(db)[0]
    copy = root.parent / "copy"
    shutil.copytree(root, copy)
    other = [*args[:args.index("--data-root")], "--data-root", str(copy), *args[args.index("--data-root") + 2:-1],
             str(folder.parent / "b")]
    capsys.readouterr()
    assert _code(other) == 0
    assert "reused finished run" in capsys.readouterr().out and len(_rows(db)) == 1  # same data, another path
    labels = copy / "SYNTH" / "raw" / "SYNTH_graph_labels.txt"
    text = labels.read_text()
    labels.unlink()
    assert _code(other) == 2
    out, err = capsys.readouterr()
    assert "data changed: SYNTH_graph_labels.txt (gone)" in out and "reused finished" not in out, out
    assert "SYNTH_graph_labels.txt" in err and len(err.strip().splitlines()) == 1, err
    lines = text.splitlines()
    labels.write_text("\n".join([str(1 - int(lines[0])), *lines[1:]]) + "\n")  # one label flipped
    assert _code(other) == 0
    out = capsys.readouterr().out
    assert "data changed: SYNTH_graph_labels.txt;" in out and "reused finished run" not in out, out
    finished = [r for r in _rows(db) if r["status"] == "finished"]
    assert len(finished) == 2
    import json

    digests = [json.loads(r["run_options"])["data"]["data"]["digest"] for r in finished]
    assert digests[0] == json.loads(first["run_options"])["data"]["data"]["digest"] != digests[1]
    assert _code(["results", "show", finished[1]["id"]]) == 0
    assert digests[1] in capsys.readouterr().out


def test_data_fingerprint_content_and_manifest(tmp_path, monkeypatch):
    """a data folder's identity: the same files under another path -> the same digest; one byte changed -> the file
    named; a large set (over SMALL_BYTES) -> a manifest (names, sizes, a sample's bytes) that reads only the sample,
    and a file rewritten in place with the same size -> 'files rewritten' at the same path, not under another one
    (before: no identity of the data at all)"""
    from suite import inputs

    a = tmp_path / "a"
    (a / "sub").mkdir(parents=True)
    for i in range(200):
        (a / "sub" / f"{i:03d}.txt").write_text(f"line {i}\n")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    ia, ib = inputs.data_identity(a), inputs.data_identity(b)
    assert ia["kind"] == "content" and ia["digest"] == ib["digest"] and ia["path"] != ib["path"]
    (b / "sub" / "007.txt").write_text("line 8\n")
    assert inputs.data_changes({"d": ia}, {"d": inputs.data_identity(b)}) == ["sub/007.txt"]
    monkeypatch.setattr(inputs, "SMALL_BYTES", 0)
    read: list[str] = []
    digest = inputs._file_digest.__wrapped__
    monkeypatch.setattr(inputs, "_file_digest", lambda p, *st: read.append(p.name) or digest(p, *st))
    big = inputs.data_identity(a)
    assert big["kind"] == "manifest" and big["count"] == 200 and len(read) <= inputs.SAMPLE_FILES + 4
    outside = next(f"{i:03d}.txt" for i in range(200) if f"{i:03d}.txt" not in read)
    os.utime(a / "sub" / outside, ns=(1, 1))  # rewritten in place, same size, not in the sample
    now = inputs.data_identity(a)
    assert now["digest"] == big["digest"]
    assert inputs.data_changes({"d": big}, {"d": now}) == [f"{a} (files rewritten since: other modification times)"]
    assert inputs.data_changes({"d": big}, {"d": inputs.data_identity(tmp_path / "a")}) != []
    c = tmp_path / "c"
    shutil.copytree(a, c)  # the same data under another path: its times may differ, it is the same data
    assert inputs.data_changes({"d": big}, {"d": inputs.data_identity(c)}) == []


def test_shards_identity_reads_a_shard_at_its_head_and_tail(tmp_path, monkeypatch):
    """a run on WebDataset shards (`--dataset wds:PATTERN`) -> its identity covers the pattern's shards (other files
    of their folder not), the same shards elsewhere are the same data, a changed shard is named; in a large set a
    sampled shard is read at its head and tail only, never whole (before: shards were not fingerprinted, so a run on
    changed shards was reused)"""
    from suite import inputs
    from vision.config import PretrainConfig
    from vision.train import PretrainTask

    src = tmp_path / "sh"
    src.mkdir()
    for i in range(3):
        (src / f"train-{i:05d}.tar").write_bytes(bytes([i]) * 4096)
    (src / "notes.txt").write_text("not a shard")
    task = PretrainTask.__new__(PretrainTask)
    got = PretrainTask.data_inputs(task, PretrainConfig(dataset=f"wds:{src}/train-{{00000..00002}}.tar"))
    assert [Path(p).name for p in got["data"]] == [f"train-{i:05d}.tar" for i in range(3)]
    ident = inputs.data_identity(got["data"])
    assert ident["count"] == 3 and ident["kind"] == "content" and "3 files in" in ident["path"]
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    moved = inputs.data_identity([str(p).replace(str(src), str(copy)) for p in got["data"]])
    assert inputs.data_changes({"data": ident}, {"data": moved}) == []
    (copy / "train-00001.tar").write_bytes(b"x" + bytes([1]) * 4095)
    changed = inputs.data_identity([copy / f"train-{i:05d}.tar" for i in range(3)])
    assert inputs.data_changes({"data": ident}, {"data": changed}) == ["train-00001.tar"]
    monkeypatch.setattr(inputs, "SMALL_BYTES", 0)  # a large set: a manifest, each sampled shard's head and tail
    monkeypatch.setattr(inputs, "SAMPLE_BYTES", 1024)
    read: list[int] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: read.append(0) or real_open(*a, **k))
    big = inputs.data_identity(got["data"])
    assert big["kind"] == "manifest" and len(read) == 3
    inputs._file_digest.cache_clear()
    shard = src / "train-00002.tar"
    shard.write_bytes(bytes([2]) * 2048 + b"y" + bytes([2]) * 2047)  # its middle: not read, the same sample digest
    assert inputs.data_identity(got["data"])["digest"] == big["digest"]
    shard.write_bytes(b"y" + bytes([2]) * 4095)  # its head: read
    assert inputs.data_identity(got["data"])["digest"] != big["digest"]
    with pytest.raises(ValueError, match=r"shards .*: 1 of 4 not found"):
        PretrainTask.data_inputs(task, PretrainConfig(dataset=f"wds:{src}/train-{{00000..00003}}.tar"))


def test_image_cache_keyed_by_content(tmp_path):
    """issue 69: an image of an image folder replaced by another of the same size (BMP: same bytes count), its
    modification time kept -> the folder is decoded again and the new pixels load (before: the cache, keyed by the
    path and each file's name and size, gave the old image back)"""
    import numpy as np
    import torch
    from PIL import Image

    from tests.reliability.images import image_folder
    from vision.data import load_image_folder

    root = image_folder(tmp_path / "imgs", size=8, ext="bmp")
    first = load_image_folder(root)
    f = root / "train" / "a" / "0.bmp"
    st = f.stat()
    Image.fromarray(np.full((8, 8, 3), 7, dtype=np.uint8)).save(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size
    again = load_image_folder(root)
    assert again.info["cache"] != first.info["cache"]
    assert not torch.equal(again.train_x, first.train_x) and int((again.train_x == 7).all(dim=(1, 2, 3)).sum()) == 1


def test_bench_skip_decided_on_the_data(tmp_path, monkeypatch):
    """`suite bench run`: a finished job whose run recorded reading a data folder -> skipped while the folder holds
    the same data; after one file changed -> marked to run again, the reason naming the file (before: skipped, its old
    number kept in the tables)"""
    from benchmarks.runner.plan import Runner
    from benchmarks.runner.suitefile import load_suite
    from suite.inputs import data_identity
    from suite.registry import Registry

    data = tmp_path / "raw"
    data.mkdir()
    (data / "labels.txt").write_text("0\n1\n")
    p = tmp_path / "s.yaml"
    p.write_text("name: s\njobs:\n  - frontend: graph\n    command: tu\n    args: {dataset: MUTAG}\n")
    (job,) = load_suite(p)[1]
    reg = Registry(str(tmp_path / "r.sqlite"))
    with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss="graphcl", config={}, cfg_hash=job.hash,
                 run_options={"data": {"data": data_identity(data)}}):
        pass
    monkeypatch.setattr(Registry, "job_status", lambda self, h: "finished")
    assert Runner.stale_inputs([job], reg) == {}
    (data / "labels.txt").write_text("1\n1\n")
    assert Runner.stale_inputs([job], reg) == {job.hash: "data changed: labels.txt"}


# ----------------------------------------------------------------------------- C. two processes, one cache

@pytest.mark.slow  # two interpreters importing PyG (about 10 s)
def test_two_processes_build_one_tu_cache(tmp_path):
    """two processes load the same TU data set at once with no processed cache yet -> both finish with the same
    graphs, and there is one processed cache (held before by the cache's lock; probed here for the first time)"""
    from tests.graph.synthetic import write_synthetic_tu

    root = write_synthetic_tu(tmp_path / "data")
    code = textwrap.dedent(f"""
        from graph.tu.data import load_tu
        d = load_tu("SYNTH", {str(root)!r})
        print(len(d.graphs), sum(int(g.num_edges) for g in d.graphs))
    """)
    env = {**os.environ, "SUITE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0] and outs[0][0].strip()
    assert len(list((tmp_path / "cache").rglob("processed"))) == 1


def test_moleculenet_finetuning_records_its_csv(tmp_path, monkeypatch):
    """`suite graph finetune-mol` on a MoleculeNet CSV -> the row records the file's content digest (issue 69, class
    A: reuse and resume decide on it), the same file elsewhere has the same digest and one changed label another
    (before: the fine-tuning runs recorded no data identity)"""
    import argparse
    import json

    from graph.mol.cli import register_mol
    from suite.inputs import data_identity
    from suite.registry import Registry
    from tests.graph.test_mol_train import CORPUS

    rows = [f"{i},m{i},{i % 2},{s}" for i, s in enumerate(CORPUS * 2)]
    csv = tmp_path / "bbbp.csv"
    csv.write_text("num,name,p_np,smiles\n" + "\n".join(rows) + "\n")
    parser = argparse.ArgumentParser()
    register_mol(parser.add_subparsers())
    db = tmp_path / "r.sqlite"
    a = parser.parse_args(["finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path), "--init", "none",
                           "--seed", "0", "--epochs", "1", "--split", "random", "--batch-size", "4", "--num-layers",
                           "2", "--emb-dim", "8", "--device", "cpu", "--out", str(tmp_path / "run")])
    monkeypatch.setenv("SUITE_REGISTRY", str(db))
    assert a.func(a) == 0
    (run,) = Registry(str(db)).runs(task="molnet-finetune")
    recorded = json.loads(run["run_options"])["data"]["data"]
    assert recorded["digest"] == data_identity(csv)["digest"]
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(csv, tmp_path / "elsewhere" / "bbbp.csv")
    assert data_identity(tmp_path / "elsewhere" / "bbbp.csv")["digest"] == recorded["digest"]
    csv.write_text(csv.read_text().replace(",m1,1,", ",m1,0,"))
    assert data_identity(csv)["digest"] != recorded["digest"]


def test_simcse_declares_its_sentences_and_the_sts_dev_file(tmp_path):
    """a SimCSE run on a sentence file, with the STS-B dev evaluation -> both files are the data its identity covers
    (without --no-dev-eval's dev file; the built-in NLI triplets of supervised SimCSE are not a file) (before: none)"""
    from text.methods.simcse import SimCSEConfig, SimCSETask

    sents = tmp_path / "s.txt"
    sents.write_text("a cat sits\na dog runs\n")
    cfg = SimCSEConfig(data=str(sents), dev_eval=True)
    got = SimCSETask.data_inputs(SimCSETask.__new__(SimCSETask), cfg)
    assert got["data"] == sents and got["sts_dev"].name == "sts-dev.csv"
    assert "sts_dev" not in SimCSETask.data_inputs(SimCSETask.__new__(SimCSETask),
                                                   SimCSEConfig(data=str(sents), dev_eval=False))
    assert SimCSETask.data_inputs(SimCSETask.__new__(SimCSETask), SimCSEConfig(mode="sup", dev_eval=False)) == {}


def test_senteval_declares_the_folder_of_each_task(tmp_path, monkeypatch):
    """a SentEval evaluation (`suite text eval`, STS and transfer tasks) -> the folder of each task evaluated is the data
    its identity covers, one per task, each holding that task's files under the data root; an unknown task is one
    line naming it (before: an evaluation declared no data, so a corrected STS file gave the old number back)"""
    from text.data import TASK_FOLDERS, TRANSFER_TASKS, read_sts_year, read_transfer, task_folder
    from text.eval.senteval import EvalConfig, SentEvalTask
    from text.eval.sts import STS_TASKS

    task = SentEvalTask.__new__(SentEvalTask)
    sts = SentEvalTask.data_inputs(task, EvalConfig(model="m", tasks="sts"))
    assert list(sts) == list(STS_TASKS) and sts["STSB"] == task_folder("STSB")
    both = SentEvalTask.data_inputs(task, EvalConfig(model="m", tasks="all", sts_tasks=["STS12"], transfer_tasks=["MR"]))
    assert {k: v.relative_to(task_folder("MR").parent).as_posix() for k, v in both.items()} == \
        {"STS12": "STS/STS12-en-test", "MR": "MR"}
    assert set(STS_TASKS) | set(TRANSFER_TASKS) | {"STSB-dev"} == set(TASK_FOLDERS)
    with pytest.raises(ValueError, match="unknown SentEval task 'STS99'"):
        task_folder("STS99")
    root = data_or_skip("senteval", "downstream")  # the real folders: each task's reader finds its files there
    assert all(task_folder(t, root).is_dir() for t in TASK_FOLDERS)
    assert (task_folder("STS12", root) / "STS.input.MSRpar.txt").is_file() and read_transfer("MR", root)["all"].y
    assert read_sts_year("STS12", root)["MSRpar"].scores
