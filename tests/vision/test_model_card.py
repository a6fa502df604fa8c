"""The model card written beside image-pretraining checkpoints."""
from __future__ import annotations

from pathlib import Path

from suite.registry import Registry
from vision.train import pretrain

from .test_e2e import _cfg


def test_pretrain_writes_card_beside_checkpoints(tmp_path: Path) -> None:
    """SimCLR on digits, 1 epoch with the registry -> ckpt_dir/README.md: loss, hparams, images, steps, seed, run id,
    the registry's kNN metric, and how to load the last checkpoint."""
    reg = Registry(str(tmp_path / "r.sqlite"))
    res = pretrain(_cfg(tmp_path, epochs=1, loss="macl", ckpt_every=1, seed=4), registry=reg)
    card = (Path(res["ckpt_dir"]) / "README.md").read_text()
    assert "simclr convnet on digits with the macl loss" in card and '"tau0"' in card
    assert f"| training examples | {res['data']['train']} |" in card and "| seed | 4 |" in card
    assert f"| {res['run_id']} |" in card and "test/knn_acc" in card and "epoch0001.pt" in card


def test_no_checkpoint_no_card(tmp_path: Path) -> None:
    """Pretraining with checkpoints off -> no card (nothing saved to describe)."""
    res = pretrain(_cfg(tmp_path, epochs=1, ckpt_every=0))
    assert not (Path(res["ckpt_dir"]) / "README.md").exists()
