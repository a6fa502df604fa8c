"""Bad input files give one clear line naming the path (binary or latin-1 text, truncated images
and checkpoints); corrupt caches are rebuilt with a warning naming the cache file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from suite.cli import main as suite_main
from tests.reliability.images import image_folder

LATIN1 = "a man is playing\nle caf\u00e9 est ferm\u00e9\n".encode("latin-1")
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_sentences_latin1_file(tmp_path: Path) -> None:
    """a latin-1 sentences file to read_sentences -> ValueError naming the file, line 2 and the byte"""
    from text.data import read_sentences

    p = tmp_path / "wiki.txt"
    p.write_bytes(LATIN1)
    with pytest.raises(ValueError, match=r"wiki\.txt is not utf-8 text: byte 0xe9 at line 2"):
        read_sentences(p)


def test_sentences_binary_file(tmp_path: Path) -> None:
    """a binary file (PNG bytes) as sentences or triplet CSV -> ValueError 'is a binary file' naming it"""
    from text.data import read_sentences, read_triplets_csv

    p = tmp_path / "image.png"
    p.write_bytes(BINARY)
    with pytest.raises(ValueError, match=r"image\.png is a binary file"):
        read_sentences(p)
    with pytest.raises(ValueError, match=r"image\.png is a binary file"):
        read_triplets_csv(p)


def test_text_train_cli_bad_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite text train --data latin1.txt` and `--data missing.txt` -> exit 2, one line naming the path"""
    p = tmp_path / "latin1.txt"
    p.write_bytes(LATIN1)
    assert suite_main(["text", "train", "--data", str(p), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, str(p), "not utf-8")
    assert suite_main(["text", "train", "--data", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "missing.txt", "not found")


def test_moleculenet_latin1_and_binary(tmp_path: Path) -> None:
    """a latin-1 bbbp.csv and a binary one -> ValueError naming the file (and the line for latin-1)"""
    from graph.mol.data import load_moleculenet

    (tmp_path / "bbbp.csv").write_bytes("num,name,p_np,smiles\n1,caf\u00e9,1,CCO\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"bbbp\.csv is not utf-8 text: byte 0xe9 at line 2"):
        load_moleculenet("bbbp", root=tmp_path, use_cache=False)
    (tmp_path / "bbbp.csv").write_bytes(BINARY)
    with pytest.raises(ValueError, match=r"bbbp\.csv is a binary file"):
        load_moleculenet("bbbp", root=tmp_path, use_cache=False)


def test_finetune_cli_latin1_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite graph finetune-mol` on a latin-1 MoleculeNet CSV -> exit 2, one line naming the file"""
    (tmp_path / "bbbp.csv").write_bytes("num,name,p_np,smiles\n1,caf\u00e9,1,CCO\n".encode("latin-1"))
    rc = suite_main(["graph", "finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path), "--init", "none",
                     "--seed", "0", "--epochs", "1", "--no-registry"])
    assert rc == 2
    _one_line_error(capsys, "bbbp.csv", "not utf-8")


def test_smiles_file_binary_and_malformed_csv(tmp_path: Path) -> None:
    """a binary SMILES file and a CSV with a ragged row -> ValueError naming the file"""
    from graph.mol.data import read_smiles

    p = tmp_path / "corpus.smi"
    p.write_bytes(BINARY)
    with pytest.raises(ValueError, match=r"corpus\.smi is a binary file"):
        read_smiles(p)
    q = tmp_path / "corpus.csv"
    q.write_text("id,smiles\n1,CCO\n2,CCN,extra,fields\n")
    with pytest.raises(ValueError, match=r"corpus\.csv: not a readable CSV"):
        read_smiles(q)


def _image_folder(root: Path) -> Path:
    return image_folder(root, size=16, per_class=2, ext="jpg")


def test_truncated_jpeg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """an image folder holding a JPEG cut in half -> ValueError naming the file; `suite vision pretrain` exits 2 with one line"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs")
    bad = root / "train" / "b" / "1.jpg"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"image .*1\.jpg cannot be decoded"):
        load_image_folder(root, cache=False)
    assert suite_main(["vision", "pretrain", "--dataset", f"mem:{root}", "--epochs", "1", "--no-registry",
                       "--out", str(tmp_path / "run")]) == 2
    _one_line_error(capsys, str(bad), "cannot be decoded")


def test_not_an_image(tmp_path: Path) -> None:
    """a text file named .png in an image folder -> ValueError naming it"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs")
    (root / "test" / "a" / "9.png").write_text("not an image")
    with pytest.raises(ValueError, match=r"9\.png cannot be decoded"):
        load_image_folder(root, cache=False)


def test_truncated_image_cache_rebuilt(tmp_path: Path) -> None:
    """image-folder cache cut in half -> warning naming the cache file, images decoded again (same tensors)"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs")
    first = load_image_folder(root)
    cache = Path(first.info["cache"])
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])
    with pytest.warns(UserWarning, match=rf"{cache.name}.*rebuilding"):
        again = load_image_folder(root)
    assert torch.equal(again.train_x, first.train_x) and torch.equal(again.test_y, first.test_y)


def test_garbage_molecule_cache_rebuilt(tmp_path: Path) -> None:
    """molecule cache overwritten with random bytes -> warning naming it, rebuilt from the SMILES"""
    from graph.mol.data import _cache_path, load_smiles_file

    src = tmp_path / "m.smi"
    src.write_text("CCO\nCCN\nc1ccccc1\n")
    first = load_smiles_file(src)
    cp = _cache_path(src, "hu", "limit=None|seed=0|col=None")
    cp.write_bytes(np.random.default_rng(0).bytes(300))
    with pytest.warns(UserWarning, match=rf"{cp.name}.*rebuilding"):
        again = load_smiles_file(src)
    assert again.smiles == first.smiles and torch.equal(again.edge_index, first.edge_index)


def test_truncated_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite vision eval --ckpt` on a checkpoint cut in half, on a folder without checkpoints (a run folder is read
    for its newest), on a missing file -> exit 2, one line naming it"""
    from suite.train import save_checkpoint

    p = save_checkpoint(tmp_path / "c.pt", {"method": {"w": torch.zeros(100)}, "config": {}})
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    assert suite_main(["vision", "eval", "--ckpt", str(p), "--no-registry"]) == 2
    _one_line_error(capsys, str(p), "corrupt or unreadable")
    assert suite_main(["vision", "eval", "--ckpt", str(tmp_path), "--no-registry"]) == 2
    _one_line_error(capsys, str(tmp_path), "no checkpoint in")
    assert suite_main(["vision", "eval", "--ckpt", str(tmp_path / "none.pt"), "--no-registry"]) == 2
    _one_line_error(capsys, "none.pt", "not found")


def test_config_with_a_list_of_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """a TU config file from before one-seed-per-run (`seeds: [0, 1]`) -> exit 2, one line naming the key and the rule"""
    cfg = tmp_path / "tu.yaml"
    cfg.write_text("dataset: MUTAG\nseeds: [0, 1]\n")
    assert suite_main(["graph", "tu", "--config", str(cfg)]) == 2
    _one_line_error(capsys, "'seeds'", "one `seed`")
