"""Earlier layouts, read in one place (suite/train/legacy.py) from each front-end's declaration: a run folder or an
export of each earlier layout still resumes or loads. (Elsewhere, one test per layout: the vision runs under
runs/vision in tests/reliability/test_resume.py, the MLM build in tests/text/test_mlm.py, the text head in
tests/text/test_models_train.py, the graph .pt exports in tests/reliability/test_encoder_checkpoints.py.)"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from suite.registry import Registry
from suite.train import save_checkpoint
from suite.train.legacy import Earlier, earlier_layout
from suite.train.run import newest_checkpoint, read_checkpoint, run

from tests.suite.test_run_owner import Toy, ToyConfig, _Interrupt, _weights


class OldToy(Toy):
    earlier = Earlier(checkpoints=("checkpoint.pt",))  # SimCSE's and MLM's layout before the run owner


@pytest.mark.parametrize("name,declared", [("checkpoint.pt", "text.methods.simcse:SimCSETask"),
                                           ("epoch0002.pt", "graph.mol.pretrain:MolPretrainTask")])
def test_a_run_folder_of_an_earlier_layout_resumes(tmp_path: Path, name: str, declared: str) -> None:
    """a run interrupted under a layout before the run owner (its checkpoint at <out>/checkpoint.pt, SimCSE's, or
    <out>/epoch<N>.pt, molecular pretraining's) -> resumed from it by the owner, to the uninterrupted run's weights;
    the front-end declares exactly that file"""
    import importlib

    module, cls = declared.split(":")
    pytest.importorskip(module.split(".")[0] == "graph" and "torch_geometric" or "transformers")
    earlier = getattr(importlib.import_module(module), cls).earlier
    reg = Registry(str(tmp_path / "r.sqlite"))
    full = run(Toy(), ToyConfig(out=str(tmp_path / "full")), registry=reg)
    cfg = ToyConfig(out=str(tmp_path / "old"))
    with pytest.raises(_Interrupt):
        run(Toy(stop_at=3), cfg, registry=reg)
    ckpts = sorted((tmp_path / "old" / "checkpoints").glob("step-*.pt"))
    ckpts[-1].rename(tmp_path / "old" / name)  # the earlier layout: the newest checkpoint under its earlier name
    for p in ckpts[:-1]:
        p.unlink()
    (tmp_path / "old" / "checkpoints").rmdir()
    task = Toy()
    task.earlier = earlier  # type: ignore[misc]
    again = run(task, cfg, registry=reg)
    assert again.resumed_from == 2
    for k, v in _weights(full.folder).items():
        assert torch.equal(v, _weights(again.folder)[k]), k
    assert (tmp_path / "old" / name).exists()  # kept (only a built MLM model removes its earlier checkpoint)


def test_removed_when_built_and_the_resume_off_switch(tmp_path: Path) -> None:
    """removed_when_built: the earlier checkpoint goes once the run has finished; resume=False ignores it"""
    cfg = ToyConfig(out=str(tmp_path / "old"), registry=False)
    with pytest.raises(_Interrupt):
        run(OldToy(stop_at=2), cfg)
    next((tmp_path / "old" / "checkpoints").glob("step-*.pt")).rename(tmp_path / "old" / "checkpoint.pt")

    class Built(OldToy):
        earlier = replace(OldToy.earlier, removed_when_built=True)

    assert run(Built(), cfg).resumed_from == 1
    assert not (tmp_path / "old" / "checkpoint.pt").exists()


def test_vision_checkpoint_of_an_earlier_layout_is_found_and_read(tmp_path: Path) -> None:
    """`suite vision eval --ckpt <folder>` on a folder of the layout before the owner: its newest epoch<N>.pt, whose
    model entry was named "method", is found and read under today's names"""
    pytest.importorskip("kornia")
    from vision.train import PretrainTask

    earlier = PretrainTask.earlier
    for n in (1, 2):
        save_checkpoint(tmp_path / f"epoch000{n}.pt", {"method": {"w": torch.full((2,), float(n))}, "epoch": n})
    found = newest_checkpoint(tmp_path, earlier)
    assert found == tmp_path / "epoch0002.pt"
    state = read_checkpoint(found, earlier)
    assert torch.equal(state["model"]["w"], torch.full((2,), 2.0)) and "method" not in state
    assert newest_checkpoint(tmp_path / "empty", earlier) is None


def test_a_folder_holding_an_earlier_molecular_checkpoint_loads(tmp_path: Path) -> None:
    """a pretraining folder of the layout before the owner (epoch<N>.pt, or checkpoints/step-<N>.pt, holding the
    model and its config) -> its encoder loads from the folder, the newest epoch"""
    pytest.importorskip("torch_geometric")
    from graph.mol.model import MolGIN, load_mol_encoder

    enc = MolGIN(num_layers=2, dim=8)
    for n, sub in ((1, ""), (3, ""), (5, "checkpoints/")):
        state = {"model": {f"encoder.{k}": v + n for k, v in enc.state_dict().items()},
                 "config": {"num_layers": 2, "emb_dim": 8, "featurizer": "hu", "loss": "macl"}}
        name = f"epoch{n}.pt" if not sub else f"step-{n:09d}.pt"
        save_checkpoint(tmp_path / "a" / sub / name, state)
    loaded, spec = load_mol_encoder(tmp_path / "a")
    assert spec["path"] == str(tmp_path / "a" / "epoch3.pt") and spec["loss"] == "macl"
    assert all(torch.equal(loaded.state_dict()[k], v + 3) for k, v in enc.state_dict().items())
    (tmp_path / "a" / "epoch1.pt").unlink()
    (tmp_path / "a" / "epoch3.pt").unlink()
    assert load_mol_encoder(tmp_path / "a")[1]["path"].endswith("step-000000005.pt")


def test_the_hook_finds_nothing_in_todays_layout(tmp_path: Path) -> None:
    """a folder of today's layout (or none) -> nothing earlier found"""
    found = earlier_layout(Earlier(checkpoints=("epoch*.pt",), files={"a": "b"}), tmp_path)
    assert (found.checkpoints, found.files, found.export) == ([], {}, None)
