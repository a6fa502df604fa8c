"""Pretrained-model folders (``model.safetensors`` + ``config.json``) handed to ``from_pretrained``: every way a
folder can be wrong gives a ValueError naming the path and what is wrong; a full disk during an export leaves the
previous model loadable."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

from graph.tu.model import GINEncoder  # noqa: E402
from graph.mol.model import MolGIN  # noqa: E402


def _gin(tmp_path: Path) -> Path:
    return GINEncoder(in_dim=7, hidden=8, layers=2).save_pretrained(tmp_path / "gin")


def _mol(tmp_path: Path) -> Path:
    return MolGIN(num_layers=2, dim=8).save_pretrained(tmp_path / "mol")


def _edit(folder: Path, **change: object) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    for k, v in change.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("cls,make", [(GINEncoder, _gin), (MolGIN, _mol)], ids=["GINEncoder", "MolGIN"])
def test_weights_that_are_not_safetensors(tmp_path, cls, make):
    """`GINEncoder.from_pretrained` / `MolGIN.from_pretrained` on a folder whose model.safetensors is random bytes
    or a torch pickle -> ValueError naming the file (was SafetensorError: header too large, no path)"""
    import torch

    folder = make(tmp_path)
    w = folder / "model.safetensors"
    for content in (b"\xff" * 64 + b"not safetensors", None):
        if content is None:
            torch.save({"x": torch.zeros(2)}, w)
        else:
            w.write_bytes(content)
        with pytest.raises(ValueError, match=rf"{w}.*(not a safetensors|unreadable)"):
            cls.from_pretrained(folder)


@pytest.mark.parametrize("cls,make,field", [(GINEncoder, _gin, "in_dim"), (GINEncoder, _gin, "layers"),
                                            (MolGIN, _mol, "num_layers"), (MolGIN, _mol, "featurizer")],
                         ids=["gin-in_dim", "gin-layers", "mol-num_layers", "mol-featurizer"])
def test_config_without_a_required_field(tmp_path, cls, make, field):
    """a pretrained config.json without `in_dim` (GIN) or `num_layers` (MolGIN) -> ValueError naming config.json and
    the missing field (was a KeyError)"""
    folder = make(tmp_path)
    _edit(folder, **{field: None})
    with pytest.raises(ValueError, match=rf"config.json.*{field}"):
        cls.from_pretrained(folder)


@pytest.mark.parametrize("cls,make,change", [(GINEncoder, _gin, {"in_dim": 9}), (GINEncoder, _gin, {"hidden": 16}),
                                             (MolGIN, _mol, {"dim": 16})], ids=["gin-in_dim", "gin-hidden", "mol-dim"])
def test_config_that_does_not_match_the_weights(tmp_path, cls, make, change):
    """a config.json whose in_dim (or width) does not match the saved weights -> ValueError naming the folder, the
    first mismatching tensor and both shapes (was a raw 'size mismatch' listing every tensor)"""
    folder = make(tmp_path)
    _edit(folder, **change)
    with pytest.raises(ValueError, match=rf"{folder}.*shape .* in the weights.*config"):
        cls.from_pretrained(folder)


@pytest.mark.parametrize("value", ["seven", -3, 2.5, True])
def test_config_field_of_the_wrong_type(tmp_path, value):
    """a GIN config.json with in_dim 'seven', -3, 2.5 or true -> ValueError naming config.json, in_dim and the value"""
    folder = _gin(tmp_path)
    _edit(folder, in_dim=value)
    with pytest.raises(ValueError, match=r"config.json.*in_dim"):
        GINEncoder.from_pretrained(folder)


def test_other_model_type_and_missing_folder(tmp_path):
    """MolGIN.from_pretrained on a GIN folder, on a file, on a missing path -> ValueError naming the path and why"""
    gin = _gin(tmp_path)
    with pytest.raises(ValueError, match=r"model_type is 'graphcl_gin', expected 'hu_mol_gin'"):
        MolGIN.from_pretrained(gin)
    with pytest.raises(ValueError, match=r"config.json.*is a file, not a folder|not a pretrained"):
        GINEncoder.from_pretrained(gin / "config.json")
    with pytest.raises(ValueError, match="not found"):
        GINEncoder.from_pretrained(tmp_path / "nope")


def test_weights_missing_a_tensor_or_holding_an_extra_one(tmp_path):
    """a model.safetensors lacking one tensor of the model, or holding one the model does not have -> ValueError
    naming the folder and the tensor"""
    from safetensors.torch import load_file, save_file

    folder = _gin(tmp_path)
    w = folder / "model.safetensors"
    state = load_file(str(w))
    name = sorted(state)[0]
    save_file({k: v for k, v in state.items() if k != name}, str(w))
    with pytest.raises(ValueError, match=rf"{folder}.*missing.*{name}"):
        GINEncoder.from_pretrained(folder)
    save_file({**state, "extra.weight": state[name].clone()}, str(w))
    with pytest.raises(ValueError, match=rf"{folder}.*unexpected.*extra.weight"):
        GINEncoder.from_pretrained(folder)


def test_disk_full_while_exporting_a_model(tmp_path):
    """the disk fills while save_pretrained overwrites an exported model -> OSError; the previous model still loads
    (same weights), no temporary file left"""
    import torch

    from tests.reliability.limits import file_size_limit

    old = GINEncoder(in_dim=7, hidden=64, layers=3)
    folder = old.save_pretrained(tmp_path / "gin")
    size = (folder / "model.safetensors").stat().st_size
    with file_size_limit(size // 2), pytest.raises(OSError):
        GINEncoder(in_dim=7, hidden=64, layers=3).save_pretrained(folder)
    back = GINEncoder.from_pretrained(folder)
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), back.state_dict().values()))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_text_encoder_folder_with_a_corrupt_meta_file(tmp_path, tiny_model_dir):
    """`load_encoder` on a saved SimCSE folder whose suite metadata is not JSON or lacks a key -> ValueError naming
    the file (was a JSONDecodeError / KeyError traceback)"""
    import shutil

    from text.models.save import META, load_encoder

    folder = tmp_path / "enc"
    shutil.copytree(tiny_model_dir, folder)
    (folder / META).write_text("{not json")
    with pytest.raises(ValueError, match=rf"{META}.*not valid JSON"):
        load_encoder(folder)
    (folder / META).write_text(json.dumps({"pooling": "cls"}))
    with pytest.raises(ValueError, match=rf"{META}.*mlp_head"):
        load_encoder(folder)
