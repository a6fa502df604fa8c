"""End to end: synthetic TU raw files -> real loader -> GraphCL pretraining -> SVM -> registry; reload."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from graph.tu.data import load_tu
from graph.tu.graphcl import TUConfig, load_encoder, train
from graph.tu.run import evaluate_checkpoint, run_tu
from graph.tu.model import GINEncoder
from suite.registry import Registry
from tests.graph.synthetic import write_synthetic_tu


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_tu(tmp_path_factory.mktemp("tu"), n_graphs=64)


def test_loss_decreases(synth_root: Path) -> None:
    data = load_tu("SYNTH", synth_root)
    cfg = TUConfig(dataset="SYNTH", loss="graphcl", epochs=12, batch_size=32, eval_epochs=[], svm_folds=4,
                   svm_inner_folds=2, aug="drop_nodes")
    res = train(cfg, data, seed=0)
    losses = [s["loss"] for s in res.epoch_stats]
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3, losses
    assert set(res.evals) == {12} and 0.0 <= res.evals[12]["acc"] <= 1.0
    assert res.skipped_batches == 0


@pytest.mark.parametrize("loss", ["macl", "cacr3", "tsimclr"])
def test_other_losses_run(synth_root: Path, loss: str) -> None:
    data = load_tu("SYNTH", synth_root)
    cfg = TUConfig(dataset="SYNTH", loss=loss, epochs=1, batch_size=32, svm_folds=4, svm_inner_folds=2)
    res = train(cfg, data, seed=0)
    assert torch.isfinite(torch.tensor(res.epoch_stats[0]["loss"]))
    if loss == "macl":
        assert "tau" in res.epoch_stats[0]


def test_run_tu_registry_and_reload(synth_root: Path, tmp_path: Path) -> None:
    reg = Registry(str(tmp_path / "reg.sqlite"))
    cfg = TUConfig(dataset="SYNTH", loss="macl", epochs=2, batch_size=32, eval_epochs=[1], svm_folds=4,
                   svm_inner_folds=2, seed=0, data_root=str(synth_root), out=str(tmp_path / "enc"),
                   save_embeddings=True)
    s = run_tu(cfg, registry=reg, verbose=False).info
    s1 = run_tu(dataclasses.replace(cfg, seed=1, out=str(tmp_path / "enc1")), registry=reg, verbose=False).info
    assert (s["seed"], s1["seed"]) == (0, 1) and s["acc"] is not None and "reused" not in s1
    runs = reg.runs(task="tu-graphcl")
    assert len(runs) == 2 and all(r["status"] == "finished" for r in runs)
    fm = reg.final_metrics(runs[0]["id"])
    assert ("acc", "test") in fm and ("acc_ep1", "test") in fm and ("tau", "train") in fm
    # a finished config is reused, not rerun; run options (here: where the encoder is saved) are not the setting
    again = run_tu(dataclasses.replace(cfg, out="", save_embeddings=False), registry=reg, verbose=False).info
    assert again["reused"] in {r["id"] for r in runs} and again["acc"] == s["acc"]
    assert len(reg.runs(task="tu-graphcl")) == 2 and {json.loads(r["config"])["seed"] for r in runs} == {0, 1}
    ckpt = tmp_path / "enc"  # the run folder: checkpoints (removed once finished), export/, embeddings.npz
    assert not list((ckpt / "checkpoints").glob("*.pt"))
    model, cfg2, meta = load_encoder(ckpt)
    assert cfg2.loss == "macl" and cfg2.seed == 0
    ev = evaluate_checkpoint(ckpt, data_root=str(synth_root))
    assert ev["acc"] == pytest.approx(meta["acc"])  # same encoder, same seeded folds
    from suite.safeio import load_arrays

    arrays, _ = load_arrays(tmp_path / "enc" / "embeddings.npz")  # data, not a pickle
    assert arrays["embeddings"].shape[0] == arrays["labels"].shape[0] > 0
    # the export: plain encoder + model card + run record; the card carries the run's registry metrics
    enc = GINEncoder.from_pretrained(tmp_path / "enc" / "export")
    torch.testing.assert_close(enc.state_dict()["convs.0.nn.0.weight"], model.encoder.state_dict()["convs.0.nn.0.weight"])
    card = (tmp_path / "enc" / "export" / "README.md").read_text()
    assert "`macl`" in card and '"tau0": 0.2' in card and "| seed | 0 |" in card and "test/acc" in card
    assert f"| {meta['run_id']} |" in card and "GINEncoder.from_pretrained" in card


def test_cli(synth_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from suite.cli import main

    rc = main(["graph", "tu", "--dataset", "SYNTH", "--data-root", str(synth_root), "--loss", "infonce",
               "--epochs", "1", "--batch-size", "32", "--svm-folds", "4", "--svm-inner-folds", "2", "--seed", "0"])
    assert rc == 0
    assert "SYNTH infonce seed 0: SVM accuracy" in capsys.readouterr().out
    rc = main(["graph", "tu", "--dataset", "SYNTH", "--data-root", str(synth_root), "--loss", "xclr", "--epochs", "1"])
    assert rc == 2
    assert "similarity" in capsys.readouterr().err


@pytest.mark.dataset
def test_real_mutag() -> None:
    from tests.conftest import data_or_skip

    data_or_skip("TU", "MUTAG")
    data = load_tu("MUTAG")
    assert len(data) == 188 and data.num_features == 7 and data.num_classes == 2
    assert int(data.labels.sum()) == 125  # 125 mutagenic / 63 not
    cfg = TUConfig(dataset="MUTAG", loss="graphcl", epochs=3, eval_epochs=[])
    res = train(cfg, data, seed=0)
    assert res.evals[3]["acc"] > 0.75
