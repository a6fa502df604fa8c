"""Every command of the `suite` CLI with bad input: exit status 2, one line on stderr saying what is wrong, no Python
traceback, nothing written. "Every command" is every leaf of the command tree: the built-in `losses` and `results`
actions, each front-end's sub-commands (`vision pretrain|eval|gmm`, `graph tu|tu-eval|pretrain-mol|finetune-mol`,
`text train|eval|mlm`) and every `suite bench` command (one per module of ``benchmarks`` with a ``register``);
``test_the_sweep_covers_every_command`` checks that the sweep's cases name each of them.

The front-end commands run in ONE subprocess (``DRIVER``: a fresh interpreter that calls ``suite.cli.main`` once per
case, as ``python -m suite`` does, and reports the exit status and stderr of each; an exception escaping ``main`` is
recorded with its traceback, as the interpreter would print it): starting one interpreter per case would cost the
torch / PyG / transformers imports each time. A few cheap commands also run as real ``python -m suite`` processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DRIVER = r"""
import contextlib, io, json, signal, sys, time, traceback
from suite.cli import main

def too_long(signum, frame):
    raise TimeoutError("still running after 60 s: bad input must be refused before any real work")

signal.signal(signal.SIGALRM, too_long)
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    t0 = time.perf_counter()
    signal.alarm(60)
    sys.argv = ["suite", *argv]  # the bench plugin reads sys.argv to import only the benchmark named
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            rc = 1
    signal.alarm(0)
    out.append({"argv": argv, "rc": rc, "err": err.getvalue(), "s": round(time.perf_counter() - t0, 2)})
    print(json.dumps(out[-1]), file=sys.__stderr__, flush=True)
print(json.dumps(out))
"""


def _files(d: Path) -> dict[str, str]:
    """Bad input files the cases point at."""
    (d / "data").mkdir()
    (d / "empty.txt").write_text("")
    (d / "latin1.txt").write_bytes(b"a sentence\ncaf\xe9 au lait\n")
    (d / "bad.yaml").write_text("epochs: ten\n")
    (d / "list.yaml").write_text("- 1\n- 2\n")
    (d / "suite.yaml").write_text("name: s\njobs:\n  - {frontend: graph, command: tu, grid: {dataset: []}}\n")
    (d / "bad.jsonl").write_text('{"id": 1}\n[1, 2]\n')
    (d / "notadb.sqlite").write_bytes(b"this is not a database" * 10)
    (d / "evil.pt").write_bytes(b"\x80\x04not really a checkpoint")
    (d / "one.csv").write_text("sent0\na man\n")
    (d / "ok.txt").write_text("a man plays\na dog runs\na cat sleeps\n")
    (d / "mols.csv").write_text("SMILES\nCCO\nCCN\nc1ccccc1\n")
    (d / "unknown.yaml").write_text("stepz: 10\n")
    return {k: str(d / k) for k in ("empty.txt", "latin1.txt", "bad.yaml", "list.yaml", "suite.yaml", "bad.jsonl",
                                   "notadb.sqlite", "evil.pt", "one.csv", "ok.txt", "mols.csv", "unknown.yaml")}


def _cases(f: dict[str, str], d: Path) -> list[list[str]]:
    nodir = str(d / "no-such-dir" / "x")
    new_db = str(d / "new.sqlite")  # a registry that is not there: a refused command must not create it
    text_ok = ["--data", f["ok.txt"], "--backbone", str(d / "no-such-model"), "--out", str(d / "no-such-dir" / "out")]
    return [
        # root and built-in commands
        ["nosuch"], ["losses", "--bogus"],
        ["results", "list", "--registry", f["notadb.sqlite"]], ["results", "list", "--registry", str(d / "none.jsonl")],
        ["results", "list", "--status", "done"],
        ["results", "show"], ["results", "show", "zzz"], ["results", "import"], ["results", "import", f["bad.jsonl"]],
        ["results", "import", str(d / "none.jsonl")], ["results", "export", "--out", nodir + ".csv"],
        # a refused import leaves no registry behind (new.sqlite is in the "nothing written" check; r.sqlite is not)
        ["results", "import", f["bad.jsonl"], "--registry", new_db], ["results", "import", f["latin1.txt"], "--registry", new_db],
        ["results", "import", str(d / "none.jsonl"), "--registry", new_db],
        ["results", "merge"], ["results", "merge", f["bad.jsonl"], "--registry", new_db], ["results", "merge", str(d)],
        ["results", "merge", nodir + ".jsonl", "--registry", new_db],
        ["results", "compare", "--registry", f["bad.jsonl"]], ["results", "reap", "--registry", f["notadb.sqlite"]],
        ["results", "plot"], ["results", "plot", "zzz", "--out", str(d / "c.png")],
        ["bench", "status", "nosuchsuite"], ["bench", "status", "quick", "--only", "("],
        ["results", "plot", "zzz", "--out", str(d / "c.txt")], ["results", "plot", "zzz", "--out", nodir + ".png"],
        # vision
        ["vision", "pretrain", "--epochs", "x"], ["vision", "pretrain", "--config", f["bad.yaml"]],
        ["vision", "pretrain", "--config", f["list.yaml"]], ["vision", "pretrain", "--config", str(d / "none.yaml")],
        ["vision", "pretrain", "--dataset", "digits", "--loss", "nosuch", "--no-registry"],
        ["vision", "pretrain", "--dataset", "digits", "--loss-hparams", "temperature=0", "--no-registry"],
        ["vision", "pretrain", "--dataset", "digits", "--epochs", "-1", "--no-registry"],
        ["vision", "pretrain", "--dataset", "digits", "--batch-size", "0", "--no-registry"],
        ["vision", "pretrain", "--dataset", "nosuch", "--no-registry"],
        ["vision", "pretrain", "--dataset", "digits", "--log-to", "tensorboard,mlflw", "--no-registry"],
        ["vision", "pretrain", "--dataset", "digits", "--mlflow-uri", "http://127.0.0.1:9", "--no-registry"],
        ["vision", "eval", "--ckpt", f["evil.pt"]], ["vision", "eval"],
        ["vision", "gmm", "--steps", "0"], ["vision", "gmm", "--sigma", "x"], ["vision", "gmm", "--experiment", "nosuch"],
        ["vision", "gmm", "--config", f["unknown.yaml"]], ["vision", "gmm", "--loss", "nosuch"],
        ["vision", "gmm", "--hidden", "64", "0"], ["vision", "gmm", "--loss", "supcon"],
        # graph
        ["graph", "tu", "--dataset", "NOPE"], ["graph", "tu", "--dataset", "MUTAG", "--loss", "nosuch"],
        ["graph", "tu", "--config", f["bad.yaml"]], ["graph", "tu-eval", f["evil.pt"]],
        ["graph", "pretrain-mol", "--corpus", str(d / "none.csv")], ["graph", "pretrain-mol", "--profile", "gpu"],
        ["graph", "pretrain-mol", "--loss", "nosuch"], ["graph", "pretrain-mol", "--corpus", f["mols.csv"], "--loss", "nosuch"],
        ["graph", "pretrain-mol", "--corpus", f["mols.csv"], "--epochs", "0"],
        ["graph", "finetune-mol", "--dataset", "nosuch"], ["graph", "finetune-mol", "--init", str(d / "none")],
        ["graph", "finetune-mol", "--data", str(d / "none.csv")], ["graph", "finetune-mol", "--data", f["mols.csv"],
                                                                   "--target-columns", "nosuch"],
        ["graph", "predict", "--model", str(d / "none"), "--data", f["mols.csv"]],
        ["graph", "ecfp-mol", "--dataset", "nosuch"], ["graph", "ecfp-mol", "--dataset", "bbbp", "--seed", "-1"],
        # text (a valid sentences file and a backbone that is not there: each case's own check must come first)
        ["text", "train", "--grad-cache-chunk", "-1", *text_ok], ["text", "train", "--data", f["latin1.txt"]],
        ["text", "train", "--data", f["empty.txt"]], ["text", "train", "--mode", "sup", "--data", f["one.csv"]],
        ["text", "train", "--mode", "sup", "--loss", "xclr", "--data", f["one.csv"]],
        ["text", "train", "--loss-hparams", "negatives=sideways", *text_ok], ["text", "train", "--loss", 5 * "x", *text_ok],
        ["text", "train", "--config", f["bad.yaml"]], ["text", "train", "--epochs", "-1", *text_ok],
        ["text", "train", "--batch-size", "0", *text_ok], ["text", "train", *text_ok],
        ["text", "eval", "--model", str(d / "none")], ["text", "eval", "--tasks", "nosuch"],
        ["text", "mlm", "--hidden", "30", "--heads", "4"], ["text", "mlm", "--mask-prob", "1.5"],
        ["text", "mlm", "--steps", "many"], ["text", "mlm", "--config", f["unknown.yaml"]],
        ["text", "mlm", "--corpus", str(d / "none.txt"), "--out", str(d / "mlm-out")],
        # bench
        ["bench", "run", str(d / "none.yaml")], ["bench", "run", f["suite.yaml"]], ["bench", "run", "quick", "--jobs", "0"],
        ["bench", "migrate", "--registry", str(d / "none.jsonl")], ["bench", "migrate", "--registry", f["bad.jsonl"]],
        ["bench", "migrate", "--registry", new_db],
        ["bench", "fidelity", "--registry", str(d / "none.jsonl")],
        ["bench", "graph-tu", "--table-only", "--registry", str(d / "none.jsonl")],
        ["bench", "losses", "--sizes", "1", "--no-registry", "--out", str(d / "l.md")],
        ["bench", "losses", "--losses", "nosuch", "--no-registry", "--out", str(d / "l.md")],
        ["bench", "reliability", "--out", nodir + ".md"],
        # the benchmarks that run a shipped suite, then write a table: bad runner flags, a missing or bad registry
        ["bench", "gmm", "--jobs", "0"], ["bench", "gmm", "--profile", "nosuch"],
        ["bench", "xclr", "--jobs", "0"], ["bench", "xclr", "--table-only", "--registry", str(d / "none.jsonl")],
        ["bench", "xclr-timing", "--steps", "0", "--no-registry"],
        ["bench", "xclr-timing", "--batch-size", "1", "--no-registry"],
        # a user's loss compared with the suite's: an unknown name, a broken class, bad runner flags, no such suite
        ["bench", "compare", "nosuch_loss_xyz"], ["bench", "compare", str(d / "missing.py") + ":Loss"],
        ["bench", "compare", "infonce", "--jobs", "0"], ["bench", "compare", "infonce", "--suite", "nosuch"],
        ["bench", "gmm", "--table-only", "--registry", str(d / "none.jsonl")],
        ["bench", "graph-molnet", "--threads", "-1"], ["bench", "graph-molnet", "--registry", f["bad.jsonl"]],
        ["bench", "graph-molnet", "--table-only", "--registry", f["bad.jsonl"]],
        ["bench", "text-sts", "--jobs", "0"], ["bench", "text-sts", "--jobs", "two"],
        ["bench", "text-sts", "--table-only", "--registry", f["notadb.sqlite"]],
        ["bench", "vision-cifar", "--profile", "nosuch"], ["bench", "vision-cifar", "--jobs", "-2"],
        ["bench", "vision-cifar", "--table-only", "--registry", str(d / "none.jsonl")],
        ["bench", "report", "--registry", str(d / "none.jsonl")], ["bench", "report", "--registry", f["notadb.sqlite"]],
        ["bench", "report", "--check", "--registry", f["bad.jsonl"]],
        # grad-cache: every numeric flag and the output folder checked before any measuring process starts
        ["bench", "grad-cache", "--batches", "0"], ["bench", "grad-cache", "--chunk", "0"],
        ["bench", "grad-cache", "--chunk", "-1"], ["bench", "grad-cache", "--threads", "0"],
        ["bench", "grad-cache", "--limit-gib", "0"], ["bench", "grad-cache", "--models", "nosuch"],
        ["bench", "grad-cache", "--out", nodir + ".md"],
    ]


def _check(case: dict) -> str | None:
    """What is wrong with one case's outcome (None when it is right)."""
    err = case["err"].strip()
    if "Traceback" in err:
        return f"traceback: {err.splitlines()[-1] if err else ''}"
    if case["rc"] != 2:
        return f"exit status {case['rc']} (stderr: {err[-200:]!r})"
    if not err or err.count("\n") != 0:
        return f"stderr is {err.count(chr(10)) + 1 if err else 0} lines: {err[:300]!r}"
    return None


@pytest.mark.skipif(bool(os.environ.get("SUITE_CLI_SWEEP")), reason="inside the sweep's own `bench reliability` case")
def test_every_command_with_bad_input_exits_2_with_one_line(tmp_path):
    """every `suite` command (losses, results, vision, graph, text and each bench command) with 1-10 bad inputs
    (missing or malformed files, wrong types, unknown names, negative sizes, a registry that is not there) -> exit 2,
    one line on stderr, no traceback, nothing written (no new file or folder in the work folder, a refused import or
    migrate creates no registry)"""
    work = tmp_path / "w"
    work.mkdir()
    f = _files(work)
    cases = _cases(f, work)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "SUITE_REGISTRY": str(work / "r.sqlite"),
           "SUITE_DATA": str(work / "data"), "SUITE_CACHE": str(tmp_path / "cache"), "SUITE_NO_PROGRESS": "1",
           "SUITE_MODELS": str(work / "models"),  # a model folder made by a refused `text mlm` would show as written
           "SUITE_CLI_SWEEP": "1"}  # a probe run started by a case (bench reliability) does not start the sweep again
    before = sorted(p.name for p in work.iterdir())
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cases)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = {" ".join(c["argv"]).replace(str(work), "<tmp>"): why for c in results if (why := _check(c))}
    assert not bad, json.dumps(bad, indent=1)
    after = sorted(p.name for p in work.iterdir() if p.name not in ("r.sqlite", "r.sqlite-wal", "r.sqlite-shm"))
    assert after == before, "written: " + ", ".join(sorted(set(after) - set(before)))


@pytest.mark.parametrize("argv", [["results", "show", "zzz"], ["nosuch"]])
def test_bad_input_through_a_real_process(tmp_path, argv):
    """`python -m suite results show zzz` and `python -m suite nosuch` as real processes (what the sweep's driver
    stands for) -> exit 2, one line on stderr, no traceback"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SUITE_REGISTRY": str(tmp_path / "r.sqlite")}
    proc = subprocess.run([sys.executable, "-m", "suite", *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert _check({"rc": proc.returncode, "err": proc.stderr}) is None, proc.stderr


def _command_tree() -> set[str]:
    """Every leaf command of `suite`: the results actions, each front-end's sub-commands, each bench command (a module
    of ``benchmarks`` defining ``register``, read from the sources: importing them all would import every front-end)."""
    import argparse
    import ast

    from benchmarks.runner.suitefile import _commands_of
    from suite.cli import build_parser

    root = build_parser(only="")
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    actions = next(a for a in sub.choices["results"]._actions if a.dest == "action").choices
    out = {"losses"} | {f"results {a}" for a in actions}
    for fe in ("vision", "graph", "text"):
        out |= {f"{fe} {c}" for c in _commands_of(fe) or ()}
    for f in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(f.read_text())
        if f.stem != "cli" and any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body):
            out.add(f"bench {f.stem.replace('_', '-')}")
    return out


def test_the_sweep_covers_every_command(tmp_path):
    """the command tree (results actions, the vision / graph / text sub-commands, every bench module with a
    `register`) against the sweep's cases -> every command has at least one bad-input case (the sweep left out
    `vision gmm`, `text mlm` and six bench commands while its docstring said it ran each command)"""
    work = tmp_path / "w"
    work.mkdir()
    cases = _cases(_files(work), work)
    named = {a[0] if a[0] == "losses" else " ".join(a[:2]) for a in cases}
    missing = sorted(_command_tree() - named)
    assert not missing, f"commands without a bad-input case in the sweep: {missing}"


GRAD_CACHE_BAD = {
    "batch 0": (["--batches", "256", "0"], r"--batches.*0"),
    "chunk 0": (["--chunk", "0"], r"--chunk.*0"),
    "chunk -1": (["--chunk", "-1"], r"--chunk.*-1"),
    "chunk not below the batch": (["--batches", "32", "--chunk", "64"], r"--chunk.*64.*32"),
    "threads 0": (["--threads", "0"], r"--threads.*0"),
    "limit 0": (["--limit-gib", "0"], r"--limit-gib.*0"),
    "limit nan": (["--limit-gib", "nan"], r"--limit-gib.*nan"),
    "out in a missing folder": (["--out", "{tmp}/no-such-dir/gc.md"], r"no-such-dir"),
    "out a folder": (["--out", "{tmp}"], r"folder"),
}


@pytest.mark.parametrize("case", sorted(GRAD_CACHE_BAD))
def test_grad_cache_bench_bad_arguments(tmp_path, monkeypatch, capsys, case):
    """`suite bench grad-cache` with --batches 0, --chunk 0 or -1 or not below a batch, --threads 0, --limit-gib 0 or
    nan, or an --out in a missing folder or that is a folder -> exit 2 with one line naming the flag or the path,
    before any measuring process starts, and nothing written (bad values started the measurements, wrote 'failed'
    cells into the committed table and exited 0; --chunk 0 made the cached column a copy of the full one; a missing
    --out folder failed only after every measurement)"""
    import re

    import benchmarks.measurements.grad_cache as gc
    from suite.cli import main

    argv, match = GRAD_CACHE_BAD[case]
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "gc.md")]
    started = []
    monkeypatch.setattr(gc, "measure", lambda *a, **k: started.append(a) or {"error": "not measured", "oom": False})
    monkeypatch.setattr(sys, "argv", ["suite", "bench", "grad-cache", *argv])  # the bench plugin imports only it
    rc = main(["bench", "grad-cache", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err and re.search(match, err), err
    assert not started and sorted(p.name for p in tmp_path.iterdir()) == []
