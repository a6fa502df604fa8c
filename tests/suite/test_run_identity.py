"""Run identity in every front-end: the fields a config declares as run options (device, output folder, checkpoint
interval, ...) never change where a run lives, so a restart with other run options resumes it; a field that changes
results always gives another folder."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest

from suite.train.run import run_folder


def _folders() -> dict[str, tuple[Any, Callable[[Any], Path], dict[str, Any], dict[str, Any]]]:
    """name -> (config, its run folder rule, run-option changes, a change of the experiment)."""
    from graph.mol.finetune import FinetuneMolConfig, FinetuneMolTask
    from graph.tu.graphcl import TUConfig, TUTask
    from graph.mol.pretrain import MolPretrainTask, PretrainMolConfig
    from text.methods.simcse import SimCSEConfig, SimCSETask
    from vision.config import PretrainConfig
    from vision.train import PretrainTask

    def owner(task: Any) -> Callable[[Any], Path]:
        return lambda cfg: run_folder(cfg, task.name, task.stem(cfg))

    return {
        "graph tu": (TUConfig(), owner(TUTask(None)),  # type: ignore[arg-type]
                     {"device": "cuda", "checkpoint_every": 5, "keep_checkpoints": 3, "data_root": "/d"}, {"lr": 0.02}),
        "graph pretrain-mol": (PretrainMolConfig(), owner(MolPretrainTask()),
                               {"device": "cuda", "keep_checkpoints": 9, "resume": False}, {"aug_ratio": 0.3}),
        "graph finetune-mol": (FinetuneMolConfig(), owner(FinetuneMolTask()),
                               {"device": "cuda", "checkpoint_every": 1, "eval_batch_size": 7}, {"dropout": 0.1}),
        "text train": (SimCSEConfig(), owner(SimCSETask(SimCSEConfig())),
                       {"device": "cuda", "checkpoint_every": 50, "keep_checkpoints": 0}, {"lr": 1e-4}),
        "vision pretrain": (PretrainConfig(), owner(PretrainTask(PretrainConfig())),
                            {"device": "cuda", "checkpoint_every": 3, "keep_checkpoints": 5, "eval_every": 2},
                            {"lr": 0.5}),
    }


@pytest.mark.parametrize("name", list(_folders()))
def test_run_options_keep_the_folder_and_experiment_fields_change_it(name: str) -> None:
    """every front-end: another device / checkpoint interval -> the same run folder (so the run resumes); another
    value of an experiment field -> another folder (a new run)"""
    cfg, folder, options, experiment = _folders()[name]
    declared = set(type(cfg).RUN_OPTIONS)
    assert set(options) <= declared, f"{name}: {sorted(set(options) - declared)} are not declared run options"
    assert folder(dataclasses.replace(cfg, **options)) == folder(cfg)
    assert folder(dataclasses.replace(cfg, **experiment)) != folder(cfg)
