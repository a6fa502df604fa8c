"""The fidelity table renders from a registry alone: numbers from the runs, claims by the one rule."""
from __future__ import annotations

from benchmarks.fidelity import table
from suite.registry import Registry


def _vision(reg, loss, seed, lin, knn, **cfg):
    hp = {"negatives": cfg.pop("negatives")} if "negatives" in cfg else {}
    with reg.run(modality="vision", task="pretrain", dataset="cifar10", loss=loss, loss_hparams=hp,
                 config={"views": 2, "batch_size": 256, "proj_dim": 128, **cfg}, seed=seed) as r:
        r.log_many({"linear_acc": lin, "knn_acc": knn}, split="test")


def test_fidelity_table_from_constructed_registry(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    for s, (a, b) in enumerate([(0.500, 0.480), (0.505, 0.482), (0.498, 0.479)]):
        _vision(reg, "cacr", s, a, 0.4, views=5, batch_size=64)
        _vision(reg, "cmc", s, b, 0.4, views=5, batch_size=64)
    _vision(reg, "infonce", 0, 0.45, 0.38)
    text = table(reg)
    assert "| CACR K=4 (V=5), paper estimator, t- = 0.9, batch 64 | 50.1 ± 0.4 (n=3)" in text
    line = next(x for x in text.splitlines() if x.startswith("| CACR K=4 beats CMC K=4"))
    assert "| confirmed |" in line
    line = next(x for x in text.splitlines() if x.startswith("| CACR K=1 beats SimCLR"))
    assert "inconclusive (n < 3)" in line  # one InfoNCE seed, no CACR K=1 run
