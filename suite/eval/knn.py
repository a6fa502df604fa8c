"""Weighted kNN classifier on cosine similarity (Wu et al. 2018, Sec. 3.4): each of the k nearest
training features votes for its class with weight exp(s / T). Defaults k = 200, T = 0.1."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.no_grad()
def knn_predict(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, num_classes: int, k: int = 200, temperature: float = 0.1,
    batch_size: int = 1024,
) -> Tensor:
    """Predicted labels (M,) for test features (M, d) from training features (N, d) and labels (N,)."""
    if train_x.shape[0] != train_y.shape[0]:
        raise ValueError(f"train features ({train_x.shape[0]}) and labels ({train_y.shape[0]}) differ in length")
    tx = F.normalize(train_x.float(), dim=1)
    k = min(k, tx.shape[0])
    preds = []
    for start in range(0, test_x.shape[0], batch_size):  # batches of queries, not samples
        q = F.normalize(test_x[start : start + batch_size].float(), dim=1)
        sim, idx = (q @ tx.T).topk(k, dim=1)  # (B, k)
        votes = torch.zeros(q.shape[0], num_classes, device=q.device)
        votes.scatter_add_(1, train_y[idx].long(), (sim / temperature).exp())
        preds.append(votes.argmax(1))
    return torch.cat(preds)


def knn_accuracy(train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, k: int = 200,
                 temperature: float = 0.1, num_classes: int | None = None) -> float:
    c = num_classes or int(max(train_y.max(), test_y.max())) + 1
    pred = knn_predict(train_x, train_y, test_x, c, k=k, temperature=temperature)
    return float((pred == test_y.long()).float().mean())
