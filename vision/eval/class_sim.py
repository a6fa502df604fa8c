"""Learned class similarities (X-CLR Fig. 4, App. A.6): for every pair of classes, the mean cosine similarity of
the backbone features over the Cartesian product of ``per_class`` images of each (100 in the paper: 10,000
similarities per pair).

Shapes: features (n, d), labels (n,) -> (C, C) symmetric matrix, logged as ``sim_<i>_<j>`` (i <= j).
Example: >>> class_similarity(torch.rand(20, 8), torch.arange(20) % 2, 2).shape
torch.Size([2, 2])
"""
from __future__ import annotations

import torch
from torch import Tensor


def class_similarity(features: Tensor, labels: Tensor, num_classes: int) -> Tensor:
    """(C, C): entry (a, b) is the mean of cos(h_i, h_j) over images i of class a and j of class b (the diagonal
    includes each image with itself, as the paper's product of the 100 examples with themselves does)."""
    h = torch.nn.functional.normalize(features.double(), dim=1)  # (n, d)
    onehot = torch.nn.functional.one_hot(labels.long(), num_classes).double()  # (n, C)
    mean = (onehot / onehot.sum(0).clamp_min(1)).T @ h  # (C, d): per-class mean of unit features
    return (mean @ mean.T).float()  # mean over pairs of the dot products = dot of the means


def as_metrics(sim: Tensor) -> dict[str, float]:
    """``{"sim_<i>_<j>": value}`` for i <= j (the matrix is symmetric)."""
    c = sim.shape[0]
    return {f"sim_{i}_{j}": float(sim[i, j]) for i in range(c) for j in range(i, c)}


def from_metrics(metrics: dict[str, float], num_classes: int) -> Tensor | None:
    """The (C, C) matrix back from :func:`as_metrics`' names; None when an entry is missing."""
    out = torch.empty(num_classes, num_classes)
    for i in range(num_classes):
        for j in range(i, num_classes):
            v = metrics.get(f"sim_{i}_{j}")
            if v is None:
                return None
            out[i, j] = out[j, i] = v
    return out
