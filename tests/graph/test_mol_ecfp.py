"""The fingerprint baseline (graph/mol/ecfp.py): RDKit's Morgan bits, one forest per task on its labelled training
molecules only, the fine-tuning's split, and a registry row the MoleculeNet table reads as a row (task
molnet-finetune, loss ecfp-rf, rocauc_last on test). Offline: a small CSV written here, a few trees."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from graph.mol.ecfp import METHOD, EcfpMolConfig, check_config, ecfp_mol, fingerprints, forest_scores

RINGS = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCOC1", "c1ccc2ccccc2c1", "C1CCNCC1", "c1ccsc1", "c1cnc2ccccc2c1"]
SUBS = ["C", "O", "N", "CC", "CO", "CN", "Cl", "C(=O)O"]
SMILES = [f"{sub}{ring}" if i % 2 else f"{ring}{sub}" for i, (ring, sub) in
          enumerate((r, s) for r in RINGS for s in SUBS)]  # 64 molecules, 8 scaffolds


def test_fingerprints_are_rdkits_morgan_bits() -> None:
    from rdkit import Chem
    from rdkit.Chem import AllChem

    x = fingerprints(SMILES[:5], radius=2, n_bits=2048)
    assert x.shape == (5, 2048) and x.dtype == np.uint8
    for row, s in zip(x, SMILES[:5]):
        bv = AllChem.GetMorganFingerprintAsBitVect(Chem.MolFromSmiles(s), 2, nBits=2048)
        assert set(np.flatnonzero(row)) == set(bv.GetOnBits())
    assert not fingerprints(["not a smiles"]).any()


def test_each_task_learns_from_its_labelled_training_rows_only() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(60, 32)).astype(np.uint8)
    y = np.stack([x[:, 0].astype(float), x[:, 1].astype(float), np.ones(60)], axis=1)  # (60, 3)
    y[::3, 0] = np.nan  # missing labels of task 0
    train = np.arange(40)
    s = forest_scores(x, y, train, seed=0, n_estimators=20)
    assert s.shape == (60, 3)
    assert np.array_equal(s[40:, 1] > 0.5, x[40:, 1] == 1)  # learns a bit it sees, on held-out rows
    assert np.all(s[:, 2] == 1.0)  # one class in training: a constant score
    # the masked rows never enter the fit: the same forest as one trained without them in the training part
    labelled = train[~np.isnan(y[train, 0])]
    assert np.allclose(forest_scores(x, y[:, :1], labelled, seed=0, n_estimators=20)[:, 0], s[:, 0])
    # the seed is the forest's random_state: the same seed, the same scores
    assert np.allclose(forest_scores(x, y, train, seed=0, n_estimators=20), s)


def test_the_sparse_fit_grows_the_dense_fits_trees() -> None:
    """forest_scores fits on a sparse matrix for speed: the scores equal a forest fit on the dense bits exactly"""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    x = (rng.random((200, 256)) < 0.05).astype(np.uint8)  # sparse bits, as fingerprints
    y = ((x[:, :8].sum(1) + rng.random(200)) > 1.0).astype(float)[:, None]
    train = np.arange(150)
    dense = RandomForestClassifier(n_estimators=15, n_jobs=1, random_state=4, class_weight="balanced")
    want = dense.fit(x[train], y[train, 0].astype(int)).predict_proba(x)[:, 1]
    assert len(np.unique(want)) > 5  # a forest with something to learn, not a constant
    assert np.array_equal(forest_scores(x, y, train, seed=4, n_estimators=15), want[:, None])
    # scoring only some rows gives those rows' scores, bit for bit
    rows = np.array([199, 150, 3])
    assert np.array_equal(forest_scores(x, y, train, seed=4, n_estimators=15, score=rows), want[rows, None])


def test_the_run_uses_the_finetuning_split_and_records_a_row(tmp_path: Path) -> None:
    from graph.mol.data import load_moleculenet
    from graph.mol.splits import split
    from suite.registry import open_registry

    rows = "".join(f"{i},m{i},{int('N' in s or 'O' in s)},{s}\n" for i, s in enumerate(SMILES))
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + rows)
    reg = open_registry(str(tmp_path / "reg.sqlite"))
    res = ecfp_mol(EcfpMolConfig(dataset="bbbp", seed=3, n_estimators=10, data_root=str(tmp_path)), registry=reg)
    run = reg.runs()[0]
    assert (run["task"], run["loss"], run["seed"], run["dataset"]) == ("molnet-finetune", METHOD, 3, "bbbp")
    assert 0.0 <= res.metrics["rocauc_last"] <= 1.0 and res.metrics["rocauc_last"] == res.info["test_rocauc"]
    # the same molecules and scaffold split as finetune-mol: the test part's size is the split's
    g = load_moleculenet("bbbp", "hu", tmp_path)
    _, _, test = split(g.smiles, "scaffold")
    assert res.info["molecules"] == len(g) and test.numel() > 0


def test_settings_are_checked_and_the_command_is_registered() -> None:
    with pytest.raises(ValueError, match="n_estimators"):
        check_config(EcfpMolConfig(n_estimators=0))
    with pytest.raises(ValueError, match="class_weight"):
        check_config(EcfpMolConfig(class_weight="auto"))
    from graph.mol.cli import register_mol

    parser = argparse.ArgumentParser()
    register_mol(parser.add_subparsers())
    a = parser.parse_args(["ecfp-mol", "--dataset", "sider", "--seed", "2", "--n-estimators", "7"])
    assert a.dataset == "sider" and a.seed == 2 and a.n_estimators == 7 and callable(a.func)
