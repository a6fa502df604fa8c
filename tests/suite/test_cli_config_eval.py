"""CLI, config layer, shared evaluators, diagnostics and the dependency direction."""
from __future__ import annotations

import ast
import re
import math
import pathlib
from typing import Any
from dataclasses import dataclass, field

import pytest
import torch

from suite import metrics
from suite.cli import main
from suite.config import add_config_args, config_from_args, hash_config, load_config
from suite.eval import knn_accuracy, linear_probe, svm_cv_accuracy
from suite.registry import Registry

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_suite_imports_no_front_end():
    bad = []
    for path in (ROOT / "suite").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("vision", "graph", "text", "benchmarks")]
    assert not bad


def _imports(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        out += [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
    return out


def test_front_ends_import_only_suite_and_themselves():
    """every direction of the dependency rule: benchmarks -> front-ends -> suite; no front-end imports another"""
    bad = []
    for fe in ("vision", "graph", "text"):
        for path in (ROOT / fe).rglob("*.py"):
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in _imports(path)
                    if n.split(".")[0] in {"vision", "graph", "text", "benchmarks"} - {fe}]
    assert not bad


def test_front_ends_build_losses_only_through_the_factory():
    """one loss factory (suite.presets.make_loss): no front-end calls suite.losses.build or the presets' resolve"""
    bad = []
    for fe in ("vision", "graph", "text"):
        for path in (ROOT / fe).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    base = node.func.value
                    owner = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                    if (owner, node.func.attr) in {("L", "build"), ("losses", "build"), ("presets", "resolve"),
                                                   ("presets", "preset")}:
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                if isinstance(node, ast.ImportFrom) and node.module in ("suite.losses", "suite.presets"):
                    bad += [f"{path.relative_to(ROOT)}: imports {a.name}" for a in node.names
                            if a.name in ("build", "resolve", "preset")]
    assert not bad, bad



# what only suite/ does: (attribute or name called) -> why a front-end must not
_OWNERS_WORK = {
    ("isinstance", "bool"): "a config type checked by hand (suite.config: load_config, check_ints, check_numbers)",
    ("Registry", None): "a registry opened (the run owner's open_registry)",
    ("init_process_group", None): "torch.distributed set up (the run owner)",
    ("destroy_process_group", None): "torch.distributed ended (suite.cli)",
    ("Generator", None): "a random generator made (suite.train.seeding, RunContext.generator)",
    ("default_rng", None): "a random generator made (suite.train.seeding.fixed_numpy_rng)",
    ("RandomState", None): "a random generator made (suite.train.seeding.fixed_random_state)",
    ("Random", None): "a random generator made (suite.train.seeding)",
    ("manual_seed", None): "a global generator seeded (suite.train.seeding)",
    ("seed", "np.random"): "a global generator seeded (suite.train.seeding)",
    ("save", "torch"): "a pickle written with torch.save (safetensors or JSON; suite.safeio)",
}


def _owners_work(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
        for (called, qualifier), why in _OWNERS_WORK.items():
            if name != called:
                continue
            if called == "isinstance":
                if len(node.args) == 2 and "bool" in ast.unparse(node.args[1]):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {why}")
            elif qualifier is None or base == qualifier:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {why}")
    return found


def _on_probe(tmp_path: pathlib.Path, src: str, check: Any) -> list[str]:
    """What ``check`` finds in a probe file holding ``src`` (written inside the repository, as the checks name files
    relative to it; removed after)."""
    probe = ROOT / "tests" / "suite" / f"_probe_{tmp_path.name}.py"
    probe.write_text(src)
    try:
        return check(probe)
    finally:
        probe.unlink()


def test_front_ends_leave_the_owners_work_to_suite():
    """no front-end checks a config type by hand, opens a registry, sets up or ends torch.distributed, makes or seeds
    a random generator, or writes a pickle with torch.save: each is done once, in suite/"""
    bad = [hit for fe in ("vision", "graph", "text") for path in (ROOT / fe).rglob("*.py") for hit in _owners_work(path)]
    assert not bad, "\n".join(bad)


def test_the_owners_work_check_sees_each_kind(tmp_path):
    """the check above finds each kind it names (a rule that finds nothing would pass on any code)"""
    src = ("import numpy as np, random, torch\nfrom suite.registry import Registry\nimport torch.distributed as dist\n"
           "isinstance(v, bool)\nRegistry()\ndist.init_process_group('gloo')\ndist.destroy_process_group()\n"
           "torch.Generator()\nnp.random.default_rng(0)\nnp.random.RandomState(0)\nrandom.Random(0)\n"
           "torch.manual_seed(0)\nnp.random.seed(0)\ntorch.save({}, 'x.pt')\n")
    assert len(_on_probe(tmp_path, src, _owners_work)) == 11

# earlier layouts: read only by suite/train/legacy.py, from declarations (Earlier, OldExport, OldFolder, OldHash)
_DECLARATIONS = {"Earlier", "OldExport", "OldFolder", "OldHash"}
_OLD_FILES = re.compile(r"checkpoint\.pt|simcse_head\.pt|encoder\.pt|epoch(\*|<N>|\d*)\.pt|runs/vision")


def _earlier_layout_readers(path: pathlib.Path) -> list[str]:
    """Mentions of an earlier layout outside a declaration: a name, attribute, definition or import that says
    legacy, or a string naming an earlier file or folder."""
    tree = ast.parse(path.read_text())
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in _DECLARATIONS:
            inside |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "suite.train.legacy":
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {a.name}" for a in node.names
                      if a.name not in _DECLARATIONS]  # the declarations' types only
            continue
        words = [getattr(node, k, None) for k in ("id", "attr", "name", "asname", "module", "arg")]
        said = [w for w in words if isinstance(w, str) and "legacy" in w.lower()]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _OLD_FILES.search(node.value):
            said.append(repr(_OLD_FILES.search(node.value).group(0)))
        found += [f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}: {w}" for w in said]
    return found


def test_front_ends_read_only_todays_layout():
    """no front-end reads a folder layout of an earlier version: no legacy name (LEGACY_ROOT, legacy_checkpoints,
    load_legacy_encoder, suite.train.legacy itself) and no earlier file named (checkpoint.pt, simcse_head.pt,
    encoder.pt, epoch<N>.pt, runs/vision) outside the declarations suite/train/legacy.py reads"""
    bad = [hit for fe in ("vision", "graph", "text") for path in (ROOT / fe).rglob("*.py")
           for hit in _earlier_layout_readers(path)]
    assert not bad, "\n".join(bad)


def test_the_earlier_layout_check_sees_each_kind(tmp_path):
    """the check above finds what the code before the one module had (and lets a declaration through)"""
    src = ("from suite.train import legacy\nLEGACY_ROOT = 'runs/vision'\nLEGACY_HEAD = 'simcse_head.pt'\n"
           "def legacy_checkpoints(cfg, folder):\n    return [folder / 'checkpoint.pt'] + sorted(folder.glob('epoch*.pt'))\n"
           "def load_legacy_encoder(path):\n    return path / 'encoder.pt'\n"
           "from suite.train.legacy import Earlier\nEARLIER = Earlier(checkpoints=('epoch*.pt', 'checkpoint.pt'), files={'h': 'simcse_head.pt'})\n")
    hits = _on_probe(tmp_path, src, _earlier_layout_readers)
    assert len(hits) == 10, hits
    assert not [h for h in hits if h.split(":")[1] in ("8", "9")]  # the declaration's line


def test_cli_losses_and_results(capsys, tmp_path, monkeypatch):
    assert main(["losses"]) == 0
    out = capsys.readouterr().out
    for name in ("infonce", "macl", "cacr", "xclr", "tsimclr", "tau0=0.1"):
        assert name in out
    db = str(tmp_path / "r.sqlite")
    reg = Registry(db)
    for seed in (0, 1):
        with reg.run(modality="graph", task="tu", dataset="MUTAG", loss="macl", seed=seed) as run:
            run.log("acc", 0.8 + 0.1 * seed, split="test")
    assert main(["results", "list", "--registry", db]) == 0
    assert "MUTAG" in capsys.readouterr().out
    assert main(["results", "compare", "--registry", db, "--metric", "acc"]) == 0
    assert "0.8500 ± 0.0707" in capsys.readouterr().out
    assert main(["results", "show", run.id[:6], "--registry", db]) == 0
    assert run.id in capsys.readouterr().out
    out_csv = tmp_path / "x.csv"
    assert main(["results", "export", "--registry", db, "--format", "csv", "--out", str(out_csv)]) == 0
    assert out_csv.read_text().count("\n") == 3


@dataclass
class _Cfg:
    epochs: int = 20
    lr: float = 0.01
    loss: str = "macl"
    seeds: list[int] = field(default_factory=lambda: [0])
    bf16: bool = False


def test_config_yaml_then_cli_overrides(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("epochs: 5\nloss: dcl\n")
    import argparse

    p = argparse.ArgumentParser()
    add_config_args(p, _Cfg)
    cfg = config_from_args(_Cfg, p.parse_args(["--lr", "0.1", "--seeds", "1", "2", "--bf16"]), y)
    assert cfg == _Cfg(epochs=5, lr=0.1, loss="dcl", seeds=[1, 2], bf16=True)
    assert hash_config(cfg) != hash_config(_Cfg())
    with pytest.raises(ValueError, match="unknown config key"):
        load_config(_Cfg, None, {"epoch": 3})
    with pytest.raises(ValueError, match="config file not found"):
        load_config(_Cfg, tmp_path / "missing.yaml")



def test_a_renamed_field_keeps_its_earlier_spelling(tmp_path):
    """SimCSE's keep_checkpoint (a switch) became keep_checkpoints (a count, as every front-end has): a recorded
    command line (`--no-keep-checkpoint`, the text-sts suite's) or YAML key of the earlier name still sets it, false as
    0; both names at once are refused; the setting (its hash) is the same either way"""
    import argparse

    from suite.config import experiment_hash
    from text.methods.simcse import SimCSEConfig

    p = argparse.ArgumentParser()
    add_config_args(p, SimCSEConfig)
    old = config_from_args(SimCSEConfig, p.parse_args(["--no-keep-checkpoint"]))
    assert old.keep_checkpoints == 0 and old == SimCSEConfig(keep_checkpoints=0)
    assert config_from_args(SimCSEConfig, p.parse_args(["--keep-checkpoints", "3"])).keep_checkpoints == 3
    y = tmp_path / "c.yaml"
    y.write_text("keep_checkpoint: true\n")
    assert load_config(SimCSEConfig, y).keep_checkpoints == 1
    with pytest.raises(ValueError, match="keep_checkpoint is the earlier name of keep_checkpoints"):
        load_config(SimCSEConfig, y, {"keep_checkpoints": 2})
    assert experiment_hash(old) == experiment_hash(SimCSEConfig())
    assert "keep-checkpoint " not in p.format_help()

def _blobs(n=200, seed=0, shuffle=False):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 4
    x = torch.randn(n, 8, generator=g) * 0.1 + torch.nn.functional.one_hot(y, 8).float() * 3
    if shuffle:
        y = y[torch.randperm(n, generator=g)]
    return x, y


def test_knn_and_linear_probe_on_separable_features():
    x, y = _blobs()
    assert knn_accuracy(x[:150], y[:150], x[150:], y[150:], k=20) == 1.0
    assert linear_probe(x[:150], y[:150], x[150:], y[150:])["test_acc"] == 1.0


def test_svm_cv_separable_and_chance():
    x, y = _blobs(120)
    res = svm_cv_accuracy(x, y, seed=0, folds=5, inner_folds=3)
    assert res["acc_mean"] == 1.0 and res["protocol"]["outer_folds"] == 5
    xs, ys = _blobs(120, shuffle=True)
    chance = svm_cv_accuracy(xs, ys, seed=0, folds=5, inner_folds=3)["acc_mean"]
    assert chance < 0.45  # 4 classes: chance 0.25
    assert svm_cv_accuracy(x, y, seed=1, folds=5, inner_folds=3)["protocol"]["seed"] == 1
    with pytest.raises(ValueError, match="NaN"):
        svm_cv_accuracy(torch.full((10, 2), float("nan")), torch.arange(10) % 2)


def test_svm_precomputed_kernel_matches_gridsearch_reference():
    # overlapping classes with unscaled features, so C and gamma matter and folds disagree on C
    g = torch.Generator().manual_seed(3)
    y = torch.arange(150) % 3
    x = (torch.randn(150, 6, generator=g) + 2.0 * torch.nn.functional.one_hot(y, 6)) * torch.tensor([1, 3, 10, 1, 1, 5.0])
    fast = svm_cv_accuracy(x, y, seed=2, folds=5, inner_folds=3)
    ref = svm_cv_accuracy(x, y, seed=2, folds=5, inner_folds=3, precomputed=False)
    assert fast["fold_accs"] == pytest.approx(ref["fold_accs"], abs=1e-12)
    assert [p["C"] for p in fast["chosen_params"]] == [p["C"] for p in ref["chosen_params"]]
    assert len({p["C"] for p in ref["chosen_params"]}) > 1 and 0.5 < ref["acc_mean"] < 1.0


def test_metrics():
    z = torch.nn.functional.normalize(torch.randn(50, 3), dim=1)
    assert metrics.alignment(z, z) == pytest.approx(0.0, abs=1e-6)
    # identical points: uniformity 0 (log 1), conditional entropy maximal (uniform weights)
    same = torch.ones(10, 4)
    assert metrics.uniformity(same) == pytest.approx(0.0, abs=1e-6)
    assert metrics.conditional_entropy(same) == pytest.approx(math.log(9), abs=1e-5)
    assert metrics.conditional_entropy(z) < math.log(49)
    views = torch.randn(2, 8, 4)
    assert metrics.positive_weight_entropy(views) == pytest.approx(0.0, abs=1e-6)  # one positive
    assert metrics.positive_weight_entropy(torch.ones(5, 8, 4)) == pytest.approx(math.log(4), abs=1e-5)
    tr = metrics.TemperatureTrace()
    for s, t in enumerate([0.1, 0.12, 0.15]):
        tr.update(s, t)
    assert tr.summary()["tau_last"] == 0.15 and tr.summary()["tau_min"] == 0.1
