"""Embedding geometry on test batches: alignment and uniformity (Wang & Isola 2020, Eq. 4-5) of
projections of two augmented views, and CACR's conditional entropy H(X^-|X) (Eq. 8; maximum
log(B - 1) with B images per batch), averaged over test batches as in CACR Fig. 3.

``GeometryEvaluator(test_x, augment)(project) -> {"alignment", "uniformity", "cond_entropy",
"cond_entropy_max"}``.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from suite.metrics import alignment, conditional_entropy, uniformity
from suite.train.seeding import forked_rng
from vision.transforms import ViewAugment


class GeometryEvaluator:
    def __init__(self, test_x: Tensor, augment: ViewAugment, batch_size: int = 256, max_batches: int = 20,
                 seed: int = 0) -> None:
        if augment.num_views < 2:
            raise ValueError("GeometryEvaluator needs an augmentation with at least 2 views")
        self.test_x, self.augment, self.batch_size = test_x, augment, batch_size
        self.max_batches, self.seed = max_batches, seed

    @torch.inference_mode()
    def __call__(self, project: Callable[[Tensor], Tensor]) -> dict[str, float]:
        n_full = self.test_x.shape[0] // self.batch_size
        if n_full == 0:
            raise ValueError(f"need at least batch_size = {self.batch_size} test images, got {self.test_x.shape[0]}")
        sums = {"alignment": 0.0, "uniformity": 0.0, "cond_entropy": 0.0}
        nb = min(n_full, self.max_batches)
        with forked_rng(self.seed):
            for b in range(nb):  # a loop over batches
                x = self.test_x[b * self.batch_size : (b + 1) * self.batch_size]
                v = self.augment(x).views[:2]  # (2, B, C, S, S)
                z = project(v.flatten(0, 1)).float().view(2, x.shape[0], -1)  # (2, B, d)
                sums["alignment"] += alignment(z[0], z[1])
                sums["uniformity"] += uniformity(torch.cat([z[0], z[1]]))
                sums["cond_entropy"] += conditional_entropy(z[0])
        out = {k: v / nb for k, v in sums.items()}
        out["cond_entropy_max"] = math.log(self.batch_size - 1)
        return out
