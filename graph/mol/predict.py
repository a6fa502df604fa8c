"""Predictions of a fine-tuned molecular model for new molecules: ``suite graph predict``.

The model is the export of a fine-tuning on the user's own CSV (:mod:`graph.mol.finetune` with ``data``):
``model.safetensors`` and ``config.json`` (the encoder's layers, width and featuriser vocabulary, the targets in output
order, the task, the target scaling), read as data (safetensors and JSON; nothing is unpickled).

:func:`predict_file` writes one row per input row, in the input's order: the SMILES as given and one column per
target (a regression's prediction in the target's units, a classification's probability of class 1). A SMILES that
does not featurise gets empty cells; it is counted and named in the one summary line (:attr:`Prediction.line`), never
dropped.

Example:
    >>> p = predict_file("runs/mol-finetune/my_mols-3f2a9c0d-none-s0-1a2b3c4d", "new.csv", out="preds.csv")
    >>> print(p.line)  # "preds.csv: 40 molecules, predictions of logS, pKa (regression); 1 SMILES not featurised ..."
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from graph.mol.data import TASKS, Featurizer, MolGraphs, _table, featurize, smiles_column_of
from graph.mol.model import MolGIN, MolPredictor
from suite.config import is_number
from suite.pretrained import MAPPING, POSITIVE_INT, Field, load_export, load_state

PREDICTOR_TYPE = "hu_mol_predictor"  # config.json's model_type of a fine-tuned GIN + linear head
REQUIRED: dict[str, Field] = {
    "num_layers": POSITIVE_INT, "dim": POSITIVE_INT, "featurizer": MAPPING,
    "targets": ("a non-empty list of target names",
                lambda v: isinstance(v, list) and bool(v) and all(isinstance(t, str) for t in v)),
    "task": (f"one of {TASKS}", lambda v: v in TASKS)}


@dataclass
class FinetunedMol:
    """A fine-tuned model read back: ``model`` (a :class:`graph.mol.model.MolPredictor` in eval mode), its
    ``config`` (``config.json``), the folder it came from."""

    model: MolPredictor
    config: dict[str, Any]
    path: Path

    @property
    def targets(self) -> list[str]:
        return list(self.config["targets"])

    @property
    def task(self) -> str:
        return str(self.config["task"])

    @torch.no_grad()
    def predict(self, graphs: MolGraphs, batch_size: int = 512, device: str | torch.device = "cpu") -> Tensor:
        """Predictions (G, T) in float64: a regression's in the targets' units, a classification's probabilities."""
        model = self.model.to(device).eval()
        outs = [model(graphs.batch(chunk).to(device)).double().cpu() for chunk in torch.arange(len(graphs)).split(batch_size)]
        out = torch.cat(outs) if outs else torch.zeros(0, len(self.targets), dtype=torch.float64)  # (G, T)
        if self.task == "classification":
            return torch.sigmoid(out)
        s = self.config["target_scaling"]
        return out * torch.tensor(s["std"], dtype=torch.float64) + torch.tensor(s["mean"], dtype=torch.float64)


def load_finetuned(path: str | Path) -> FinetunedMol:
    """The model a fine-tuning on a user's CSV exported (a run folder or its ``export/``). Every way the folder can be
    wrong (not a fine-tuned model, a config without a field, scaling that does not match the targets, weights that do
    not match the config) is a ``ValueError`` naming the file."""
    ex = load_export(path, PREDICTOR_TYPE, REQUIRED)
    c, where = ex.config, Path(ex.path) / "config.json"
    try:
        feat = Featurizer(**{k: tuple(v) if isinstance(v, list) else v for k, v in c["featurizer"].items()})
    except TypeError as exc:
        raise ValueError(f"{where}: featurizer is not a featurizer vocabulary ({exc})") from None
    if feat.name not in ("hu", "ogb"):
        raise ValueError(f"{where}: featurizer {feat.name!r} is not one this version reads ('hu' or 'ogb')")
    n = len(c["targets"])
    if c["task"] == "regression":
        s = c.get("target_scaling")
        ok = isinstance(s, dict) and all(isinstance(s.get(k), list) and len(s[k]) == n and
                                         all(is_number(x) for x in s[k])
                                         for k in ("mean", "std"))
        if not ok:
            raise ValueError(f"{where}: a regression needs target_scaling {{mean, std}}, each {n} numbers (one per "
                             f"target), got {s!r}")
    try:
        model = MolPredictor(MolGIN(c["num_layers"], c["dim"], 0.0, feat), n)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    load_state(model, ex.weights, ex.path)  # names and shapes checked: a config that does not match is named
    return FinetunedMol(model.eval(), c, Path(ex.path))


@dataclass
class Prediction:
    """What :func:`predict_file` wrote: the output file, the number of rows, the targets, and the rows whose SMILES did
    not featurise (``(line in the input, SMILES)``; their predictions are empty)."""

    out: Path
    rows: int
    targets: list[str]
    task: str
    failed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def line(self) -> str:
        """The one summary line."""
        head = (f"{self.out}: {self.rows} molecules, predictions of {', '.join(self.targets)} ({self.task}"
                f"{', probability of class 1' if self.task == 'classification' else ''})")
        if not self.failed:
            return head + "; every SMILES featurised"
        named = ", ".join(f"line {i} {s!r}" for i, s in self.failed[:5]) + (", ..." if len(self.failed) > 5 else "")
        return f"{head}; {len(self.failed)} SMILES not featurised, their predictions left empty: {named}"


def default_out(data: str | Path) -> Path:
    """``<input stem>_preds.csv`` beside the input (chemprop's default)."""
    p = Path(data)
    return p.with_name(f"{p.name.split('.')[0]}_preds.csv")


def predict_file(model: str | Path | FinetunedMol, data: str | Path, smiles_column: str | None = None,
                 out: str | Path | None = None, batch_size: int = 512, device: str = "cpu") -> Prediction:
    """Predict every molecule of the CSV ``data`` (its SMILES column: ``smiles_column``, else the one the model was
    trained on where the file has it, else a column named smiles, else the first) and write ``out`` (default
    :func:`default_out`): the input's rows in order, the SMILES column as given and one column per target."""
    from suite.safeio import write_atomic
    from suite.train import resolve_device

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    data = Path(data)
    target = Path(out) if out else default_out(data)
    if target.exists() and target.resolve() == data.resolve():
        raise ValueError(f"--out {target} is the input file; give another path")
    if target.is_dir():
        raise ValueError(f"--out {target} is a folder; give a file path")
    dev = resolve_device(device)
    fm = model if isinstance(model, FinetunedMol) else load_finetuned(model)  # the model before the data is read
    df = _table(data, "molecule CSV", keep_blank=True)
    trained = fm.config.get("smiles_column")
    col = smiles_column or (trained if trained in df.columns else None)
    col = smiles_column_of(df, data, col)
    smiles = [s.strip() for s in df[col].tolist()]
    preds = np.full((len(smiles), len(fm.targets)), np.nan)  # (G, T): empty where the SMILES does not featurise
    graphs = None
    with warnings.catch_warnings():  # skipped molecules are named in the summary line, not in a warning
        warnings.simplefilter("ignore")
        try:
            graphs = featurize(smiles, fm.config["featurizer"]["name"], what=str(data))
        except ValueError as exc:
            if "failed to featurise" not in str(exc):
                raise
    kept: list[int] = []
    if graphs is not None:
        assert graphs.source_index is not None
        kept = graphs.source_index.tolist()
        preds[kept] = fm.predict(graphs, batch_size, dev).numpy()
    kept_set = set(kept)
    failed = [(i + 2, s) for i, s in enumerate(smiles) if i not in kept_set]  # line numbers of the file (header: 1)
    import pandas as pd

    names = [t if t != col else f"{t}_pred" for t in fm.targets]
    table = pd.DataFrame({col: df[col].tolist(), **{n: preds[:, k] for k, n in enumerate(names)}})
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, table.to_csv(index=False, na_rep=""), what="predictions")
    return Prediction(target, len(smiles), fm.targets, fm.task, failed)
