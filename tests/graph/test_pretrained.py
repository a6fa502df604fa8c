"""Pretrained graph encoders (save_pretrained / from_pretrained) and the Hu featuriser against OGB's."""
from __future__ import annotations

import json

import pytest
import torch
from torch_geometric.data import Batch

from graph.mol.data import featurize, get_featurizer
from graph.tu.model import GINEncoder
from graph.mol.model import MolGIN

from .test_augment import _ring


def test_tu_gin_roundtrip(tmp_path):
    """GINEncoder saved with save_pretrained -> from_pretrained gives a plain module with identical embeddings, in eval."""
    torch.manual_seed(0)
    enc = GINEncoder(in_dim=3, hidden=8, layers=2)
    b = Batch.from_data_list([_ring(n) for n in (4, 6, 9)])
    enc.train()
    enc(b.x, b.edge_index, b.batch)  # move the BatchNorm running statistics away from their init
    enc.eval()
    want = enc(b.x, b.edge_index, b.batch)
    enc.save_pretrained(tmp_path / "gin")
    cfg = json.loads((tmp_path / "gin" / "config.json").read_text())
    assert cfg["model_type"] == "graphcl_gin" and (cfg["in_dim"], cfg["hidden"], cfg["layers"]) == (3, 8, 2)
    again = GINEncoder.from_pretrained(tmp_path / "gin")
    assert type(again) is GINEncoder and not again.training
    torch.testing.assert_close(again(b.x, b.edge_index, b.batch), want)


def test_mol_gin_roundtrip_and_dropout_override(tmp_path):
    """MolGIN save/load -> same embeddings; the featuriser vocabulary travels in config.json; dropout overridable."""
    torch.manual_seed(0)
    enc = MolGIN(num_layers=2, dim=16).eval()
    mb = featurize(["CCO", "c1ccccc1O", "C#N"]).batch([0, 1, 2])
    want = enc.embed(mb)
    enc.save_pretrained(tmp_path / "mol")
    again = MolGIN.from_pretrained(tmp_path / "mol", dropout=0.5)
    assert again.dropout == 0.5 and again.featurizer == enc.featurizer
    torch.testing.assert_close(again.embed(mb), want)  # eval: dropout inactive


def test_from_pretrained_errors(tmp_path):
    """A missing folder, a folder of the other model type, broken JSON -> ValueError naming the path."""
    with pytest.raises(ValueError, match="folder .*nothing not found"):
        GINEncoder.from_pretrained(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="config.json missing"):
        GINEncoder.from_pretrained(tmp_path / "empty")
    MolGIN(num_layers=2, dim=8).save_pretrained(tmp_path / "mol")
    with pytest.raises(ValueError, match="model_type is 'hu_mol_gin', expected 'graphcl_gin'"):
        GINEncoder.from_pretrained(tmp_path / "mol")
    (tmp_path / "mol" / "config.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        MolGIN.from_pretrained(tmp_path / "mol")


SMILES = ["CCO", "c1ccccc1", "CC(=O)Oc1ccccc1C(=O)O", "C[C@H](N)O", "C[C@@H](N)O", "F/C=C/F", "C#N",
          "C[N+](C)(C)C.[Cl-]", "O=S(=O)(O)O", "C1CC[C@H](N)CC1", "BrC(Cl)(F)I"]


def test_hu_featuriser_coincides_with_ogb_smiles2graph():
    """Hu vs ogb.utils.smiles2graph on varied molecules -> same atoms, bonds and edge order; the columns they share
    agree: atom type (atomic number - 1), chirality tag, bond type. (Hu's 2nd bond column is the bond direction, OGB's
    the stereo; OGB's other 7 atom columns have no Hu counterpart.)"""
    pytest.importorskip("ogb")
    hu, ogb = featurize(SMILES, "hu"), featurize(SMILES, "ogb")
    assert hu.skipped == ogb.skipped == 0
    h, o = hu.batch(list(range(len(SMILES)))), ogb.batch(list(range(len(SMILES))))
    assert torch.equal(h.edge_index, o.edge_index) and torch.equal(h.batch, o.batch)
    assert torch.equal(h.x[:, 0], o.x[:, 0])  # atomic number - 1
    assert torch.equal(h.x[:, 1], o.x[:, 1])  # CHI_UNSPECIFIED, CW, CCW, OTHER
    assert torch.equal(h.edge_attr[:, 0], o.edge_attr[:, 0])  # SINGLE, DOUBLE, TRIPLE, AROMATIC
    assert o.x.shape[1] == 9 and o.edge_attr.shape[1] == 3
    ogb_f = get_featurizer("ogb")  # one extra index per column for the mask token; self-loop and mask bond types
    assert ogb_f.atom_dims[0] == 120 and ogb_f.bond_dims[0] == 7


def test_mol_pretraining_writes_pretrained_folder_with_card(tmp_path):
    """Molecular pretraining (1 epoch, registry on) -> out/export: MolGIN.from_pretrained equals the loaded encoder, and a
    README card with the loss, its hparams, molecule count, seed, run id and the registry's train metrics."""
    from graph.mol.model import load_mol_encoder as load_encoder
    from graph.mol.pretrain import PretrainMolConfig, pretrain
    from suite.registry import Registry

    from .test_mol_train import TINY, _corpus

    res = pretrain(PretrainMolConfig(corpus=str(_corpus(tmp_path)), out=str(tmp_path / "m"), epochs=1, loss="macl",
                                     device="cpu", seed=2, **TINY))
    enc, _ = load_encoder(tmp_path / "m")
    again = MolGIN.from_pretrained(tmp_path / "m" / "export")
    for (k, a), (_, b) in zip(enc.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), k
    card = (tmp_path / "m" / "export" / "README.md").read_text()
    run = Registry().runs(task="mol-pretrain")[-1]
    assert "`macl`" in card and '"tau0": 0.1' in card and f"| training examples | {res.info['molecules']} |" in card
    assert "| seed | 2 |" in card and f"| {run['id']} |" in card and "train/loss" in card
    assert "MolGIN.from_pretrained" in card
