"""The t-SimCLR Gaussian-mixture experiments (suite/gmm.py, `suite vision gmm`): sampling, the order check, and a short run
that records its metrics and feature points."""
from __future__ import annotations

import json
import math

import pytest
import torch

from suite.config import experiment_config
from suite.eval.points import read_points as points
from suite.gmm import MEANS, GMMConfig, cyclic_order, is_ordered, mixture, run_gmm


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


def test_a_short_run_records_metrics_and_points(tmp_path, monkeypatch):
    from suite.registry import Registry

    monkeypatch.chdir(tmp_path)  # the run folder: runs/gmm-1d-order/...
    reg = Registry(str(tmp_path / "r.sqlite"))
    m = run_gmm(GMMConfig(experiment="order1d", loss="infonce", steps=150, batch_size=64, n_eval=100, points=20), reg).metrics
    assert set(m) >= {"id_acc", "ood_acc", "ood_transfer_acc", "ordered", "order_code"}
    assert m["id_acc"] > 0.9  # four well-separated clusters are linearly separable after 150 steps
    run = reg.runs()[0]
    assert run["primary_metric"] == "ordered" and run["task"] == "gmm-1d-order"
    xy, lab = points(reg, run["id"], "id")
    assert xy.shape == (20, 2) and lab.shape == (20,) and set(lab.tolist()) <= {0, 1, 2, 3}
    assert abs(float((xy ** 2).sum(1).mean()) - 1.0) < 1e-5  # cosine features lie on the circle
    assert json.loads(run["config"]) == experiment_config(GMMConfig(experiment="order1d", steps=150, batch_size=64,
                                                                    n_eval=100))  # run options never recorded in it
    folder = tmp_path / json.loads(run["run_options"])["folder"]
    assert folder.is_dir() and not list(folder.rglob("*.pt"))  # its checkpoint removed once finished


def test_an_interrupted_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    """a run interrupted at step 101 (checkpoint every 50 steps), continued with another device spelling and
    checkpoint interval -> the same folder and registry row and the same metrics and points as an uninterrupted run;
    another experiment on that folder is refused naming the field"""
    import suite.gmm as gmm
    from suite.registry import Registry
    from suite.train import ConfigMismatchError

    reg = Registry(str(tmp_path / "r.sqlite"))
    base = dict(experiment="mixture2d", loss="tsimclr", steps=150, batch_size=64, n_eval=100, points=10)
    full = run_gmm(GMMConfig(**base, out=str(tmp_path / "full")), reg).metrics
    calls, real = {"n": 0}, gmm.mixture

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 101:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(gmm, "mixture", interrupted)
    out = str(tmp_path / "resumed")
    with pytest.raises(KeyboardInterrupt):
        run_gmm(GMMConfig(**base, out=out, checkpoint_every=50), reg)
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "resumed" / "checkpoints").iterdir()] == ["step-000000100.pt"]
    with pytest.raises(ConfigMismatchError, match="sigma"):
        run_gmm(GMMConfig(**{**base, "sigma": 0.2}, out=out), reg)
    resumed = run_gmm(GMMConfig(**base, out=out, checkpoint_every=70, device="auto"), reg).metrics
    assert resumed == full
    rows = {r["id"]: r for r in reg.runs()}
    mine = [r for r in rows.values() if out in r["run_options"]]
    assert [r["status"] for r in mine] == ["finished"]  # the interrupted row, continued
    full_id = next(i for i, r in rows.items() if i != mine[0]["id"])
    assert rows[full_id]["config_hash"] == mine[0]["config_hash"]
    for split in ("id", "ood"):
        (a, la), (b, lb) = points(reg, full_id, split), points(reg, mine[0]["id"], split)
        assert (a == b).all() and (la == lb).all()


def test_bad_settings_and_losses_are_refused():
    with pytest.raises(ValueError, match="points"):
        GMMConfig(points=5000)
    with pytest.raises(ValueError, match="views"):
        run_gmm(GMMConfig(loss="cacr", steps=1))
