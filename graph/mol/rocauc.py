"""ROC-AUC over tasks with missing labels, OGB evaluator convention (ogbg-molhiv/-molpcba).

Per task, only labelled molecules count; a task enters the average only if its split has both
classes. Rank-based (Mann-Whitney) AUC with tie correction, vectorised over molecules.

Shapes: y_true (N, T) with NaN = missing (or ``mask`` (N, T) bool), y_score (N, T) -> dict.
Example: >>> RocAuc()(torch.tensor([[1.], [0.]]), torch.tensor([[0.9], [0.1]]))["rocauc"]  # 1.0
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor


def task_rocauc(y: np.ndarray, s: np.ndarray) -> float:
    """AUC of one task (labels 0/1, no missing); NaN if one class is absent."""
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)  # average ranks for ties
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class RocAuc:
    """Evaluator: ``RocAuc()(y_true, y_score) -> {"rocauc", "tasks_scored", "tasks_skipped"}``."""

    primary_metric = "rocauc"  # headline recorded in the registry

    def __call__(self, y_true: Tensor, y_score: Tensor, mask: Tensor | None = None) -> dict[str, float]:
        y = torch.as_tensor(y_true, dtype=torch.float64).detach().cpu()
        s = torch.as_tensor(y_score, dtype=torch.float64).detach().cpu()
        mk = None if mask is None else torch.as_tensor(mask, dtype=torch.bool).cpu()
        if y.dim() == 1:
            y, s = y[:, None], s[:, None]
            mk = None if mk is None else mk.reshape(-1, 1)
        if y.shape != s.shape:
            raise ValueError(f"y_true {tuple(y.shape)} and y_score {tuple(s.shape)} must have the same shape")
        if mk is not None and mk.shape != y.shape:
            raise ValueError(f"mask {tuple(mk.shape)} must have the shape of y_true {tuple(y.shape)}")
        m = ~torch.isnan(y) if mk is None else mk & ~torch.isnan(y)
        bad = m & ~((y == 0) | (y == 1))
        if bad.any():
            raise ValueError("labels must be 0/1 (or NaN / masked for missing)")
        aucs = [task_rocauc(y[m[:, t], t].numpy(), s[m[:, t], t].numpy()) for t in range(y.shape[1])]  # loop over tasks
        valid = [a for a in aucs if not np.isnan(a)]
        if not valid:
            raise ValueError("no task has both positive and negative labels: ROC-AUC undefined")
        return {"rocauc": float(np.mean(valid)), "tasks_scored": float(len(valid)),
                "tasks_skipped": float(len(aucs) - len(valid))}
