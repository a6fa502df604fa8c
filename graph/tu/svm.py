"""GraphCL's SVM evaluation with a seeded split (Sec. 4 of You et al. 2020; protocol of InfoGraph).

RBF SVC on the encoder embeddings of the un-augmented graphs, C in {1e-3, ..., 1e3} chosen by an
inner 5-fold grid search on the training part of each of 10 outer stratified folds; the accuracy
is the mean over outer folds. Unlike the original code the folds are seeded, and the protocol is
returned with every result (for the registry).

Shapes: embeddings (G, d), labels (G,) -> {"acc": float, "acc_std": float, "fold_accs": [...], ...}.
Example:
    >>> SVMEvaluator(seed=0)(emb, y)["acc"]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch import Tensor
from torch_geometric.data import Batch

from suite.eval import svm_cv_accuracy
from suite.eval.cv import SVM_CS


@dataclass
class SVMEvaluator:
    seed: int = 0
    folds: int = 10
    inner_folds: int = 5
    cs: tuple[float, ...] = field(default_factory=lambda: tuple(SVM_CS))
    precomputed: bool = True  # shared precomputed RBF kernel (same result, ~2x faster); False: GridSearchCV
    primary_metric = "acc"  # the headline the registry records (sentence-transformers' evaluator convention)

    def __call__(self, embeddings: Tensor, labels: Tensor) -> dict[str, Any]:
        if embeddings.dim() != 2 or embeddings.shape[0] != labels.shape[0]:
            raise ValueError(f"SVMEvaluator: need embeddings (G, d) and labels (G,); got {tuple(embeddings.shape)} "
                             f"and {tuple(labels.shape)}")
        counts = torch.bincount(labels.long())
        if int(counts[counts > 0].min()) < self.folds:
            raise ValueError(f"SVMEvaluator: a class has fewer than {self.folds} graphs; cannot stratify {self.folds} folds")
        out = svm_cv_accuracy(embeddings.double().numpy(), labels.numpy(), seed=self.seed, folds=self.folds,
                              inner_folds=self.inner_folds, cs=self.cs, precomputed=self.precomputed)
        return {"acc": out["acc_mean"], "acc_std": out["acc_std"], "fold_accs": out["fold_accs"],
                "chosen_C": [p["C"] for p in out["chosen_params"]], "protocol": out["protocol"]}


@torch.no_grad()
def embed_graphs(embed: Callable[[Batch], Tensor], batches: Iterable[Batch]) -> tuple[Tensor, Tensor]:
    """Embeddings and labels of every graph, in loader order. ``embed(batch) -> (B, d)``."""
    zs, ys = [], []
    for b in batches:
        zs.append(embed(b).detach().cpu())
        ys.append(b.y.view(-1).cpu())
    return torch.cat(zs), torch.cat(ys)
