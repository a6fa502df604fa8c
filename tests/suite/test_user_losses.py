"""A user's own loss wherever a loss is named (issue 34): ``module:Class``, ``file.py:Class`` and the ``suite.losses``
entry-point group; the self-check's one-line refusals; the origin that makes a changed loss a new setting; the
front-ends' refusal of a loss needing what they cannot give; and ``--loss file.py:Class`` on the training commands."""
from __future__ import annotations

import json
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

import suite.losses as L
from suite import presets
from suite.losses import registry as loss_base
from suite.losses.user import LossError, self_check
from suite.registry import Registry

LOSSES = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F

    class CosMargin(nn.Module):
        """Positives together, others below a margin."""
        def __init__(self, margin: float = 0.2, scale: float = 1.0):
            super().__init__()
            self.margin, self.scale = margin, scale
        def forward(self, z_a, z_b):
            a, b = F.normalize(z_a, dim=1), F.normalize(z_b, dim=1)
            s = a @ b.T
            off = s - torch.eye(len(s), dtype=s.dtype) * 10
            return self.scale * ((1 - s.diagonal()).mean() + F.relu(off - self.margin).mean())

    class NeedsLabels(CosMargin):
        requires = ("labels",)
        def forward(self, z_a, z_b, labels=None):
            return super().forward(z_a, z_b)

    class MultiView(nn.Module):
        multi_view = True
        def forward(self, z_a, z_b=None):
            v = z_a if z_b is None else torch.stack([z_a, z_b])
            return v.var(0).mean()

    class BrokenMultiView(MultiView):
        def forward(self, z_a, z_b=None):
            if z_b is None:
                return z_a.sum(0)
            return super().forward(z_a, z_b)

    class NotScalar(nn.Module):
        def forward(self, z_a, z_b):
            return (z_a - z_b).pow(2).sum(1)

    class NoGrad(nn.Module):
        def forward(self, z_a, z_b):
            return torch.ones((), dtype=z_a.dtype)

    class OneInput(nn.Module):
        def forward(self, z_a, z_b):
            return z_a.pow(2).mean() + 0 * z_b.detach().sum()

    class BadSignature(nn.Module):
        def forward(self, x):
            return x.sum()

    class NaN(nn.Module):
        def forward(self, z_a, z_b):
            return (z_a * z_b).sum() * float("nan")

    class NotAModule:
        pass
''')


@pytest.fixture()
def losses_file(tmp_path: Path) -> Path:
    p = tmp_path / "my_losses.py"
    p.write_text(LOSSES)
    return p


def test_file_spec_builds_with_its_defaults_and_overrides(losses_file: Path) -> None:
    built = presets.make_loss("simclr", f"{losses_file}:CosMargin", {"margin": 0.3})
    assert built.name == f"{losses_file}:CosMargin" and built.loss.name == built.name
    assert built.hparams == {"margin": 0.3, "scale": 1.0} and built.preset is None and built.views == 2
    assert built.origin is not None and len(built.origin["sha256"]) == 64 and "package" not in built.origin
    assert not built.loss.multi_view and built.loss.requires == () and not built.loss.has_negatives


def test_module_spec_and_its_origin(losses_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(losses_file.parent))
    built = presets.make_loss("text", "my_losses:CosMargin")
    assert built.origin == {"import": "my_losses:CosMargin",
                            "sha256": presets.loss_origin(f"{losses_file}:CosMargin")["sha256"]}  # type: ignore[index]


@pytest.mark.parametrize("cls,message", [
    ("NotScalar", "returned a tensor of shape (8,)"),
    ("NoGrad", "gives no gradient to its inputs"),
    ("OneInput", "gives no gradient to input 1"),
    ("BadSignature", "wrong call signature"),
    ("NaN", "returned a non-finite value"),
    ("NotAModule", "is not a loss (not a torch.nn.Module"),
    ("Missing", "has no class 'Missing'"),
    ("BrokenMultiView", "multi-view (V, N, d)"),
])
def test_bad_losses_are_one_line_naming_the_class(losses_file: Path, cls: str, message: str) -> None:
    with pytest.raises(LossError) as exc:
        presets.make_loss("graph_tu", f"{losses_file}:{cls}")
    text = str(exc.value)
    assert message in text and f":{cls}" in text and "\n" not in text


@pytest.mark.parametrize("spec,message", [
    ("nosuch_module_xyz:Loss", "module 'nosuch_module_xyz' not found"),
    ("missing/file.py:Loss", "file missing/file.py not found"),
    ("a b:Loss", "neither a module path"),
    ("x.py:", "expected module:Class"),
])
def test_unresolvable_names(spec: str, message: str) -> None:
    with pytest.raises(LossError, match=message):
        presets.make_loss("text", spec)


def test_unknown_hyper_parameter_and_needs(losses_file: Path) -> None:
    with pytest.raises(LossError, match=r"no hyper-parameter\(s\) \['tau'\]; valid: \['margin', 'scale'\]"):
        presets.make_loss("simclr", f"{losses_file}:CosMargin", {"tau": 0.1})
    with pytest.raises(ValueError, match=r"requires \['labels'\], which text training does not provide"):
        presets.make_loss("text", f"{losses_file}:NeedsLabels", provides=("similarity",))
    with pytest.raises(ValueError, match=r"requires \['labels'\]"):
        presets.make_loss("text", "supcon", provides=("similarity",))
    assert presets.make_loss("simclr", f"{losses_file}:NeedsLabels", provides=("labels",)).loss.requires == ("labels",)
    assert presets.make_loss("simclr", f"{losses_file}:MultiView").loss.multi_view


def test_build_by_name_never_imports_user_code(losses_file: Path) -> None:
    """what a checkpoint, export or registry row records is a name: suite.losses.build refuses a class path"""
    before = set(sys.modules)
    with pytest.raises(ValueError, match="names a user's class"):
        L.build(f"{losses_file}:CosMargin")
    assert not [m for m in set(sys.modules) - before if m.startswith("suite_user_loss")]


def test_origin_changes_the_setting(losses_file: Path, tmp_path: Path) -> None:
    """a changed source is a new experiment (folder, resume, registry hash); two classes of one name never pool"""
    from dataclasses import dataclass

    from benchmarks.runner.suitefile import Job, _loss_origin
    from suite.config import experiment_config, experiment_hash

    @dataclass
    class Cfg:
        loss: str
        seed: int = 0

    spec = f"{losses_file}:CosMargin"
    h1 = experiment_hash(Cfg(spec))
    job1 = Job("graph", "tu", (("loss", spec),), 0).hash
    assert experiment_config(Cfg(spec))["loss_origin"]["import"] == spec
    assert "loss_origin" not in experiment_config(Cfg("macl"))  # the built-in losses' identities are unchanged
    other = tmp_path / "other"
    other.mkdir()
    (other / "my_losses.py").write_text(LOSSES.replace("self.scale *", "2 * self.scale *"))
    assert experiment_hash(Cfg(f"{other / 'my_losses.py'}:CosMargin")) != h1
    losses_file.write_text(LOSSES + "\n# changed\n")
    _loss_origin.cache_clear()
    assert experiment_hash(Cfg(spec)) != h1 and Job("graph", "tu", (("loss", spec),), 0).hash != job1


@contextmanager
def installed_package(monkeypatch: pytest.MonkeyPatch, site: Path, module: str, name: str, version: str, source: str,
                      entry_points: str, record: bool = False) -> Iterator[Path]:
    """A package ``module`` (``source`` its ``__init__.py``) installed in ``site`` as pip leaves it: its dist-info
    (distribution ``name`` ``version``, ``entry_points`` the ``[suite.losses]`` lines) on the path; the loss registry
    as it was before is restored at the end (the plugins are loaded again meanwhile)."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(source)
    dist = site / f"{module}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist / "entry_points.txt").write_text("[suite.losses]\n" + entry_points)
    if record:
        (dist / "RECORD").write_text(f"{module}/__init__.py,,\n")
    (dist / "top_level.txt").write_text(f"{module}\n")
    monkeypatch.syspath_prepend(str(site))
    saved = (dict(loss_base._REGISTRY), dict(loss_base._PLUGINS), dict(loss_base._PLUGIN_ERRORS))
    monkeypatch.setattr(loss_base, "_plugins_loaded", False)
    try:
        yield site
    finally:
        for live, old in zip((loss_base._REGISTRY, loss_base._PLUGINS, loss_base._PLUGIN_ERRORS), saved):
            live.clear()
            live.update(old)


@pytest.fixture()
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed package declaring ``cos_margin`` under the ``suite.losses`` entry points (its dist-info on the
    path, as pip leaves it)."""
    with installed_package(monkeypatch, tmp_path / "site", "cos_margin_pkg", "cos-margin-pkg", "1.2.3", LOSSES,
                           "cos_margin = cos_margin_pkg:CosMargin\nbroken_plugin = cos_margin_pkg:NotAModule\n",
                           record=True) as site:
        yield site


def test_entry_point_losses_are_found_like_the_built_in_ones(installed_plugin: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from suite.cli import main

    assert "cos_margin" in L.available() and L.defaults("cos_margin") == {"margin": 0.2, "scale": 1.0}
    loss = L.build("cos-margin", margin=0.4)
    assert loss.hparams() == {"margin": 0.4, "scale": 1.0}
    built = presets.make_loss("graph_tu", "cos_margin", aliases=False)
    assert built.name == "cos_margin" and built.origin is not None
    assert (built.origin["package"], built.origin["version"]) == ("cos-margin-pkg", "1.2.3")
    with pytest.raises(ValueError, match="broken_plugin.*not a loss"):
        L.build("broken_plugin")
    assert main(["losses"]) == 0
    out = capsys.readouterr().out
    assert "| cos_margin |" in out and "installed: cos_margin_pkg:CosMargin (cos-margin-pkg 1.2.3)" in out


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], rc: int, *needles: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and all(n in err[0] for n in needles), err


def test_training_commands_take_a_file_loss_and_refuse_a_broken_one(losses_file: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """--loss file.py:Class on `vision pretrain`, `graph tu` and `graph pretrain-mol` (text: tests/text): trains and
    records the loss's name, hyper-parameters and origin; a broken class: one line, exit 2, nothing recorded"""
    from suite.cli import main
    from tests.graph.synthetic import write_synthetic_tu
    from tests.graph.test_mol_train import CORPUS

    reg = Registry(str(tmp_path / "reg.sqlite"))
    tu_root = write_synthetic_tu(tmp_path / "tu", n_graphs=32)
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("SMILES\n" + "\n".join(CORPUS) + "\n")
    commands = {
        "vision": ["vision", "pretrain", "--dataset", "digits", "--encoder", "convnet", "--width", "4", "--epochs", "1",
                   "--batch-size", "64", "--optimizer", "adam", "--train-per-class", "10"],
        "graph": ["graph", "tu", "--dataset", "SYNTH", "--data-root", str(tu_root), "--epochs", "1", "--batch-size", "16",
                  "--svm-folds", "4", "--svm-inner-folds", "2"],
        "mol": ["graph", "pretrain-mol", "--corpus", str(corpus), "--epochs", "1", "--batch-size", "8", "--num-layers", "2",
                "--emb-dim", "16", "--device", "cpu"],
    }
    import os

    old = os.environ.get("SUITE_REGISTRY")
    os.environ["SUITE_REGISTRY"] = reg.url
    try:
        for name, argv in commands.items():
            n_rows = len(reg.runs())
            rc = main([*argv, "--loss", f"{losses_file}:NotScalar", "--out", str(tmp_path / f"bad-{name}")])
            _one_line_exit_2(capsys, rc, "NotScalar", "returned a tensor of shape")
            assert len(reg.runs()) == n_rows
            rc = main([*argv, "--loss", f"{losses_file}:CosMargin", "--loss-hparams", "margin=0.3",
                       "--out", str(tmp_path / name)])
            assert rc == 0, capsys.readouterr().err
            row = reg.runs()[-1]
            assert row["status"] == "finished" and row["loss"] == f"{losses_file}:CosMargin"
            assert json.loads(row["loss_hparams"]) == {"margin": 0.3, "scale": 1.0}
            assert json.loads(row["config"])["loss_origin"]["sha256"] == presets.loss_origin(row["loss"])["sha256"]  # type: ignore[index]
    finally:
        if old is None:
            os.environ.pop("SUITE_REGISTRY", None)
        else:
            os.environ["SUITE_REGISTRY"] = old


def test_self_check_accepts_every_built_in_loss() -> None:
    for name in L.available():
        loss = L.build(name)
        if not loss.requires or set(loss.requires) <= {"labels", "similarity"}:
            self_check(loss, name)
