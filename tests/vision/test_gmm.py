"""The t-SimCLR Gaussian-mixture experiments (vision/gmm.py): sampling, the order check, and a short run
that records its metrics and feature points."""
from __future__ import annotations

import math

import pytest
import torch

from suite.eval.points import read_points as points
from vision.gmm import MEANS, GMMConfig, cyclic_order, is_ordered, mixture, run_gmm


def test_positives_come_from_the_same_component():
    means = torch.tensor(MEANS["mixture2d"])
    x, x2, lab = mixture(means, 0.1, 20000, torch.Generator().manual_seed(0))
    assert torch.allclose((x - means[lab]).std(0), torch.full((2,), 0.1), rtol=0.03)
    assert torch.allclose((x2 - means[lab]).std(0), torch.full((2,), 0.1), rtol=0.03)
    assert abs(float(torch.corrcoef(torch.stack([(x - means[lab])[:, 0], (x2 - means[lab])[:, 0]]))[0, 1])) < 0.03
    assert torch.bincount(lab, minlength=5).min() > 3700  # uniform mixture weights


@pytest.mark.parametrize("angles,ordered", [((0, 90, 180, 270), True), ((0, 270, 180, 90), True),
                                            ((0, 180, 90, 270), False), ((10, 100, 280, 190), False)])
def test_cyclic_order(angles, ordered):
    rad = torch.tensor(angles, dtype=torch.float64) * math.pi / 180
    centres = torch.stack([rad.cos(), rad.sin()], 1)
    labels = torch.arange(4).repeat_interleave(5)
    feats = centres[labels] + 0.01 * torch.randn(20, 2, dtype=torch.float64)
    assert is_ordered(cyclic_order(feats, labels, 4)) is ordered


def test_a_short_run_records_metrics_and_points(tmp_path):
    from suite.registry import Registry

    reg = Registry(str(tmp_path / "r.sqlite"))
    m = run_gmm(GMMConfig(experiment="order1d", loss="infonce", steps=150, batch_size=64, n_eval=100, points=20), reg)
    assert set(m) >= {"id_acc", "ood_acc", "ood_transfer_acc", "ordered", "order_code"}
    assert m["id_acc"] > 0.9  # four well-separated clusters are linearly separable after 150 steps
    run = reg.runs()[0]
    assert run["primary_metric"] == "ordered" and run["task"] == "gmm-1d-order"
    xy, lab = points(reg, run["id"], "id")
    assert xy.shape == (20, 2) and lab.shape == (20,) and set(lab.tolist()) <= {0, 1, 2, 3}
    assert abs(float((xy ** 2).sum(1).mean()) - 1.0) < 1e-5  # cosine features lie on the circle


def test_bad_settings_and_losses_are_refused():
    with pytest.raises(ValueError, match="points"):
        GMMConfig(points=5000)
    with pytest.raises(ValueError, match="views"):
        run_gmm(GMMConfig(loss="cacr", steps=1))
