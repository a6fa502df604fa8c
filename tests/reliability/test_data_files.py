"""Data folders and files a user hands over half there or malformed: image data sets cut short or with labels that
do not match, triplet CSVs with a header only, an empty cell, one column or more than three, or bytes that are not
UTF-8, a data root that is missing. Each gives a ValueError naming the file (and line or counts); nothing trains on
it."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest


def _stl(root: Path, n_train: int = 2, n_labels: int | None = None, cut: int = 0) -> Path:
    d = root / "stl10_binary"
    d.mkdir(parents=True)
    img = np.zeros((n_train, 3, 96, 96), np.uint8).tobytes()
    (d / "train_X.bin").write_bytes(img[: len(img) - cut])
    (d / "test_X.bin").write_bytes(np.zeros((2, 3, 96, 96), np.uint8).tobytes())
    np.ones(n_train if n_labels is None else n_labels, np.uint8).tofile(d / "train_y.bin")
    np.ones(2, np.uint8).tofile(d / "test_y.bin")
    return d


def test_stl10_images_file_cut_mid_image(tmp_path):
    """STL-10 train_X.bin cut 100 bytes short (a download that stopped) -> ValueError naming the file and its size
    (was numpy's 'cannot reshape array')"""
    from vision.data import load_stl10_binary

    d = _stl(tmp_path, cut=100)
    with pytest.raises(ValueError, match=r"train_X.bin.*55196 bytes.*27648"):
        load_stl10_binary(tmp_path)
    assert d.exists()


def test_stl10_labels_that_do_not_match_the_images(tmp_path):
    """STL-10 with 3 training images but 2 labels in train_y.bin -> ValueError naming both files and both counts"""
    from vision.data import load_stl10_binary

    _stl(tmp_path, n_train=3, n_labels=2)
    with pytest.raises(ValueError, match=r"train_X.bin.*3 images.*train_y.bin.*2 labels"):
        load_stl10_binary(tmp_path)


def _cifar(root: Path, change: dict, n: int = 4) -> Path:
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": np.zeros((n, 3072), np.uint8), b"labels": list(range(n))}
        if name == "data_batch_3":
            batch.update(change)
            batch = {k: v for k, v in batch.items() if v is not None}
        with open(d / name, "wb") as f:
            pickle.dump(batch, f)
    return d


@pytest.mark.parametrize("change,match", [
    ({b"labels": None}, r"data_batch_3.*no 'labels'"),
    ({b"data": np.zeros(4 * 3072 - 10, np.uint8)}, r"data_batch_3.*12278 values.*3072"),
    ({b"labels": [0, 1, 2]}, r"data_batch_3.*4 images.*3 labels"),
])
def test_cifar_batch_half_there(tmp_path, change, match):
    """a CIFAR-10 data_batch_3 without labels, with its data cut mid-image, or with fewer labels than images ->
    ValueError naming data_batch_3 (was a KeyError, a reshape error, or a count error without the file)"""
    from vision.data import load_cifar_pickle

    _cifar(tmp_path, change)
    with pytest.raises(ValueError, match=match):
        load_cifar_pickle(tmp_path, "cifar10")


@pytest.mark.parametrize("text,match", [
    ("sent0,sent1,hard_neg\n", r"no triplets"),
    ("sent0,sent1,hard_neg\na man,a person,a cat\na dog,,a cat\n", r"line 3.*empty"),
    ("sent0\na man\na dog\n", r"line 2.*1 column"),
    ("", r"no rows|no triplets"),
])
def test_triplet_csv_empty_cell_or_one_column(tmp_path, text, match):
    """a triplet CSV holding only its header, a row with an empty sentence, or one column -> ValueError naming the file
    and the line (a header-only file gave 0 triplets; an empty cell trained on an empty sentence)"""
    from text.data import read_triplets_csv

    f = tmp_path / "trip.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=match) as exc:
        read_triplets_csv(f)
    assert str(f) in str(exc.value)


def test_triplet_csv_that_is_not_utf8(tmp_path):
    """a triplet CSV saved as latin-1 (`café` as byte 0xe9 on line 3) -> ValueError naming the file, the line and the
    byte; nothing is read from it (no sentence with a replacement character)"""
    from text.data import read_triplets_csv

    f = tmp_path / "trip.csv"
    f.write_bytes(b"sent0,sent1,hard_neg\na man,a person,a cat\na caf\xe9,a shop,a dog\n")
    with pytest.raises(ValueError, match=r"byte 0xe9 at line 3") as exc:
        read_triplets_csv(f)
    assert str(f) in str(exc.value)


@pytest.mark.parametrize("text,line,n", [
    ("sent0,sent1,hard_neg\na man,a person,a cat\na man, tall,a person,a cat\n", 3, 4),
    ("a man,a person,a cat,a dog,a bird\n", 1, 5),
    ("sent0,sent1,hard_neg,label\na man,a person,a cat,0\n", 2, 4),
])
def test_triplet_csv_row_with_more_than_three_columns(tmp_path, text, line, n):
    """a triplet CSV row with 4 or 5 cells (an unquoted comma inside a sentence, an extra column) -> ValueError naming
    the file, the line and the count of columns (the extra cells were dropped silently: 'a man, tall,a person,a cat'
    trained on ('a man', 'tall', 'a person'))"""
    from text.data import read_triplets_csv

    f = tmp_path / "trip.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=rf"line {line}: {n} columns.*3") as exc:
        read_triplets_csv(f)
    assert str(f) in str(exc.value)


def test_sentences_file_of_blank_lines(tmp_path):
    """a sentences file holding only blank and whitespace lines -> ValueError 'no sentences' naming the file"""
    from text.data import read_sentences

    f = tmp_path / "s.txt"
    f.write_text("\n   \n\t\n")
    with pytest.raises(ValueError, match=rf"no sentences in {f}"):
        read_sentences(f)


def test_data_root_that_does_not_exist(tmp_path, monkeypatch):
    """SUITE_DATA pointing at a folder that does not exist (a typo) -> a loader's error names SUITE_DATA and says the
    folder does not exist, instead of only 'data set not found'"""
    pytest.importorskip("torch_geometric")
    from graph.tu.data import load_tu

    missing = tmp_path / "datsets"
    monkeypatch.setenv("SUITE_DATA", str(missing))
    with pytest.raises(ValueError, match=rf"SUITE_DATA={missing} does not exist"):
        load_tu("MUTAG")


def test_disk_full_while_a_cache_is_written(tmp_path):
    """the disk fills while an array cache (image / molecule / embedding caches: save_arrays) is rewritten -> OSError;
    the previous cache still loads with the same arrays, no temporary file left"""
    import torch

    from suite.safeio import load_arrays, save_arrays
    from tests.reliability.limits import file_size_limit

    path = tmp_path / "cache.npz"
    save_arrays(path, {"x": torch.arange(10)}, {"v": 1})
    with file_size_limit(4096), pytest.raises(OSError):
        save_arrays(path, {"x": torch.zeros(100_000)}, {"v": 2})
    arrays, meta = load_arrays(path)
    assert meta == {"v": 1} and torch.equal(arrays["x"], torch.arange(10))
    assert [p.name for p in tmp_path.iterdir()] == ["cache.npz"]
