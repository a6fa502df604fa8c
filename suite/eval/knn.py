"""Weighted kNN classifier on cosine similarity (Wu et al. 2018, Sec. 3.4): each of the k nearest
training features votes for its class with weight exp(s / T). Defaults k = 200, T = 0.1.

The bank is read in chunks of ``chunk_size`` rows and each query batch keeps a running top-k, merged chunk by chunk,
so no block grows with the bank: memory is the features plus (batch_size x chunk_size) similarities.

Shapes: train_x (N, d), train_y (N,), test_x (M, d) -> predictions (M,).
Example: >>> knn_predict(torch.randn(50, 8), torch.arange(50) % 3, torch.randn(4, 8), 3, k=5).shape
torch.Size([4])
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.no_grad()
def knn_predict(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, num_classes: int, k: int = 200, temperature: float = 0.1,
    batch_size: int = 1024, chunk_size: int = 1 << 15, unit: bool = False, device: torch.device | str | None = None,
) -> Tensor:
    """Predicted labels (M,) for test features (M, d) from training features (N, d) and labels (N,); ``unit``: the
    rows are already unit-normalised (a :class:`suite.eval.bank.FeatureBank`'s ``x``, any dtype), else each chunk is
    normalised as it is read. Computed in float32 on ``device`` (default: where ``test_x`` is), the chunks moved
    there one at a time."""
    if train_x.shape[0] != train_y.shape[0]:
        raise ValueError(f"train features ({train_x.shape[0]}) and labels ({train_y.shape[0]}) differ in length")
    dev = torch.device(device) if device is not None else test_x.device
    n = train_x.shape[0]
    k = min(k, n)
    labels = train_y.to(dev).long()

    def rows(x: Tensor, s: int, e: int) -> Tensor:
        r = x[s:e].to(dev).float()
        return r if unit else F.normalize(r, dim=1)

    preds = []
    for qs in range(0, test_x.shape[0], batch_size):  # batches of queries, not samples
        q = rows(test_x, qs, qs + batch_size)  # (B, d)
        best_s = torch.empty(q.shape[0], 0, device=dev)  # running top-k similarities (B, <=k)
        best_i = torch.empty(q.shape[0], 0, dtype=torch.long, device=dev)  # and their bank rows
        for cs in range(0, n, chunk_size):
            sim = q @ rows(train_x, cs, cs + chunk_size).T  # (B, chunk)
            s, i = sim.topk(min(k, sim.shape[1]), dim=1)  # (B, <=k)
            best_s, pos = torch.cat([best_s, s], 1).topk(min(k, best_s.shape[1] + s.shape[1]), dim=1)
            best_i = torch.cat([best_i, i + cs], 1).gather(1, pos)
        votes = torch.zeros(q.shape[0], num_classes, device=dev)  # (B, C)
        votes.scatter_add_(1, labels[best_i], (best_s / temperature).exp())
        preds.append(votes.argmax(1).cpu())
    return torch.cat(preds) if preds else torch.empty(0, dtype=torch.long)


def knn_accuracy(train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, k: int = 200,
                 temperature: float = 0.1, num_classes: int | None = None, unit: bool = False,
                 device: torch.device | str | None = None, chunk_size: int = 1 << 15) -> float:
    c = num_classes or int(max(train_y.max(), test_y.max())) + 1
    pred = knn_predict(train_x, train_y, test_x, c, k=k, temperature=temperature, unit=unit, device=device,
                       chunk_size=chunk_size)
    return float((pred == test_y.cpu().long()).float().mean())
