"""Masked ROC-AUC (OGB convention) against sklearn, and the masked BCE of fine-tuning."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

from graph.mol.finetune import masked_bce
from graph.mol.rocauc import RocAuc

nan = float("nan")


def test_hand_made_with_missing_and_single_class_task() -> None:
    y = torch.tensor([[1, 0, 1], [0, nan, 1], [1, 1, 1], [0, 0, nan], [nan, 1, 1], [1, 0, 1]])
    s = torch.tensor([[0.9, 0.2, 0.5], [0.1, 0.9, 0.1], [0.4, 0.8, 0.3], [0.4, 0.3, 0.9], [0.5, 0.1, 0.2], [0.3, 0.35, 0.4]])
    out = RocAuc()(y, s)
    ref = []
    for t in range(2):  # task 2 has only positives: skipped
        m = ~torch.isnan(y[:, t])
        ref.append(roc_auc_score(y[m, t].numpy(), s[m, t].numpy()))
    assert out["rocauc"] == pytest.approx(float(np.mean(ref)), abs=1e-12)
    assert out["tasks_scored"] == 2 and out["tasks_skipped"] == 1


def test_random_cases_with_ties_match_sklearn() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        y = (torch.rand(50, 4, generator=g) > 0.6).double()
        y[torch.rand(50, 4, generator=g) < 0.3] = nan
        s = torch.randint(0, 5, (50, 4), generator=g).double()  # many ties
        ref = [roc_auc_score(y[~torch.isnan(y[:, t]), t], s[~torch.isnan(y[:, t]), t]) for t in range(4)]
        assert RocAuc()(y, s)["rocauc"] == pytest.approx(float(np.mean(ref)), abs=1e-12)


def test_explicit_mask_and_errors() -> None:
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    s = torch.tensor([0.9, 0.1, 0.2, 0.8])
    assert RocAuc()(y, s, mask=torch.tensor([True, True, False, False]))["rocauc"] == 1.0
    with pytest.raises(ValueError, match="both positive and negative"):
        RocAuc()(torch.ones(3, 1), torch.rand(3, 1))
    with pytest.raises(ValueError, match="same shape"):
        RocAuc()(torch.ones(3, 1), torch.rand(3, 2))
    with pytest.raises(ValueError, match="0/1"):
        RocAuc()(torch.tensor([[2.0], [0.0]]), torch.rand(2, 1))


def test_masked_bce() -> None:
    logits = torch.tensor([[0.5, -1.0], [2.0, 0.3]])
    y = torch.tensor([[1.0, nan], [0.0, 1.0]])
    ref = F.binary_cross_entropy_with_logits(torch.tensor([0.5, 2.0, 0.3]), torch.tensor([1.0, 0.0, 1.0]))
    assert float(masked_bce(logits, y)) == pytest.approx(float(ref))
    assert float(masked_bce(logits, torch.full_like(y, nan))) == 0.0
    assert not math.isnan(float(masked_bce(logits, y)))
