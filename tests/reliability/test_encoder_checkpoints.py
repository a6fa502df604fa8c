"""Graph encoder checkpoints (``torch.save`` dictionaries, not pretrained folders) that load as data but hold the
wrong data: `suite graph tu-eval CKPT` and `suite graph finetune-mol --init CKPT` on a checkpoint whose sizes are
of the wrong type, whose config or spec is missing or not a mapping. Each gives a ValueError naming the file and
what is wrong, so the command prints one line and exits 2 (they were TypeError / KeyError tracebacks)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric")

from suite.cli import main  # noqa: E402
from suite.train import save_checkpoint  # noqa: E402


def _tu_checkpoint(path: Path, **change: object) -> Path:
    """A checkpoint as graph.tu.graphcl.save_encoder writes it, with ``change`` applied (None: key removed)."""
    import dataclasses

    from graph.tu.graphcl import TUConfig
    from graph.tu.model import GraphCLModel

    model = GraphCLModel(7, 8, 2)
    state = {"model": model.state_dict(), "in_dim": 7, "hidden": 8, "layers": 2,
             "config": dataclasses.asdict(TUConfig(dataset="MUTAG")), "meta": {}}
    for k, v in change.items():
        if v is None:
            state.pop(k)
        else:
            state[k] = v
    return save_checkpoint(path, state)


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    return rc, capsys.readouterr().err.strip()


TU_BAD = {
    "in_dim 'seven'": ({"in_dim": "seven"}, r"in_dim.*'seven'"),
    "hidden 2.5": ({"hidden": 2.5}, r"hidden.*2\.5"),
    "layers 0": ({"layers": 0}, r"layers.*0"),
    "layers true": ({"layers": True}, r"layers.*True"),
    "config a list": ({"config": [1, 2]}, r"config.*mapping.*list"),
    "config with an unknown key": ({"config": {"dataset": "MUTAG", "epochz": 3}}, r"config.*epochz"),
    "config with a bad value": ({"config": {"dataset": "MUTAG", "epochs": 0}}, r"config.*epochs"),
}


@pytest.mark.parametrize("case", sorted(TU_BAD))
def test_tu_eval_checkpoint_with_fields_of_the_wrong_type(tmp_path, capsys, case):
    """`suite graph tu-eval ckpt.pt` on a GraphCL checkpoint whose in_dim is "seven", hidden 2.5, layers 0 or true,
    whose config is a list, has an unknown key or a value its config class refuses -> ValueError naming the file and
    the field; exit 2 with one line, no traceback (in_dim "seven" was a TypeError traceback, exit 1)"""
    from graph.tu.graphcl import load_encoder

    change, match = TU_BAD[case]
    path = _tu_checkpoint(tmp_path / "ckpt.pt", **change)
    with pytest.raises(ValueError, match=match) as exc:
        load_encoder(path)
    assert str(path) in str(exc.value)
    rc, err = _cli(["graph", "tu-eval", str(path)], capsys)
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err and str(path) in err, err
    assert re.search(match, err), err


def _mol_checkpoint(path: Path, state: dict) -> Path:
    return save_checkpoint(path, state)


def _mol_state(kind: str) -> dict:
    """An encoder.pt ("encoder" + "spec") or a full pretraining checkpoint ("model" + "config") of a 2-layer MolGIN."""
    from graph.mol.model import MolGIN

    enc = MolGIN(num_layers=2, dim=8)
    if kind == "encoder":
        return {"encoder": enc.state_dict(), "spec": {"num_layers": 2, "emb_dim": 8, "featurizer": "hu"}, "loss": "macl"}
    return {"model": {f"encoder.{k}": v for k, v in enc.state_dict().items()},
            "config": {"num_layers": 2, "emb_dim": 8, "featurizer": "hu", "loss": "macl"}}


MOL_BAD = {
    "encoder without spec": ("encoder", {"spec": None}, r"no 'spec'"),
    "spec a list": ("encoder", {"spec": [2, 8, "hu"]}, r"spec.*mapping.*list"),
    "spec num_layers 'two'": ("encoder", {"spec": {"num_layers": "two", "emb_dim": 8, "featurizer": "hu"}},
                              r"num_layers.*'two'"),
    "spec featurizer 3": ("encoder", {"spec": {"num_layers": 2, "emb_dim": 8, "featurizer": 3}}, r"featurizer.*3"),
    "checkpoint without config": ("model", {"config": None}, r"no 'config'"),
    "config a string": ("model", {"config": "num_layers=2"}, r"config.*mapping.*str"),
    "config without emb_dim": ("model", {"config": {"num_layers": 2, "featurizer": "hu"}}, r"emb_dim"),
}


@pytest.mark.parametrize("case", sorted(MOL_BAD))
def test_finetune_init_checkpoint_without_a_spec(tmp_path, capsys, case):
    """`suite graph finetune-mol --init enc.pt` on an encoder checkpoint without "spec" (or a spec that is a list or
    holds num_layers "two"), or a pretraining checkpoint without "config" (or a config that is a string or lacks
    emb_dim) -> ValueError naming the file and what is missing; exit 2 with one line, no traceback, before any data
    set is loaded (no spec was `KeyError: 'spec'`, exit 1)"""
    from graph.mol.model import load_mol_encoder as load_encoder

    kind, change, match = MOL_BAD[case]
    state = _mol_state(kind)
    for k, v in change.items():
        if v is None:
            state.pop(k)
        else:
            state[k] = v
    path = _mol_checkpoint(tmp_path / "enc.pt", state)
    with pytest.raises(ValueError, match=match) as exc:
        load_encoder(path)
    assert str(path) in str(exc.value)
    rc, err = _cli(["graph", "finetune-mol", "--init", str(path), "--no-registry",
                    "--data-root", str(tmp_path / "no-data")], capsys)
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err and str(path) in err, err
    assert re.search(match, err), err


def test_valid_encoder_checkpoints_still_load(tmp_path):
    """a well-formed GraphCL checkpoint, encoder.pt and full pretraining checkpoint -> loaded as before (the new
    checks refuse nothing valid)"""
    from graph.tu.graphcl import load_encoder as load_tu
    from graph.mol.model import load_mol_encoder as load_mol

    model, cfg, meta = load_tu(_tu_checkpoint(tmp_path / "tu.pt"))
    assert model.encoder.in_dim == 7 and cfg.dataset == "MUTAG" and meta == {"acc": None, "run_id": None}
    for kind in ("encoder", "model"):
        enc, spec = load_mol(_mol_checkpoint(tmp_path / f"{kind}.pt", _mol_state(kind)))
        assert (enc.num_layers, enc.dim, spec["featurizer"], spec["loss"]) == (2, 8, "hu", "macl")
