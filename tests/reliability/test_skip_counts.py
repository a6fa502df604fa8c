"""Nothing dropped silently: images of another size and non-numeric MoleculeNet labels are counted
and reported (warning / stdout and the registry)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from suite.registry import Registry
from tests.reliability.images import image_folder


def _image_folder(root: Path, odd: int = 1) -> Path:
    return image_folder(root, size=8, per_class=4, odd=odd)


def test_image_folder_other_size_warned_and_counted(tmp_path: Path) -> None:
    """image folder with 2 images of another size -> warning naming the folder and a path, info['skipped'] counts 2"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs", odd=2)
    with pytest.warns(UserWarning, match=r"skipped 2 of 10 images whose size differs from 8x8 .*odd0\.png \(10x12\)"):
        data = load_image_folder(root, cache=False)
    assert data.info["skipped"] == {"train": 2, "test": 0} and data.train_x.shape[0] == 8


def test_vision_pretrain_reports_skipped_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite vision pretrain` on a folder with an image of another size -> stdout line and registry metric skipped_train_images = 1"""
    from vision.config import PretrainConfig
    from vision.train import pretrain

    root = _image_folder(tmp_path / "imgs", odd=1)
    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    cfg = PretrainConfig(dataset=f"mem:{root}", encoder="convnet", width=4, epochs=1, batch_size=4,
                         max_steps_per_epoch=1, optimizer="adam", out=str(tmp_path / "run"), linear_probe=False,
                         geometry_batches=0, knn_k=3, recipe="digits", proj_dim=8)
    with pytest.warns(UserWarning, match="skipped 1"):
        res = pretrain(cfg, reg)
    assert "skipped 1 training and 0 test images" in capsys.readouterr().out
    assert res.info["data"]["skipped_train_images"] == 1
    logged = {(m["name"], m["split"]): m["value"] for m in reg.metrics(res.run_id)}
    assert logged[("skipped_train_images", "data")] == 1 and logged[("skipped_test_images", "data")] == 0


def test_moleculenet_non_numeric_label_counted(tmp_path: Path) -> None:
    """bbbp.csv with label cells 'yes' and 'n/a?' -> warning naming file, line and value; counted in MolGraphs.bad_labels"""
    from graph.mol.data import load_moleculenet, read_moleculenet_table

    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n1,a,1,CCO\n2,b,yes,CCN\n3,c,,CCC\n4,d,n/a?,c1ccccc1\n")
    with pytest.warns(UserWarning, match=r"bbbp\.csv: 2 non-numeric label\(s\) treated as missing .*line 3 column 'p_np': 'yes'"):
        t = read_moleculenet_table(tmp_path / "bbbp.csv", "bbbp")
    assert t.non_numeric == 2 and np.isnan(t.y[1, 0].item()) and np.isnan(t.y[2, 0].item())
    with pytest.warns(UserWarning, match="non-numeric"):
        g = load_moleculenet("bbbp", root=tmp_path)
    assert g.bad_labels == 2
    assert load_moleculenet("bbbp", root=tmp_path).bad_labels == 2  # the count survives the cache


def test_finetune_records_non_numeric_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite graph finetune-mol` on a set with a non-numeric label -> stdout line and registry metric non_numeric_labels = 1"""
    import argparse

    from graph.mol.cli import register_mol

    from tests.graph.test_mol_train import CORPUS

    rows = [f"{i},m{i},{'maybe' if i == 3 else i % 2},{s}" for i, s in enumerate(CORPUS * 2)]
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + "\n".join(rows) + "\n")
    parser = argparse.ArgumentParser()
    register_mol(parser.add_subparsers())
    a = parser.parse_args(["finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path), "--init", "none",
                           "--seed", "0", "--epochs", "1", "--split", "random", "--batch-size", "4", "--num-layers",
                           "2", "--emb-dim", "8", "--device", "cpu"])
    with pytest.warns(UserWarning, match="non-numeric"):
        assert a.func(a) == 0
    assert "1 non-numeric label(s) treated as missing" in capsys.readouterr().out
    run = Registry().runs(task="molnet-finetune", dataset="bbbp")[-1]
    logged = {m["name"]: m["value"] for m in Registry().metrics(run["id"])}
    assert logged["non_numeric_labels"] == 1
    assert json.loads(run["config"])["dataset"] == "bbbp"


def test_image_folder_with_val_instead_of_test(tmp_path: Path) -> None:
    """a `mem:` image folder whose held-out split is val/ -> read as its test split, as `folder:` reads it; one with
    neither test/ nor val/ -> ValueError naming both (it wanted test/ only: issue 80)"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs", odd=0)
    (root / "test").rename(root / "val")
    data = load_image_folder(root, cache=False)
    assert data.test_x.shape[0] == 8 and data.train_x.shape[0] == 8
    (root / "val").rename(root / "other")
    with pytest.raises(ValueError, match=r"test/<class>/\*\.jpg \(or val/\)"):
        load_image_folder(root, cache=False)
