"""The fidelity table renders from a registry alone: numbers from the runs, claims by the one rule."""
from __future__ import annotations

from benchmarks.tables.fidelity import table
from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry

# image runs are read by the fidelity suite's job hashes (any of its vision jobs will do here)
JOB = next(j.hash for j in load_suite("fidelity")[1] if j.frontend == "vision")


def _vision(reg, loss, seed, lin, knn, cfg_hash=JOB, **cfg):
    hp = {"negatives": cfg.pop("negatives")} if "negatives" in cfg else {}
    with reg.run(modality="vision", task="pretrain", dataset="cifar10", loss=loss, loss_hparams=hp,
                 config={"views": 2, "batch_size": 256, "proj_dim": 128, **cfg}, seed=seed, cfg_hash=cfg_hash) as r:
        r.log_many({"linear_acc": lin, "knn_acc": knn}, split="test")


def test_fidelity_table_from_constructed_registry(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    for s, (a, b) in enumerate([(0.500, 0.480), (0.505, 0.482), (0.498, 0.479)]):
        _vision(reg, "cacr", s, a, 0.4, views=5, batch_size=64)
        _vision(reg, "cmc", s, b, 0.4, views=5, batch_size=64)
    _vision(reg, "infonce", 0, 0.45, 0.38)
    _vision(reg, "infonce", 0, 0.99, 0.99, cfg_hash="another suite's job")  # the same setting, not pooled
    text = table(reg)
    assert "99.0" not in text
    assert "| CACR K=4 (V=5), paper estimator, t- = 0.9, batch 64 | 50.1 ± 0.4 (n=3)" in text
    line = next(x for x in text.splitlines() if x.startswith("- CACR (K = 4) beats CMC (K = 4) with CMC's temperature"))
    assert "): **confirmed**" in line
    line = next(x for x in text.splitlines() if x.startswith("- CACR (K = 1) beats SimCLR"))
    assert "): **not measured**" in line  # one InfoNCE seed, no CACR K=1 run


def test_cmc_temperature_is_chosen_on_validation_runs_only(tmp_path):
    """CMC K=4 validation runs at tau 0.1 / 0.2 (val kNN 40 / 45) -> tau 0.2 is chosen and the CMC row and claim use
    the test runs at tau 0.2 only; validation runs never enter a test row; t-SimCLR scans render from validation
    (images) and STS-B dev (sentences) runs"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    for tau, knn in ((0.1, 0.40), (0.2, 0.45)):
        with reg.run(modality="vision", task="pretrain", dataset="cifar10", loss="cmc", loss_hparams={"temperature": tau},
                     config={"views": 5, "batch_size": 64, "val_per_class": 100}, seed=0, cfg_hash=JOB) as r:
            r.log_many({"knn_acc": knn}, split="val")
    for s in range(3):
        _vision(reg, "cacr", s, 0.50, 0.4, views=5, batch_size=64)
        for tau, lin in ((0.1, 0.60), (0.2, 0.48)):
            with reg.run(modality="vision", task="pretrain", dataset="cifar10", loss="cmc",
                         loss_hparams={"temperature": tau}, config={"views": 5, "batch_size": 64}, seed=s,
                         cfg_hash=JOB) as r:
                r.log_many({"linear_acc": lin + 0.001 * s, "knn_acc": 0.4}, split="test")
    with reg.run(modality="vision", task="pretrain", dataset="cifar10", loss="tsimclr",
                 loss_hparams={"temperature": 2, "t_df": 5}, config={"val_per_class": 100}, seed=0) as r:
        r.log_many({"knn_acc": 0.31}, split="val")
    with reg.run(modality="text", task="simcse-unsup", dataset="wiki", loss="tsimclr",
                 loss_hparams={"temperature": 1, "t_df": 10}, config={"limit": 1024}, seed=0) as r:
        r.log_many({"best_stsb_dev": 0.7712}, split="dev")
    text = table(reg)
    assert "| 0.1 | 40.0 (n=1) |" in text and "| 0.2 | 45.0 (n=1) |" in text
    assert "| CMC K=4 (V=5), tau 0.2 (chosen on validation), batch 64 | 48.1 ± 0.1 (n=3)" in text
    line = next(x for x in text.splitlines() if x.startswith("- CACR (K = 4) beats CMC (K = 4) with CMC's temperature"))
    assert "tau 0.2" in line and "): **confirmed**" in line  # 50 vs 48.1; the tau 0.1 test rows (60) are not used
    images = text[text.index("t_df on images"):]
    assert "| tau = 2 | – | – | 31.0 (n=1) | – |" in images
    sentences = text[text.index("t_df on sentences"):]
    assert "| tau = 1 | – | – | – | 77.1 (n=1) |" in sentences


def test_molecules_section_from_the_molnet_suite_runs(tmp_path, monkeypatch):
    """fine-tuning runs of the molnet suite from no pretraining (ROC-AUC 0.60, 3 seeds) and from three CACR encoders
    (0.69-0.71; encoder 0 3 seeds, encoders 1-2 their 2) on bbbp -> a molecules section with encoder 0's and no
    pretraining's cells and a confirmed transfer claim; the fine-tuning runs (graph modality, loss cacr) never enter
    the TU section"""
    from benchmarks.runner.suitefile import load_suite

    monkeypatch.setenv("SUITE_CACHE", str(tmp_path / "cache"))
    reg = Registry(str(tmp_path / "r.sqlite"))
    _, jobs = load_suite("molnet")
    for j in jobs:
        args = dict(j.args)
        start = {"none": 0.60, "runs/bench/molnet/cacr": 0.70, "runs/bench/molnet/cacr-s1": 0.69,
                 "runs/bench/molnet/cacr-s2": 0.71}  # three CACR encoders: the claim's units
        if j.command != "finetune-mol" or args["dataset"] != "bbbp" or args["init"] not in start or j.seed > 2:
            continue
        v = start[args["init"]]
        with reg.run(modality="graph", task="molnet-finetune", dataset="bbbp", loss="none" if v < 0.65 else "cacr",
                     seed=j.seed, cfg_hash=j.hash) as r:
            r.log("rocauc_last", v + j.seed / 100, split="test", step=10)
    text = table(reg)
    mol = text[text.index("## Molecules"):]
    assert "| bbbp | 61.0 ± 1.0 (n=3) | 71.0 ± 1.0 (n=3) |" in mol and "| tox21 | – | – |" in mol
    assert "CACR pretraining beats no pretraining on MoleculeNet transfer (reduced fine-tuning)" in mol
    assert "rows cacr vs none, average over bbbp" in mol and "**confirmed**" in mol
    graphs = text[text.index("## Graphs"):text.index("## Molecules")]
    assert "bbbp" not in graphs
