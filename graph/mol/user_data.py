"""A user's own molecules (issue 80): a CSV in chemprop's layout (a SMILES column, one column per target, an optional
split column) read and checked as a :class:`TargetTable` (:func:`read_target_table`), its SMILES column found
(:func:`smiles_column_of`), and the fingerprint of its content (:func:`content_fingerprint`) that names the data in a
run. Featurising the SMILES is :func:`graph.mol.data.featurize`'s."""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from suite.safeio import read_text

TASKS = ("classification", "regression")
SPLIT_NAMES = {"train": "train", "val": "valid", "valid": "valid", "validation": "valid", "test": "test"}


@dataclass
class TargetTable:
    """A CSV of the user's molecules as read: SMILES (one per row, in file order), targets (G, T) float32 with NaN =
    missing, the target names, the task (given or inferred) with the reason, and the given split's part of every row
    ("train" / "valid" / "test"), or None."""

    smiles: list[str]
    y: Tensor
    targets: list[str]
    task: str
    task_reason: str
    smiles_column: str
    split: list[str] | None = None


def _table(path: Path, what: str, keep_blank: bool = False) -> Any:
    """``path`` as a table of strings (every cell as written, an empty cell ``""``; ``keep_blank``: a blank line is a
    row of empty cells, so that the rows are the file's lines); a missing or malformed file is a ``ValueError`` naming
    it."""
    import pandas as pd

    if not path.is_file():
        raise ValueError(f"{what} not found: {path}")
    text = read_text(path, what=what)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True,
                         skip_blank_lines=not keep_blank)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path}: not a readable CSV ({' '.join(str(exc).split())})") from exc
    if df.shape[0] == 0:
        raise ValueError(f"{path}: no rows below the header")
    df.columns = [str(c).strip() for c in df.columns]
    return df


def smiles_column_of(df: Any, path: Path, column: str | None) -> str:
    """The SMILES column: ``column`` when given (it must exist), else a column named ``smiles`` (any case), else the
    first column (chemprop's convention)."""
    cols = list(df.columns)
    if column:
        if column not in cols:
            raise ValueError(f"{path}: no SMILES column {column!r}; columns: {cols[:10]}")
        return column
    return next((c for c in cols if c.lower() == "smiles"), cols[0])


def read_target_table(path: str | Path, smiles_column: str | None = None, target_columns: Sequence[str] = (),
                      task: str | None = None, split_column: str | None = None) -> TargetTable:
    """Read a CSV of the user's molecules (chemprop's layout: a SMILES column and one column per target).

    ``target_columns`` empty: every column but the SMILES and the split column. A target cell is a number or empty
    (missing, masked as MoleculeNet does); anything else is a ``ValueError`` naming the file, line, column and value.
    ``task`` None: classification when every value is 0 or 1, else regression (the reason is kept); a classification
    target with another value is refused. ``split_column``: each row's part, train / val (valid, validation) / test.
    """
    path = Path(path)
    df = _table(path, "molecule CSV")
    scol = smiles_column_of(df, path, smiles_column)
    cols = list(df.columns)
    if split_column and split_column not in cols:
        raise ValueError(f"{path}: no split column {split_column!r}; columns: {cols[:10]}")
    targets = list(target_columns) or [c for c in cols if c not in (scol, split_column)]
    if not targets:
        raise ValueError(f"{path}: no target column (the file has only {cols}); give --target-columns")
    if missing := [t for t in targets if t not in cols]:
        raise ValueError(f"{path}: target column(s) {missing} not found; columns: {cols[:10]}")
    if clash := [t for t in targets if t in (scol, split_column)]:
        raise ValueError(f"{path}: column {clash[0]!r} cannot be a target and the SMILES or split column")
    if len(set(targets)) != len(targets):
        raise ValueError(f"{path}: target columns {targets} name a column twice")
    cells = df[targets].apply(lambda c: c.str.strip())
    raw = cells.apply(lambda c: c.map(_number)).to_numpy(dtype=np.float64)  # (G, T), NaN: empty or not a number
    bad = np.isnan(raw) & (cells.to_numpy() != "") & ~np.isin(cells.to_numpy(), ("nan", "NaN", "NA"))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{path}: line {r + 2} column {targets[c]!r}: {cells.iat[r, c][:30]!r} is not a number "
                         f"({int(bad.sum())} such cell(s); an empty cell is a missing label)")
    if not np.isfinite(raw[~np.isnan(raw)]).all():
        r, c = np.argwhere(np.isinf(raw))[0]
        raise ValueError(f"{path}: line {r + 2} column {targets[c]!r}: {cells.iat[r, c]!r} is not a finite number")
    if empty := [t for k, t in enumerate(targets) if np.isnan(raw[:, k]).all()]:
        raise ValueError(f"{path}: target column(s) {empty} hold no value")
    binary = np.isin(raw[~np.isnan(raw)], (0.0, 1.0)).all()
    if task is None or task == "":
        task = "classification" if binary else "regression"
        reason = ("inferred: every target value is 0 or 1" if binary else
                  "inferred: target values other than 0 and 1")
    elif task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
    else:
        reason = "given"
        if task == "classification" and not binary:
            r, c = np.argwhere(~np.isnan(raw) & ~np.isin(raw, (0.0, 1.0)))[0]
            raise ValueError(f"{path}: line {r + 2} column {targets[c]!r}: {cells.iat[r, c]!r} is not a class label "
                             "(0 or 1) of a classification target")
    parts = None
    if split_column:
        given = df[split_column].str.strip().str.lower()
        unknown = ~given.isin(list(SPLIT_NAMES))
        if unknown.any():
            r = int(np.argmax(unknown.to_numpy()))
            raise ValueError(f"{path}: line {r + 2} column {split_column!r}: {df[split_column].iat[r]!r} is not train, "
                             "val or test")
        parts = [SPLIT_NAMES[v] for v in given]
    smiles = [s.strip() for s in df[scol].tolist()]
    return TargetTable(smiles, torch.from_numpy(raw.astype(np.float32)), targets, task, reason, scol, parts)


def _number(text: str) -> float:
    try:
        return float(text) if text else float("nan")
    except ValueError:
        return float("nan")


def content_fingerprint(path: str | Path) -> str:
    """12 hex digits of the SHA-256 of the file's bytes (:func:`suite.inputs.data_identity`'s digest of its content):
    the same molecules under another name or place have the same fingerprint, one changed byte another."""
    from suite.inputs import data_identity

    p = Path(path)
    ident = data_identity(p)
    return str(ident.get("files", {}).get(p.name, ident["digest"]))[:12]
