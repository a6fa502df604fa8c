"""Real data (skipped when $SUITE_DATA lacks it): decode a few real CIFAR-10 JPEGs through the
image-folder loader; the whole 60,000-image cache is the slow test."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import data_or_skip


@pytest.mark.dataset
def test_cifar10_jpg_sample(tmp_path: Path) -> None:
    from vision.data import CIFAR10_CLASSES, load_image_folder

    root = data_or_skip("cifar10-jpg")
    for split in ("train", "test"):
        for cls in CIFAR10_CLASSES:
            (tmp_path / split / cls).mkdir(parents=True)
            for p in sorted((root / split / cls).iterdir())[:2]:
                shutil.copy(p, tmp_path / split / cls / p.name)
    data = load_image_folder(tmp_path, name="cifar10-sample")
    assert data.classes == CIFAR10_CLASSES
    assert data.train_x.shape == (20, 3, 32, 32) and data.train_x.dtype == torch.uint8
    assert torch.bincount(data.train_y).tolist() == [2] * 10
    assert data.train_x.float().std() > 10  # real images, not blank


@pytest.mark.dataset
@pytest.mark.slow
def test_cifar10_full() -> None:
    from vision.data import load_dataset

    data_or_skip("cifar10-jpg")
    data = load_dataset("cifar10")
    assert data.train_x.shape == (50000, 3, 32, 32) and data.test_x.shape == (10000, 3, 32, 32)
    assert torch.bincount(data.train_y).tolist() == [5000] * 10
