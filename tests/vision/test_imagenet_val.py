"""ImageNet's official validation layouts (issue 76, item 2) and a finished run evaluated again by its own protocol
(item 3), on generated data only.

A flat ``val/ILSVRC2012_val_<n>.JPEG`` folder is labelled by Kaggle's ``LOC_val_solution.csv`` (at Kaggle's root,
beside ``ILSVRC/``) or by the devkit's ground truth with its synset mapping (``LOC_synset_mapping.txt`` or
``meta.mat``), its classes in the train/ folder's order; ``suite vision eval --ckpt RUN`` of a streamed run gives the
run's kNN and probe figures and records the protocol that produced them."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.registry import Registry
from tests.vision.streamdata import _image
from vision import streamed
from vision.config import PretrainConfig
from vision.sources import open_source
from vision.streamed import prepare_stream
from vision.train import pretrain

# ILSVRC2012_IDs in the devkit's order, which is not the wnids' sorted order (the labels' order)
WNIDS = ("n04000000", "n01000000", "n02000000")  # ids 1, 2, 3


def _imagenet(root: Path, train: int = 4, val: int = 5, seed: int = 0) -> tuple[Path, list[str]]:
    """``root/train/<wnid>/*.JPEG`` and a flat ``root/val/ILSVRC2012_val_<n>.JPEG`` of class-coloured images; the
    wnid of every validation image, in file order."""
    rng = np.random.default_rng(seed)
    for c, wnid in enumerate(WNIDS):
        d = root / "train" / wnid
        d.mkdir(parents=True)
        for i in range(train):
            _image(rng, c, 40, 48, "RGB").save(d / f"{wnid}_{i}.JPEG", quality=85)
    (root / "val").mkdir()
    truth = [WNIDS[int(c)] for c in rng.permutation(np.arange(len(WNIDS) * val) % len(WNIDS))]
    for n, wnid in enumerate(truth, start=1):
        _image(rng, WNIDS.index(wnid), 44, 40, "RGB").save(root / "val" / f"ILSVRC2012_val_{n:08d}.JPEG", quality=85)
    return root, truth


def _solution(path: Path, truth: list[str]) -> None:
    """Kaggle's LOC_val_solution.csv: rows in no particular order, boxes after each class."""
    rows = [f"ILSVRC2012_val_{n:08d},{w} 12 4 30 33 {w} 1 2 20 21" for n, w in enumerate(truth, start=1)]
    path.write_text("ImageId,PredictionString\n" + "\n".join(rows[::-1]) + "\n")


def _check_labels(data_root: Path, truth: list[str]) -> None:
    train = open_source(f"folder:{data_root}", "train")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: every image has its class
        val = open_source(f"folder:{data_root}", "test", train.classes)
    assert train.classes == sorted(WNIDS) == val.classes
    assert len(val) == len(truth)
    got = {Path(val.where(i)).name: val.classes[int(val.labels[i])] for i in range(len(val))}
    assert got == {f"ILSVRC2012_val_{n:08d}.JPEG": w for n, w in enumerate(truth, start=1)}


def _cfg(tmp_path: Path, dataset: str, **kw: object) -> PretrainConfig:
    base = dict(dataset=dataset, encoder="convnet", width=4, recipe="imagenet", image_size=32, epochs=1, batch_size=6,
                optimizer="lars", out=str(tmp_path / "run"), knn_k=3, geometry_batches=0, proj_dim=8, registry=False,
                seed=0)
    base.update(kw)
    return PretrainConfig(**base)  # type: ignore[arg-type]


def test_a_flat_val_with_kaggles_solution_is_evaluated_in_full(tmp_path: Path) -> None:
    """Kaggle's layout (<kaggle>/LOC_val_solution.csv beside ILSVRC/Data/CLS-LOC/{train,val}): every validation image
    labelled with its class in the train/ folder's (sorted wnid) order, and a run evaluates all of them"""
    data_root, truth = _imagenet(tmp_path / "kaggle" / "ILSVRC" / "Data" / "CLS-LOC")
    _solution(tmp_path / "kaggle" / "LOC_val_solution.csv", truth)
    _check_labels(data_root, truth)
    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    res = pretrain(_cfg(tmp_path, f"folder:{data_root}", epochs=0, registry=True), reg)
    assert res.info["data"]["test"] == len(truth) and 0 <= res.metrics["knn_acc"] <= 1
    data = json.loads(reg.runs()[0]["run_options"])["data"]  # the labels outside the folder are part of its identity
    assert data["data_val_labels"]["kind"] == "content" and data["data_val_labels"]["count"] == 1


@pytest.mark.parametrize("mapping", ["LOC_synset_mapping.txt", "meta.mat"])
def test_a_flat_val_with_the_devkits_ground_truth(tmp_path: Path, mapping: str) -> None:
    """the devkit's ILSVRC2012_validation_ground_truth.txt (1-based ILSVRC2012_IDs in file order) with the id -> wnid
    map of LOC_synset_mapping.txt or the devkit's meta.mat (whose parent synsets are not classes), in
    ILSVRC2012_devkit_t12/data beside train/ and val/"""
    data_root, truth = _imagenet(tmp_path / "imagenet")
    devkit = data_root / "ILSVRC2012_devkit_t12" / "data"
    devkit.mkdir(parents=True)
    (devkit / "ILSVRC2012_validation_ground_truth.txt").write_text(
        "".join(f"{WNIDS.index(w) + 1}\n" for w in truth))
    if mapping.endswith(".txt"):
        (devkit / mapping).write_text("".join(f"{w} class {w}, a thing\n" for w in WNIDS))
    else:
        from scipy.io import savemat

        dt = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("words", "O"), ("gloss", "O"), ("num_children", "O")]
        rows = [(i, w, f"class {w}", "", 0) for i, w in enumerate(WNIDS, start=1)] + [(4, "n00001740", "entity", "", 3)]
        synsets = np.array(rows, dtype=dt)
        savemat(str(devkit / mapping), {"synsets": synsets})
    _check_labels(data_root, truth)


def test_a_flat_val_without_its_labels_is_one_line_naming_the_files(tmp_path: Path) -> None:
    """no label file: one error naming the files it needs, and no warning per class"""
    data_root, truth = _imagenet(tmp_path / "imagenet", train=1, val=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as err:
            open_source(f"folder:{data_root}", "test", sorted(WNIDS))
    msg = str(err.value)
    assert "\n" not in msg and str(data_root / "val") in msg
    assert "LOC_val_solution.csv" in msg and "ILSVRC2012_validation_ground_truth.txt" in msg
    (data_root / "ILSVRC2012_validation_ground_truth.txt").write_text("1\n2\n3\n")
    with pytest.raises(ValueError, match="no LOC_synset_mapping.txt or .*meta.mat"):
        open_source(f"folder:{data_root}", "test", sorted(WNIDS))
    _solution(data_root / "LOC_val_solution.csv", truth)
    (data_root / "LOC_val_solution.csv").write_text("id,label\nILSVRC2012_val_00000001,n01000000\n")
    with pytest.raises(ValueError, match=r"LOC_val_solution.csv: header 'id,label' is not ImageId,PredictionString"):
        open_source(f"folder:{data_root}", "test", sorted(WNIDS))


def test_eval_of_a_streamed_run_reproduces_its_knn_and_probe_by_its_protocol(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`suite vision eval --ckpt RUN` of a run trained from folder: (its checkpoint records the data's identity) with
    --probe sgd: the run's kNN and probe figures again, the protocol recorded with both rows and named on the model
    card beside the learning rate the optimiser applied (LARS 0.3 x 6 / 256, not 0.3); --probe features changes it"""
    from suite.cli import main

    data_root, truth = _imagenet(tmp_path / "imagenet", train=3, val=2)
    _solution(data_root / "LOC_val_solution.csv", truth)
    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    res = pretrain(_cfg(tmp_path, f"folder:{data_root}", probe="sgd", probe_epochs=2, probe_lr=0.5, registry=True,
                        lr=0.3, lr_scaling="linear"), reg)
    assert {"knn_acc", "linear_acc"} <= set(res.metrics)
    ckpt = sorted((res.folder / "checkpoints").glob("step-*.pt"))[-1]
    assert "_inputs" in torch.load(ckpt, weights_only=True)["config"]  # the data's identity, which eval once refused
    env_reg = f"sqlite:///{tmp_path / 'reg.sqlite'}"
    probes: list[int] = []
    real = streamed.sgd_probe
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SUITE_REGISTRY", env_reg)
        mp.setattr(streamed, "sgd_probe", lambda *a, **k: (probes.append(k["epochs"]), real(*a, **k))[1])
        assert main(["vision", "eval", "--ckpt", str(res.folder), "--json", str(tmp_path / "m.json")]) == 0
        assert probes == [2]  # the run's probe, not the features probe
        assert capsys.readouterr().out.count("\n") == 1  # one line, as the other front-ends print
        again = json.loads((tmp_path / "m.json").read_text())
        assert again["knn_acc"] == pytest.approx(res.metrics["knn_acc"], abs=1e-6)
        assert again["linear_acc"] == pytest.approx(res.metrics["linear_acc"], abs=1e-6)
        assert again["linear_train_acc"] == pytest.approx(res.metrics["linear_train_acc"], abs=1e-6)
        assert main(["vision", "eval", "--ckpt", str(res.folder), "--probe", "features", "--no-registry"]) == 0
        assert "linear_acc" in capsys.readouterr().out and probes == [2]
    rows = {r["task"]: r for r in Registry(env_reg).runs()}
    for task in ("pretrain-simclr", "eval"):
        protocol = json.loads(rows[task]["run_options"])["eval_protocol"]
        assert protocol["knn_acc"].startswith("knn k=3 t=0.1") and protocol["linear_acc"].startswith(
            "probe=sgd epochs=2 lr=0.5"), (task, protocol)
        assert rows[task]["primary_metric"] == "linear_acc"
    card = (res.export / "README.md").read_text()  # type: ignore[operator]
    assert "| lr (peak, applied) | 0.007031 |" in card and "| lr (given) | 0.3, scaled linear" in card
    assert "| linear probe | probe=sgd epochs=2 lr=0.5" in card
    assert "| test/linear_acc |" in card and "| probe=sgd epochs=2" in card.split("| test/linear_acc |")[1]
    data, _ = prepare_stream(_cfg(tmp_path, f"folder:{data_root}"))
    assert len(data.test) == len(truth)
