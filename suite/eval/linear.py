"""Linear probe on frozen features: standardised features, multinomial logistic regression.

Two solvers of one objective. :func:`linear_probe`: scikit-learn's ``StandardScaler`` + ``LogisticRegression``
(L-BFGS), for features held as arrays. :func:`logistic_probe`: the same model trained in torch on features held in
a bank (a :class:`suite.eval.bank.FeatureBank` or a tensor), read chunk by chunk so nothing is copied: memory is the
features alone.

The objective of both (scikit-learn's, C = 1): with z = (x - mean) / std (population std, 1 where it is 0),

    min_{W, b}  (1/N) sum_i CE(softmax(W z_i + b), y_i) + ||W||^2 / (2 C N)

(the intercept not penalised), minimised by full-batch L-BFGS from zero (history 10, strong Wolfe line search,
stopped when the largest gradient entry is at most ``tol``: scipy's ``pgtol``, as scikit-learn runs it).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import Tensor

from suite.eval.bank import FeatureBank, bar


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def linear_probe(train_x: Any, train_y: Any, test_x: Any, test_y: Any, C: float = 1.0, max_iter: int = 1000,
                 seed: int = 0) -> dict[str, float]:
    """Fit on (train_x, train_y), report ``{"train_acc", "test_acc"}`` (scikit-learn; the features copied)."""
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter, random_state=seed))
    clf.fit(_np(train_x), _np(train_y))
    return {"train_acc": float(clf.score(_np(train_x), _np(train_y))), "test_acc": float(clf.score(_np(test_x), _np(test_y)))}


Features = Tensor | FeatureBank


def _rows(x: Features, s: int, e: int, dev: torch.device) -> Tensor:
    return x.raw(s, e, dev) if isinstance(x, FeatureBank) else x[s:e].to(dev).float()


def _standardisation(x: Features, n: int, chunk: int, dev: torch.device) -> tuple[Tensor, Tensor]:
    """StandardScaler's mean and scale (population std, 1 where 0), two passes over the chunks in float64."""
    d = x.dim if isinstance(x, FeatureBank) else x.shape[1]
    total = torch.zeros(d, dtype=torch.float64, device=dev)
    for s in range(0, n, chunk):
        total += _rows(x, s, s + chunk, dev).double().sum(0)
    mean = total / n
    sq = torch.zeros(d, dtype=torch.float64, device=dev)
    for s in range(0, n, chunk):
        sq += (_rows(x, s, s + chunk, dev).double() - mean).pow(2).sum(0)
    std = (sq / n).sqrt()
    std[std < 10 * torch.finfo(torch.float64).eps * mean.abs().clamp_min(1)] = 1.0  # constant features: as sklearn
    return mean.float(), std.float()


def logistic_probe(train_x: Features, train_y: Tensor, test_x: Features, test_y: Tensor, *, C: float = 1.0,
                   max_iter: int = 1000, tol: float = 1e-4, num_classes: int | None = None, chunk_size: int = 1 << 14,
                   device: torch.device | str | None = None, desc: str = "linear probe",
                   fitted: dict[str, Tensor] | None = None) -> dict[str, float]:
    """Multinomial logistic regression on standardised features (the module's objective, scikit-learn's with
    ``C``), trained by full-batch L-BFGS in torch over the stored features a chunk at a time (each pass over them a
    step of the progress bar, whose ETA is a bound: L-BFGS stops when it converges). Reports ``{"train_acc",
    "test_acc"}``.

    Where it departs from scikit-learn: every class has its own weights (scikit-learn fits one vector for two
    classes, whose penalty is then half as strong) and classes absent from ``train_y`` keep theirs (scikit-learn
    drops them); float32 with float64 sums of the standardisation.

    ``fitted``, a dict, receives the model: ``w`` (C, d) and ``b`` (C,) on the standardised features, ``mean`` and
    ``std`` (d,), ``passes`` (the passes over the features).

    Shapes: train_x (N, d), train_y (N,), test_x (M, d), test_y (M,) -> two scalars.
    Example: >>> x = torch.randn(40, 5); logistic_probe(x, (x[:, 0] > 0).long(), x, (x[:, 0] > 0).long())["train_acc"]
    1.0
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    n, m = int(train_y.shape[0]), int(test_y.shape[0])
    if n == 0:
        raise ValueError("the linear probe needs training features")
    y_tr, y_te = train_y.to(dev).long(), test_y.to(dev).long()
    c = num_classes or int(max(int(y_tr.max()), int(y_te.max()) if m else 0)) + 1
    mean, std = _standardisation(train_x, n, chunk_size, dev)
    d = mean.shape[0]
    w = torch.zeros(c, d, device=dev, requires_grad=True)  # (C, d)
    b = torch.zeros(c, device=dev, requires_grad=True)  # (C,)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, tolerance_grad=tol, tolerance_change=1e-12,
                            history_size=10, line_search_fn="strong_wolfe")
    progress = bar(max_iter, desc, unit="pass")
    passes = [0]

    def logits(x: Features, s: int, e: int) -> Tensor:
        return ((_rows(x, s, e, dev) - mean) / std) @ w.T + b  # (B, C)

    def closure() -> Tensor:
        opt.zero_grad(set_to_none=False)
        total = torch.zeros((), dtype=torch.float64, device=dev)
        for s in range(0, n, chunk_size):
            loss = F.cross_entropy(logits(train_x, s, s + chunk_size), y_tr[s : s + chunk_size], reduction="sum") / n
            loss.backward()  # the gradient summed chunk by chunk: no graph over the whole bank
            total += loss.detach().double()
        reg = w.pow(2).sum() / (2 * C * n)
        reg.backward()
        progress.update(1)
        passes[0] += 1
        return (total + reg.detach().double()).float()

    try:
        with torch.enable_grad():
            opt.step(closure)
    finally:
        progress.close()

    if fitted is not None:
        fitted.update(w=w.detach(), b=b.detach(), mean=mean, std=std, passes=torch.tensor(passes[0]))

    @torch.no_grad()
    def accuracy(x: Features, y: Tensor) -> float:
        hits = sum(int((logits(x, s, s + chunk_size).argmax(1) == y[s : s + chunk_size]).sum())
                   for s in range(0, y.shape[0], chunk_size))
        return hits / max(1, y.shape[0])

    return {"train_acc": accuracy(train_x, y_tr), "test_acc": accuracy(test_x, y_te)}
