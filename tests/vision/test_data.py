"""Loaders on tiny data written to tmp_path; imbalance rules; digits."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from vision.data import (class_subset_indices, imbalance_proportions, imbalanced_indices, load_cifar_pickle,
                         load_digits, load_image_folder, load_stl10_binary)


def _write_cifar10(root: Path, n: int = 4) -> np.ndarray:
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    first = None
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        first = data if first is None else first
        with open(d / name, "wb") as f:
            pickle.dump({b"data": data, b"labels": list(range(n))}, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)]}, f)
    return first


def test_cifar_pickle(tmp_path: Path) -> None:
    first = _write_cifar10(tmp_path)
    data = load_cifar_pickle(tmp_path, "cifar10")
    assert data.train_x.shape == (20, 3, 32, 32) and data.test_x.shape == (4, 3, 32, 32)
    assert data.train_x.dtype == torch.uint8 and data.classes[0] == "c0"
    # row layout: 1024 red, 1024 green, 1024 blue values, row-major 32x32
    assert int(data.train_x[0, 1, 0, 5]) == int(first[0, 1024 + 5])
    assert data.train_y.tolist()[:4] == [0, 1, 2, 3]


def test_cifar100_pickle(tmp_path: Path) -> None:
    d = tmp_path / "cifar-100-python"
    d.mkdir()
    for name, n in (("train", 6), ("test", 3)):
        with open(d / name, "wb") as f:
            pickle.dump({b"data": np.zeros((n, 3072), np.uint8), b"fine_labels": [5] * n}, f)
    data = load_cifar_pickle(tmp_path, "cifar100")
    assert data.train_x.shape[0] == 6 and set(data.train_y.tolist()) == {5}


def test_stl10_binary(tmp_path: Path) -> None:
    d = tmp_path / "stl10_binary"
    d.mkdir()
    img = np.zeros((2, 3, 96, 96), np.uint8)
    img[0, 0, 10, 20] = 200  # stored column-major: (C, W, H) -> pixel at row 20, column 10
    img.tofile(d / "train_X.bin")
    img.tofile(d / "test_X.bin")
    np.array([1, 10], np.uint8).tofile(d / "train_y.bin")
    np.array([2, 3], np.uint8).tofile(d / "test_y.bin")
    data = load_stl10_binary(tmp_path)
    assert data.train_x.shape == (2, 3, 96, 96) and int(data.train_x[0, 0, 20, 10]) == 200
    assert data.train_y.tolist() == [0, 9] and data.test_y.tolist() == [1, 2]


def test_image_folder_and_cache(tmp_path: Path) -> None:
    from PIL import Image

    root = tmp_path / "imgs"
    rng = np.random.default_rng(0)
    arrays = {}
    for split in ("train", "test"):
        for cls in ("cat", "dog"):
            (root / split / cls).mkdir(parents=True)
            for i in range(3):
                a = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
                Image.fromarray(a).save(root / split / cls / f"{i}.png")
                arrays[(split, cls, i)] = a
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(root / "train" / "dog" / "odd.png")  # skipped: other size
    with pytest.warns(UserWarning, match="skipped 1 of 7 images"):
        data = load_image_folder(root)
    assert data.classes == ["cat", "dog"] and data.train_x.shape == (6, 3, 8, 8)
    assert data.info["skipped"] == {"train": 1, "test": 0}
    assert torch.equal(data.train_x[3].permute(1, 2, 0), torch.from_numpy(arrays[("train", "dog", 0)]))
    assert data.train_y.tolist() == [0, 0, 0, 1, 1, 1]
    cache = Path(data.info["cache"])
    assert cache.exists()
    again = load_image_folder(root)  # from the cache
    assert torch.equal(again.train_x, data.train_x)
    with pytest.raises(ValueError, match="image-folder"):
        load_image_folder(tmp_path / "missing")


@pytest.mark.parametrize("rule", ["linear", "exponential"])
def test_imbalanced_counts_follow_rule(rule: str) -> None:
    labels = torch.arange(10).repeat_interleave(100)
    idx, counts = imbalanced_indices(labels, rule, seed=0)  # type: ignore[arg-type]
    props = imbalance_proportions(10, rule)  # type: ignore[arg-type]
    assert counts == [int(np.floor(p * 100)) for p in props]
    assert torch.bincount(labels[idx], minlength=10).tolist() == counts
    if rule == "linear":
        assert counts == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    else:
        assert counts[0] == 10 and counts[-1] == 100 and all(a < b for a, b in zip(counts, counts[1:]))
    idx2, _ = imbalanced_indices(labels, rule, seed=0)  # type: ignore[arg-type]
    idx3, _ = imbalanced_indices(labels, rule, seed=1)  # type: ignore[arg-type]
    assert torch.equal(idx, idx2) and not torch.equal(idx, idx3)
    with pytest.raises(ValueError, match="imbalance rule"):
        imbalance_proportions(10, "cubic")  # type: ignore[arg-type]


def test_balanced_subset_and_digits() -> None:
    data = load_digits()
    assert data.train_x.shape[1:] == (3, 8, 8) and data.train_x.dtype == torch.uint8
    assert data.train_x.shape[0] + data.test_x.shape[0] == 1797 and data.num_classes == 10
    idx = class_subset_indices(data.train_y, 5)
    assert torch.bincount(data.train_y[idx]).tolist() == [5] * 10
