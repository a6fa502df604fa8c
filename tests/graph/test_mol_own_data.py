"""Your own molecules, end to end (issue 80): a CSV with a SMILES column and targets -> fine-tuning from a tiny
pretrained encoder (or from scratch) -> the exported model with its card -> ``suite graph predict``."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from graph.mol.data import content_fingerprint, read_target_table
from graph.mol.finetune import FinetuneMolConfig, Regression, finetune, masked_mse
from graph.mol.splits import split as make_split

# 40 RDKit-parsable molecules: alkanes, alcohols, amines, aromatics, rings
MOLS = (["C" * n for n in range(1, 9)] + ["C" * n + "O" for n in range(1, 9)] + ["c1ccccc1" + "C" * n for n in range(6)]
        + ["OC" + "C" * n + "N" for n in range(6)] + ["c1ccc(O)cc1" + "C" * n for n in range(4)]
        + ["C1CCCCC1" + "C" * n for n in range(5)] + ["CC(C)" + "C" * n for n in range(3)])
TINY = ["--num-layers", "2", "--emb-dim", "16", "--device", "cpu", "--batch-size", "8"]


def _targets(s: str) -> tuple[float, float]:
    """Two regression targets a GIN can see: heavy atoms and heteroatoms, on scales far from 0 / 1."""
    heavy = sum(ch.isalpha() and ch.upper() in "CNO" for ch in s)
    return 10.0 * heavy + 3.0, -2.5 * sum(ch in "ON" for ch in s) + 0.25


def _write_regression(path: Path) -> Path:
    assert len(MOLS) == 40
    rows = [f"{s},{a:.3f},{'' if i % 7 == 3 else f'{b:.3f}'}" for i, s in enumerate(MOLS) for a, b in [_targets(s)]]
    path.write_text("smiles,size,hetero\n" + "\n".join(rows) + "\n")  # every 7th 'hetero' missing
    return path


def _parser() -> argparse.ArgumentParser:
    from graph.mol.cli import register_mol

    parser = argparse.ArgumentParser()
    register_mol(parser.add_subparsers())
    return parser


def _call(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    a = parser.parse_args(argv)
    return int(a.func(a))


def test_own_csv_regression_pretrained_exported_and_predicted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The done-when of issue 80: 40 SMILES with two regression targets fine-tune from a tiny pretrained encoder,
    the model is exported with its config and card, and ``suite graph predict`` writes one prediction per molecule."""
    from suite.registry import Registry

    data = _write_regression(tmp_path / "my_mols.csv")
    parser = _parser()
    corpus = tmp_path / "corpus.smi"
    corpus.write_text("\n".join(MOLS) + "\n")
    assert _call(parser, ["pretrain-mol", "--corpus", str(corpus), "--loss", "graphcl", "--epochs", "1",
                          "--out", str(tmp_path / "enc"), *TINY]) == 0
    run = tmp_path / "ft"
    assert _call(parser, ["finetune-mol", "--data", str(data), "--smiles-column", "smiles", "--target-columns",
                          "size,hetero", "--split", "random", "--init", str(tmp_path / "enc"), "--epochs", "3",
                          "--out", str(run), *TINY]) == 0
    out = capsys.readouterr().out
    fp = content_fingerprint(data)
    assert f"my_mols.csv@{fp}: regression (inferred: target values other than 0 and 1) on 2 target(s): size, hetero" in out
    assert "test RMSE last" in out and f"suite graph predict --model {run}" in out

    # the registry names the data set by file name and content fingerprint, and records its identity
    (row,) = [r for r in Registry().runs(task="mol-finetune") if json.loads(r["run_options"])["folder"] == str(run)]
    assert row["dataset"] == f"my_mols.csv@{fp}" and row["loss"] == "graphcl" and row["status"] == "finished"
    assert row["primary_metric"] == "rmse_last" and row["primary_split"] == "test"
    assert json.loads(row["run_options"])["data"]["data"]["files"]["my_mols.csv"].startswith(fp)
    resolved = json.loads(row["config"])["resolved"]
    assert resolved["targets"] == ["size", "hetero"] and resolved["task"] == "regression"

    # the export: weights (safetensors), config (encoder, targets, task, scaling of the training part), card
    export = run / "export"
    cfg = json.loads((export / "config.json").read_text())
    assert cfg["model_type"] == "hu_mol_predictor" and (cfg["num_layers"], cfg["dim"]) == (2, 16)
    assert cfg["targets"] == ["size", "hetero"] and cfg["task"] == "regression"
    y = np.array([_targets(s) for s in MOLS])
    y[[i for i in range(40) if i % 7 == 3], 1] = np.nan
    train, _, test = make_split(MOLS, "random", seed=0)
    np.testing.assert_allclose(cfg["target_scaling"]["mean"], np.nanmean(y[train.numpy()], 0), rtol=1e-5)
    np.testing.assert_allclose(cfg["target_scaling"]["std"], np.nanstd(y[train.numpy()], 0), rtol=1e-4)
    from safetensors.torch import load_file

    assert any(k.startswith("head.") for k in load_file(str(export / "model.safetensors")))
    card = (export / "README.md").read_text()
    assert f"my_mols.csv@{fp}" in card and "regression" in card and "graph predict" in card

    # predict: the input rows in order, the SMILES, one column per target; bad SMILES empty, counted and named
    new = tmp_path / "new.csv"
    new.write_text("smiles\n" + "\n".join([*MOLS[:3], "not_a_smiles", *MOLS[3:], "C1CC"]) + "\n")
    preds = tmp_path / "preds.csv"
    assert _call(parser, ["predict", "--model", str(run), "--data", str(new), "--out", str(preds)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0
    assert "42 molecules" in line and "2 SMILES not featurised" in line and "line 5 'not_a_smiles'" in line
    import pandas as pd

    got = pd.read_csv(preds, keep_default_na=False, dtype=str)
    assert list(got.columns) == ["smiles", "size", "hetero"] and len(got) == 42
    assert got["smiles"].tolist() == [*MOLS[:3], "not_a_smiles", *MOLS[3:], "C1CC"]
    assert got.loc[3, "size"] == got.loc[3, "hetero"] == got.loc[41, "size"] == ""
    p = got.drop(index=[3, 41])[["size", "hetero"]].astype(float).to_numpy()  # (40, 2) in MOLS order
    assert np.isfinite(p).all()
    # predictions are in the targets' units: the test RMSE / MAE recomputed from the file are the reported ones
    res = Regression()(torch.from_numpy(y[test.numpy()]), torch.from_numpy(p[test.numpy()]))
    final = Registry().final_metrics(row["id"])
    assert res["rmse"] == pytest.approx(final[("rmse_last", "test")], rel=1e-4)
    assert res["mae"] == pytest.approx(final[("mae_last", "test")], rel=1e-4)


def test_own_csv_classification_inferred_given_split_from_scratch(tmp_path: Path) -> None:
    """0/1 targets (some missing) are a classification, said so; the given split is the file's; no pretraining."""
    parts = ["val" if i % 5 == 1 else "test" if i % 5 == 2 else "train" for i in range(40)]  # both classes in each
    rows = [f"{s},{part},{int('O' in s or 'N' in s)},{'' if i % 5 == 0 else int('c' in s)}"
            for i, (s, part) in enumerate(zip(MOLS, parts))]
    data = tmp_path / "cls.csv"
    data.write_text("mol,part,polar,aromatic\n" + "\n".join(rows) + "\n")
    cfg = FinetuneMolConfig(data=str(data), smiles_column="mol", split="given", split_column="part", init="none",
                            epochs=2, batch_size=8, num_layers=2, emb_dim=16, device="cpu", out=str(tmp_path / "run"))
    res = finetune(cfg)
    r = res.info
    assert (r["task"], r["task_reason"]) == ("classification", "inferred: every target value is 0 or 1")
    assert r["targets"] == ["polar", "aromatic"]  # every column but the SMILES and the split column
    assert set(res.metrics) <= {"rocauc_last", "rocauc_bestval"} and 0.0 <= res.metrics["rocauc_last"] <= 1.0
    from graph.mol.predict import load_finetuned, predict_file

    fm = load_finetuned(res.folder)
    assert fm.task == "classification" and fm.config["target_scaling"] is None
    pred = predict_file(res.folder, data, out=tmp_path / "p.csv")  # the model's SMILES column is found by name
    import pandas as pd

    p = pd.read_csv(tmp_path / "p.csv")
    assert pred.rows == 40 and not pred.failed and list(p.columns) == ["mol", "polar", "aromatic"]
    assert ((p[["polar", "aromatic"]] >= 0) & (p[["polar", "aromatic"]] <= 1)).all().all()  # probabilities


def test_masked_regression_loss_and_metrics_match_a_naive_loop() -> None:
    g = torch.Generator().manual_seed(0)
    y = torch.randn(9, 3, generator=g, dtype=torch.float64) * 4 + 2
    y[[0, 4, 7], [1, 1, 2]] = float("nan")
    y[:, 0] = float("nan")  # a target with no label in this split is left out of the mean
    p = torch.randn(9, 3, generator=g, dtype=torch.float64)
    rmse, mae = [], []
    for t in range(3):
        pairs = [(float(p[i, t]), float(y[i, t])) for i in range(9) if not math.isnan(y[i, t])]
        if pairs:
            rmse.append(math.sqrt(sum((a - b) ** 2 for a, b in pairs) / len(pairs)))
            mae.append(sum(abs(a - b) for a, b in pairs) / len(pairs))
    got = Regression()(y, p)
    assert got["rmse"] == pytest.approx(sum(rmse) / 2) and got["mae"] == pytest.approx(sum(mae) / 2)
    assert got["tasks_scored"] == 2
    sq = [(float(p[i, t]) - float(y[i, t])) ** 2 for i in range(9) for t in range(3) if not math.isnan(y[i, t])]
    assert float(masked_mse(p, y)) == pytest.approx(sum(sq) / len(sq))
    assert math.isnan(Regression()(torch.full((2, 1), float("nan")), torch.zeros(2, 1))["rmse"])


def test_bad_input_is_one_line_naming_file_column_value(tmp_path: Path) -> None:
    data = _write_regression(tmp_path / "m.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("smiles,y\nCCO,1.5\nCCN,high\n")
    cases = [
        (lambda: read_target_table(bad), r"bad\.csv: line 3 column 'y': 'high' is not a number"),
        (lambda: read_target_table(data, smiles_column="SMI"), r"m\.csv: no SMILES column 'SMI'"),
        (lambda: read_target_table(data, target_columns=["size", "logS"]), r"target column\(s\) \['logS'\] not found"),
        (lambda: read_target_table(data, task="classification"),
         r"m\.csv: line 2 column 'size': '13\.000' is not a class label"),
        (lambda: finetune(FinetuneMolConfig(dataset="mine/my_mols.csv")),
         r"unknown MoleculeNet data set 'mine/my_mols\.csv'.*give --data mine/my_mols\.csv"),
        (lambda: finetune(FinetuneMolConfig(data=str(data), split="given")), r"--split given needs --split-column"),
        (lambda: finetune(FinetuneMolConfig(smiles_column="smiles")), r"--smiles-column apply to your own CSV"),
        (lambda: finetune(FinetuneMolConfig(data=str(data), task="ranking")), r"unknown task 'ranking'"),
        (lambda: finetune(FinetuneMolConfig(data=str(tmp_path / "nope.csv"))), r"molecule CSV not found: .*nope\.csv"),
    ]
    split_bad = tmp_path / "split.csv"
    split_bad.write_text("smiles,y,part\nCCO,1.5,train\nCCN,2.5,holdout\n")
    cases.append((lambda: read_target_table(split_bad, split_column="part"),
                  r"line 3 column 'part': 'holdout' is not train, val or test"))
    for fn, pattern in cases:
        with pytest.raises(ValueError, match=pattern) as exc:
            fn()
        assert "\n" not in str(exc.value)
    from graph.mol.model import MolGIN
    from graph.mol.predict import predict_file

    MolGIN(2, 8).save_pretrained(tmp_path / "enc")  # an encoder, not a fine-tuned model
    with pytest.raises(ValueError, match=r"model_type is 'hu_mol_gin', expected 'hu_mol_predictor'"):
        predict_file(tmp_path / "enc", data)
