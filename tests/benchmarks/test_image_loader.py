"""The image-loader benchmark (issue 65) at a tiny size: both loaders deliver the same batch shapes, the rows land in
the registry with the one ratio, the GPU figure says it is to be measured where there is no GPU."""
from __future__ import annotations

import pytest
import torch

from benchmarks.measurements import image_loader as il
from suite.registry import Registry


@pytest.fixture()
def small(monkeypatch, tmp_path):
    monkeypatch.setenv("SUITE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_plain_loop_is_imagefolder_with_two_random_resized_crops(small):
    root = il.generated_folder(12, 4, classes=3)
    ds = il.PlainFolder(root, 32)
    x, y = ds[5]
    assert len(ds) == 12 and x.shape == (2, 3, 32, 32) and x.dtype == torch.uint8 and 0 <= y < 3
    assert il.generated_folder(12, 4, classes=3) == root  # generated once, reused


def test_loader_rows_land_in_the_registry(small, capsys):
    db = small / "r.sqlite"
    assert il.main(["--loader", "--images", "40", "--size", "32", "--batch", "8", "--workers", "0", "--rounds", "2",
                    "--batches", "2", "--gpu", "--registry", str(db)]) == 0
    out = capsys.readouterr().out
    assert "loader: suite" in out and "to be measured on a GPU" in out
    (run,) = Registry(str(db)).runs(task=il.TASK)
    m = {x["name"]: x["value"] for x in Registry(str(db)).metrics(run["id"])}
    assert m["suite_images_per_s"] > 0 and m["plain_images_per_s"] > 0
    assert m["ratio_min"] <= m["ratio_max"] and m["ratio"] > 0


def test_memory_slope_is_a_least_squares_fit_over_three_sizes_or_more():
    """the figure is the slope in kB a bank image (peaks in MB, 1,000 bytes a kB), exact on a line; two sizes refused"""
    m = il.memory_slope({1000: 200.0, 2000: 200.0 + 6e6 / 2**20, 4000: 200.0 + 18e6 / 2**20})
    assert m["peak_rss_kb_per_image"] == pytest.approx(6.0) and m["fit_r2"] == pytest.approx(1.0)
    assert m["peak_rss_mb_at_0"] == pytest.approx(200.0 - 6e6 / 2**20)
    with pytest.raises(ValueError, match="at least three sizes"):
        il.memory_slope({1000: 1.0, 2000: 2.0})


@pytest.mark.slow
def test_memory_rows(small):
    db = small / "r.sqlite"
    assert il.main(["--memory", "--memory-sizes", "60,120,240", "--registry", str(db)]) == 0
    (run,) = Registry(str(db)).runs(task=il.TASK)
    m = {x["name"]: x["value"] for x in Registry(str(db)).metrics(run["id"])}
    assert m["peak_rss_mb_60"] > 100 and "peak_rss_kb_per_image" in m and "fit_r2" in m


def test_the_loader_jpegs_have_imagenets_size_and_weight():
    """500 x 375 (one in four portrait), about 110 kB each at quality 90, photo-like (not a flat image's few kB)"""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    blobs = [il.imagenet_jpeg(rng) for _ in range(8)]
    kb = np.array([len(b) for b in blobs]) / 1000
    assert 100 <= kb.mean() <= 120 and kb.min() > 90, kb
    im = Image.open(io.BytesIO(blobs[0]))
    assert im.size == il.IMAGENET_SIZE and im.mode == "RGB" and im.format == "JPEG"
    assert Image.open(io.BytesIO(il.imagenet_jpeg(rng, il.IMAGENET_SIZE[::-1]))).size == (375, 500)


def test_worker_counts_take_a_list_and_all():
    import os

    cpus = len(os.sched_getaffinity(0))
    assert il.worker_counts("1,2,all") == list(dict.fromkeys([1, 2, cpus]))
    assert il.worker_counts("0") == [0]
    with pytest.raises(ValueError):
        il.worker_counts("-1")
