"""What an evaluation-only run scored, recorded with its registry row (its experiment config's ``evaluated``), so that
the rows of a table pool only evaluations of one experiment.

A model the run owner exported carries its record (``run.json`` beside the weights, :data:`suite.train.run.PROVENANCE`):
the evaluation records the training run (its id and seed) and the training experiment's ``setting``, the config hash of
its experiment config less what names a row (the seed, the loss and its hyper-parameters), which the seeds and losses
of one training setting share (an evaluation of a supervised model is never pooled with one of an unsupervised model). A packaged model records its package's name and version; a
model without a record (a hub name, a foreign folder), its name.

"""
from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from suite.inputs import export_folder, read_record
from suite.registry import config_hash

ROW = ("seed", "loss", "loss_hparams")  # what names a row, not a setting


def training_record(folder: str | Path) -> dict[str, Any] | None:
    """The run owner's record of an exported model: ``folder/run.json`` or ``folder/export/run.json``; None if there is
    none (:func:`suite.inputs.read_record`: a record that is not a JSON object raises naming the file)."""
    d = export_folder(folder)
    return None if d is None else read_record(d)


def evaluated(model: str | Path, package: str | None = None) -> dict[str, Any]:
    """The identity of what an evaluation scores: ``{"package", "version"}`` of a packaged model, ``{"task", "loss",
    "setting", "run_id", "training_seed"}`` of a model the run owner exported, else ``{"model": name}``."""
    if package is not None:
        return {"package": package, "version": importlib.metadata.version(package)}
    rec = training_record(model) if Path(model).is_dir() else None
    if rec is None:
        return {"model": str(model)}
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    return {"task": rec.get("task"), "loss": rec.get("loss"), "run_id": rec.get("run_id"),
            "setting": config_hash({k: v for k, v in cfg.items() if k not in ROW}), "training_seed": rec.get("seed")}
