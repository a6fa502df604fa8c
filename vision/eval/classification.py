"""Frozen-feature classification: weighted kNN (Wu et al. 2018: k = 200, cosine, votes
exp(s / 0.1)) and a linear probe (standardised features, logistic regression), both on the
standard test split, from backbone features extracted once.

``ClassificationEvaluator(data)(features_fn) -> {"knn_acc", "linear_acc", "linear_train_acc"}``; of features
streamed into banks (:class:`suite.eval.bank.FeatureBank`), ``from_banks`` (the probe in torch, the kNN over chunks
of the bank) adds each stage's seconds, ``eval_knn_s`` and ``eval_probe_s``.
"""
from __future__ import annotations

from typing import Callable

import time

import torch
from torch import Tensor

from suite.eval import extract_features, knn_accuracy, linear_probe
from suite.eval.bank import FeatureBank
from suite.eval.linear import logistic_probe


def batches(x: Tensor, batch_size: int) -> list[Tensor]:
    return list(x.split(batch_size))


class ClassificationEvaluator:
    """kNN and linear-probe accuracy of ``encode`` (uint8 images (B, C, H, W) -> features (B, D))."""

    def __init__(self, train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, num_classes: int,
                 knn_k: int = 200, knn_t: float = 0.1, linear: bool = True, batch_size: int = 512,
                 probe_max_iter: int = 1000) -> None:
        self.train_x, self.train_y, self.test_x, self.test_y = train_x, train_y, test_x, test_y
        self.num_classes, self.knn_k, self.knn_t = num_classes, knn_k, knn_t
        self.linear, self.batch_size, self.probe_max_iter = linear, batch_size, probe_max_iter

    @property
    def primary_metric(self) -> str:
        """The headline recorded in the registry: linear-probe accuracy when the probe runs, else kNN."""
        return "linear_acc" if self.linear else "knn_acc"

    def features(self, encode: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
        tr = extract_features(encode, batches(self.train_x, self.batch_size))  # (N_train, D)
        te = extract_features(encode, batches(self.test_x, self.batch_size))  # (N_test, D)
        return tr, te

    def from_features(self, tr: Tensor, te: Tensor) -> dict[str, float]:
        out = {"knn_acc": knn_accuracy(tr, self.train_y, te, self.test_y, k=self.knn_k, temperature=self.knn_t,
                                       num_classes=self.num_classes)}
        if self.linear:
            res = linear_probe(tr, self.train_y, te, self.test_y, max_iter=self.probe_max_iter)
            out["linear_acc"], out["linear_train_acc"] = res["test_acc"], res["train_acc"]
        return out

    def from_banks(self, tr: FeatureBank, te: FeatureBank, device: torch.device | str | None = None) -> dict[str, float]:
        """kNN and the probe (:func:`suite.eval.linear.logistic_probe`: scikit-learn's objective in torch) on the
        features of two banks as stored, on ``device`` a chunk at a time; each stage's seconds beside them."""
        t0 = time.perf_counter()
        out = {"knn_acc": knn_accuracy(tr.x, tr.y, te.x, te.y, k=self.knn_k, temperature=self.knn_t,
                                       num_classes=self.num_classes, unit=True, device=device)}
        out["eval_knn_s"] = time.perf_counter() - t0
        if self.linear:
            t0 = time.perf_counter()
            res = logistic_probe(tr, tr.y, te, te.y, max_iter=self.probe_max_iter, num_classes=self.num_classes,
                                 device=device)
            out["linear_acc"], out["linear_train_acc"] = res["test_acc"], res["train_acc"]
            out["eval_probe_s"] = time.perf_counter() - t0
        return out

    def __call__(self, encode: Callable[[Tensor], Tensor]) -> dict[str, float]:
        with torch.inference_mode():
            tr, te = self.features(encode)
        return self.from_features(tr, te)
