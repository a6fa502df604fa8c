"""Run identity of the two front-ends ported to the run owner last (text/mlm, suite/gmm.py), beside
tests/suite/test_run_identity.py: their declared run options (device, checkpoint interval, ...) never change where a
run lives, so a restart with other run options resumes it; a field that changes results gives another folder; and the
recorded experiment config leaves the run options out."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest

from suite.config import experiment_config
from suite.train.run import run_folder, runs_root


def _folders() -> dict[str, tuple[Any, Callable[[Any], Path], dict[str, Any], dict[str, Any]]]:
    """name -> (config, the folder its command uses, run-option changes, a change of the experiment)."""
    from text.mlm import MLMConfig, output_dir
    from suite.gmm import GMMConfig, GMMTask

    def gmm(cfg: GMMConfig) -> Path:
        task = GMMTask(cfg)
        return run_folder(cfg, task.name, task.stem(cfg))

    return {
        # without --out: models:mlm-<experiment hash> (pretrain_mlm hands the owner that folder)
        "text mlm": (MLMConfig(), output_dir, {"device": "cuda", "checkpoint_every": 7, "eval_every": 3,
                                               "resume": False}, {"lr": 1e-4}),
        "text mlm (mask)": (MLMConfig(), output_dir, {"device": "cpu"}, {"mask_prob": 0.2}),
        "vision gmm": (GMMConfig(), gmm, {"device": "cuda", "checkpoint_every": 100, "keep_checkpoints": 2,
                                          "points": 250, "resume": False}, {"sigma": 0.2}),
        "vision gmm (order1d)": (GMMConfig(experiment="order1d"), gmm, {"device": "auto"}, {"seed": 1}),
    }


@pytest.mark.parametrize("name", list(_folders()))
def test_run_options_keep_the_folder_and_experiment_fields_change_it(name: str) -> None:
    """`suite text mlm` / `suite vision gmm`: another device / checkpoint interval -> the same run folder (so the run
    resumes) and the same recorded experiment config; another value of an experiment field -> another folder"""
    cfg, folder, options, experiment = _folders()[name]
    declared = set(type(cfg).RUN_OPTIONS)
    assert set(options) <= declared, f"{name}: {sorted(set(options) - declared)} are not declared run options"
    other = dataclasses.replace(cfg, **options)
    assert folder(other) == folder(cfg)
    assert experiment_config(other) == experiment_config(cfg) and not declared & set(experiment_config(cfg))
    assert folder(dataclasses.replace(cfg, **experiment)) != folder(cfg)


def test_gmm_experiments_live_apart() -> None:
    """the two mixture experiments are two registry tasks with their own headline, under their own folders"""
    from suite.gmm import GMMConfig, GMMTask

    a, b = GMMTask(GMMConfig()), GMMTask(GMMConfig(experiment="order1d"))
    assert (a.name, a.primary) == ("gmm-2d", ("ood_acc", "test"))
    assert (b.name, b.primary) == ("gmm-1d-order", ("ordered", "test"))
    assert run_folder(GMMConfig(), a.name, a.stem(GMMConfig())).parent == runs_root() / "gmm-2d"
