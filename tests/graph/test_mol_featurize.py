"""Molecule featurisation, SMILES readers, MoleculeNet CSV loader and the on-disk cache."""
from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest
import torch

import graph.mol.data as M
from graph.mol.data import featurize, load_moleculenet, load_smiles_file, read_moleculenet_csv, read_smiles


def one(smiles: str, featurizer: str = "hu") -> M.MolBatch:
    return featurize([smiles], featurizer).batch([0])


def test_ethanol_counts_and_types() -> None:
    b = one("CCO")
    assert b.x.tolist() == [[5, 0], [5, 0], [7, 0]]  # atomic number - 1
    assert b.edge_index.shape == (2, 4) and b.edge_attr.tolist() == [[0, 0]] * 4
    # both directions of every bond, interleaved
    assert b.edge_index.t().tolist() == [[0, 1], [1, 0], [1, 2], [2, 1]]


def test_aromatic_ring() -> None:
    b = one("c1ccccc1")
    assert b.x.shape == (6, 2) and b.edge_index.shape == (2, 12)
    assert set(b.edge_attr[:, 0].tolist()) == {3}  # aromatic


def test_charged_atoms_and_disconnected_salt() -> None:
    b = one("C[N+](C)(C)C.[Cl-]")
    assert b.x.shape[0] == 6 and b.edge_index.shape[1] == 8
    assert b.x[:, 0].tolist() == [5, 6, 5, 5, 5, 16]
    cl = 5
    assert not (b.edge_index == cl).any()  # the counter-ion has no bond
    g = featurize(["[Na+].[O-]C(=O)C"])
    assert len(g) == 1 and int(g.num_nodes[0]) == 5


def test_chirality_and_bond_direction() -> None:
    a, b = one("C[C@H](N)O"), one("C[C@@H](N)O")
    assert {int(a.x[1, 1]), int(b.x[1, 1])} == {1, 2} and int(a.x[0, 1]) == 0
    e = one("F/C=C/F")
    assert set(e.edge_attr[:, 1].tolist()) <= {0, 1, 2} and (e.edge_attr[:, 1] > 0).any()
    assert 1 in e.edge_attr[:, 0].tolist()  # the double bond


def test_feature_ranges_on_varied_molecules() -> None:
    smi = ["CC(=O)Oc1ccccc1C(=O)O", "C#N", "[2H]C", "O=S(=O)(O)O", "C1CC[C@H](N)CC1", "BrC(Cl)(F)I", "[Pt]"]
    g = featurize(smi)
    x, ea = g.x.long(), g.edge_attr.long()
    assert x[:, 0].min() >= 0 and x[:, 0].max() <= 117 and x[:, 1].min() >= 0 and x[:, 1].max() <= 3
    assert ea[:, 0].max() <= 3 and ea[:, 1].max() <= 2
    assert 2 in ea[:, 0].tolist()  # triple bond of C#N
    assert M.HU.mask_atom == (119, 0) and M.HU.self_loop == (4, 0) and M.HU.mask_bond == (5, 0)


def test_batch_offsets_match_single_graphs() -> None:
    smi = ["CCO", "c1ccccc1", "CN"]
    g = featurize(smi)
    b = g.batch([2, 0])
    assert b.ptr.tolist() == [0, 2, 5] and b.batch.tolist() == [0, 0, 1, 1, 1]
    assert torch.equal(b.edge_index[:, :2], one("CN").edge_index)
    assert torch.equal(b.edge_index[:, 2:] - 2, one("CCO").edge_index)
    pyg = b.to_pyg()
    assert pyg.num_graphs == 2
    sub = g.subset([2, 0])
    assert sub.smiles == ["CN", "CCO"] and torch.equal(sub.batch([0, 1]).edge_index, b.edge_index)


def test_invalid_smiles_skipped_with_warning() -> None:
    with pytest.warns(UserWarning, match=r"skipped 2 of 4 .*not_a_smiles"):
        g = featurize(["CCO", "not_a_smiles", "C1CC", "CN"])
    assert len(g) == 2 and g.skipped == 2 and g.source_index.tolist() == [0, 3]
    with pytest.raises(ValueError, match="all 2 SMILES failed"):
        featurize(["xx", "C1CC"])
    with pytest.raises(ValueError, match="featurizer"):
        featurize(["CCO"], "nope")


def test_ogb_featurizer() -> None:
    b = one("CCO", "ogb")
    assert b.x.shape == (3, 9) and b.edge_attr.shape == (4, 3)
    f = M.get_featurizer("ogb")
    assert len(f.atom_dims) == 9 and (b.x < torch.tensor(f.atom_dims)).all()


def test_read_smiles_formats(tmp_path: Path) -> None:
    smi = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC"]
    (tmp_path / "a.csv").write_text("id,SMILES\n" + "".join(f"{i},{s}\n" for i, s in enumerate(smi)))
    (tmp_path / "b.smi").write_text("smiles\n" + "".join(f"{s} name{i}\n" for i, s in enumerate(smi)))
    with gzip.open(tmp_path / "c.csv.gz", "wt") as f:
        f.write("SMILES\n" + "\n".join(smi) + "\n")
    for name in ("a.csv", "b.smi", "c.csv.gz"):
        assert read_smiles(tmp_path / name) == smi
    sub = read_smiles(tmp_path / "a.csv", limit=3, seed=1)
    assert len(sub) == 3 and sub == read_smiles(tmp_path / "a.csv", limit=3, seed=1) and set(sub) <= set(smi)
    with pytest.raises(ValueError, match="not found"):
        read_smiles(tmp_path / "missing.csv")
    (tmp_path / "d.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="no SMILES column"):
        read_smiles(tmp_path / "d.csv")


def test_cache_second_run_does_not_reparse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "corpus.smi"
    p.write_text("CCO\nCCN\nc1ccccc1\n")
    g1 = load_smiles_file(p)
    monkeypatch.setattr(M, "featurize", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-parsed")))
    g2 = load_smiles_file(p)
    assert torch.equal(g1.x, g2.x) and g1.smiles == g2.smiles
    p.write_text("CCO\nCCN\n")  # new content -> new key -> parsed again
    with pytest.raises(AssertionError, match="re-parsed"):
        load_smiles_file(p)


def test_moleculenet_labels_missing_and_negative(tmp_path: Path) -> None:
    (tmp_path / "clintox.csv").write_text("smiles,FDA_APPROVED,CT_TOX\nCCO,1,0\nCCN,,1\nbad((,0,0\nc1ccccc1,-1,\n")
    smiles, y, tasks = read_moleculenet_csv(tmp_path / "clintox.csv", "clintox")
    assert tasks == ["FDA_APPROVED", "CT_TOX"] and len(smiles) == 4
    assert y[0].tolist() == [1, 0] and torch.isnan(y[1, 0]) and y[3, 0] == 0 and torch.isnan(y[3, 1])
    with pytest.warns(UserWarning, match="skipped 1"):
        g = load_moleculenet("clintox", root=tmp_path, use_cache=False)
    assert len(g) == 3 and g.y.shape == (3, 2)
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n1,a,2,CCO\n")
    with pytest.raises(ValueError, match="not -1/0/1"):
        read_moleculenet_csv(tmp_path / "bbbp.csv", "bbbp")
    with pytest.raises(ValueError, match="unknown MoleculeNet"):
        load_moleculenet("qm9", root=tmp_path)


@pytest.mark.dataset
def test_real_bbbp() -> None:
    from tests.conftest import data_or_skip

    data_or_skip("moleculenet", "bbbp.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_moleculenet("bbbp")
    assert len(g) == 2039 and g.skipped == 11 and g.y.shape == (2039, 1)  # as pretrain-gnns
    from graph.mol.splits import scaffold_split

    assert [len(p) for p in scaffold_split(g.smiles)] == [1631, 204, 204]  # pretrain-gnns' BBBP scaffold split sizes
