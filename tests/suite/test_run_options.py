"""Run options declared once (issue 66): every front-end config inherits :class:`suite.config.RunOptions` and declares
none of its fields itself; ``RUN_OPTIONS`` is derived from the fields; the experiment configs, their hashes and the
defaults of the run options are those of before the change (measured at commit 74a6f6c, written here)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any, ClassVar

import pytest

from suite.config import RUN_OPTION, RunOptions, experiment_config, experiment_hash, run_option_values
from suite.registry import config_hash


def _configs() -> dict[str, type]:
    from graph.mol.finetune import FinetuneMolConfig
    from graph.mol.pretrain import PretrainMolConfig
    from graph.tu.graphcl import TUConfig
    from text.methods.simcse import SimCSEConfig
    from vision.config import PretrainConfig

    return {"vision": PretrainConfig, "simcse": SimCSEConfig, "tu": TUConfig, "mol-pretrain": PretrainMolConfig,
            "mol-finetune": FinetuneMolConfig}


BASE = {f.name for f in dataclasses.fields(RunOptions)}
# each front-end's RUN_OPTIONS tuple before the change, and the options of RunOptions it did not have then
BEFORE = {
    "vision": ({"device", "out", "resume", "registry", "eval_every", "checkpoint_every", "keep_checkpoints", "points",
                "class_similarity", "compile", "log_to", "mlflow_uri", "workers", "checkpoint_steps"}, set()),
    "simcse": ({"out", "device", "resume", "checkpoint_every", "keep_checkpoints", "grad_cache_chunk", "compile",
                "log_to", "mlflow_uri"}, {"registry"}),
    "tu": ({"data_root", "download", "out", "save_embeddings", "device", "resume", "checkpoint_every",
            "keep_checkpoints", "compile", "log_to", "mlflow_uri"}, {"registry"}),
    "mol-pretrain": ({"out", "resume", "keep_checkpoints", "device", "registry", "compile", "log_to", "mlflow_uri"},
                     {"checkpoint_every"}),
    "mol-finetune": ({"data_root", "device", "registry", "eval_batch_size", "out", "resume", "checkpoint_every",
                      "keep_checkpoints", "log_to", "mlflow_uri"}, {"compile"}),
}
# the run options of each default config before the change (the added ones at the run owner's default)
DEFAULTS = {
    "vision": {"checkpoint_every": 1, "compile": False, "device": "auto", "eval_every": 0, "keep_checkpoints": 2,
               "log_to": "", "mlflow_uri": "", "out": "", "registry": True, "resume": True},
    "simcse": {"checkpoint_every": 0, "compile": False, "device": "auto", "grad_cache_chunk": 0, "keep_checkpoints": 1,
               "log_to": "", "mlflow_uri": "", "out": "", "resume": True, "registry": True},
    "tu": {"checkpoint_every": 1, "compile": False, "data_root": None, "device": "cpu", "download": False,
           "keep_checkpoints": 0, "log_to": "", "mlflow_uri": "", "out": "", "resume": True, "save_embeddings": False,
           "registry": True},
    "mol-pretrain": {"compile": False, "device": "auto", "keep_checkpoints": 2, "log_to": "", "mlflow_uri": "",
                     "out": "", "registry": True, "resume": True, "checkpoint_every": 1},
    "mol-finetune": {"checkpoint_every": 10, "data_root": None, "device": "auto", "eval_batch_size": 512,
                     "keep_checkpoints": 0, "log_to": "", "mlflow_uri": "", "out": "", "registry": True, "resume": True,
                     "compile": False},
}


def _declared(cls: type) -> set[str]:
    """The fields the class body of ``cls`` declares itself (its annotated assignments, from its source)."""
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    assert isinstance(node, ast.ClassDef)
    return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


@pytest.mark.parametrize("name", list(BEFORE))
def test_every_front_end_inherits_the_run_options_and_declares_none(name: str) -> None:
    cls = _configs()[name]
    assert issubclass(cls, RunOptions)
    assert not _declared(cls) & BASE, f"{cls.__name__} declares {sorted(_declared(cls) & BASE)} itself"
    assert set(getattr(cls, "RUN_DEFAULTS", {})) | set(getattr(cls, "RUN_HELP", {})) <= BASE


@pytest.mark.parametrize("name", list(BEFORE))
def test_run_options_are_derived_from_the_fields_and_are_those_of_before(name: str) -> None:
    cls = _configs()[name]
    derived = {f.name for f in dataclasses.fields(cls) if f.metadata.get(RUN_OPTION)}
    assert set(cls.RUN_OPTIONS) == derived == BASE | {f.name for f in dataclasses.fields(cls) if f.name not in BASE
                                                      and f.metadata.get(RUN_OPTION)}
    before, added = BEFORE[name]
    assert set(cls.RUN_OPTIONS) == before | added and added <= BASE
    assert run_option_values(cls()) == DEFAULTS[name]
    assert not set(cls.RUN_OPTIONS) & set(experiment_config(cls()))


def _cases() -> dict[str, Any]:
    c = _configs()
    return {
        "vision-default": c["vision"](),
        "vision-moco": c["vision"](framework="moco", loss="macl", epochs=3, device="cpu", out="x", eval_every=2,
                                   grad_cache_chunk=8, class_similarity=10, workers=2, compile=True),
        "simcse-default": c["simcse"](),
        "simcse-sup": c["simcse"](mode="sup", loss="macl", eval_every=50, grad_cache_chunk=4, keep_checkpoints=0),
        "tu-default": c["tu"](),
        "tu-macl": c["tu"](dataset="PROTEINS", loss="macl", epochs=5, eval_epochs=[5], data_root="/d", download=True),
        "molpre-default": c["mol-pretrain"](),
        "molpre-macl": c["mol-pretrain"](loss="macl", limit=100, keep_checkpoints=0, compile=True),
        "finetune-default": c["mol-finetune"](),
        "finetune-init": c["mol-finetune"](dataset="tox21", init="runs/x", seed=3, checkpoint_every=0,
                                           eval_batch_size=64),
    }


# config_hash(experiment_config(cfg)) of each case at commit 74a6f6c, before RunOptions
HASHES = {
    "vision-default": "a5f7dc87c47ea639919e4d6c1e9920d0", "vision-moco": "41cddaa8fea10ffc164c8576bb3cb564",
    "simcse-default": "fbef2869ab48a37099fa7f7721442639", "simcse-sup": "47bf8e967051362c7624b525b6b039db",
    "tu-default": "69aa834bf1815b21f9aef104b1ca870b", "tu-macl": "42b1d31db39c8f279a94639f2084827e",
    "molpre-default": "702030823de8bd835e709c375ceebeae", "molpre-macl": "0dabce6098bfaf9a798e891aca5a88f2",
    "finetune-default": "b0bb2fa45629ae6c763901b2dffae4fa", "finetune-init": "ad57fd763998a2676757c4831d9b0dab",
}


@pytest.mark.parametrize("case", list(HASHES))
def test_config_hashes_are_unchanged(case: str) -> None:
    cfg = _cases()[case]
    assert config_hash(experiment_config(cfg)) == HASHES[case]
    assert experiment_hash(cfg) == HASHES[case][:8]  # the default run folder's name


def test_a_new_front_end_declares_no_run_option() -> None:
    """the one-file recipe (docs/design/run-options.md): a config that inherits RunOptions has every option the run
    owner reads, its own defaults as data, and an experiment config without them"""

    @dataclasses.dataclass
    class ToyConfig(RunOptions):
        RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"keep_checkpoints": 0}
        RUN_HELP: ClassVar[dict[str, str]] = {"out": "the toy's folder"}
        lr: float = 0.1
        seed: int = 0

    cfg = ToyConfig()
    assert set(ToyConfig.RUN_OPTIONS) == BASE and cfg.keep_checkpoints == 0 and RunOptions().keep_checkpoints == 2
    assert experiment_config(cfg) == {"lr": 0.1, "seed": 0}
    assert [f.name for f in dataclasses.fields(ToyConfig)] == [*(f.name for f in dataclasses.fields(RunOptions)),
                                                                "lr", "seed"]
    assert dict(dataclasses.fields(ToyConfig)[0].metadata) == {RUN_OPTION: True, "help": "the toy's folder"}
    with pytest.raises(TypeError, match=r"RUN_DEFAULTS / RUN_HELP name \['epochs'\]"):
        type("Bad", (RunOptions,), {"RUN_DEFAULTS": {"epochs": 3}})


def test_help_lists_the_common_run_options_last() -> None:
    import argparse

    from suite.config import add_config_args

    p = argparse.ArgumentParser()
    add_config_args(p, _configs()["vision"])
    dests = [a.dest for a in p._actions if a.dest != "help"]
    assert dests[-len(BASE):] == [f.name for f in dataclasses.fields(RunOptions)]
