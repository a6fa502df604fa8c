"""The export of an image-pretraining run (the run owner's layout): the encoder, its config and its model card."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from suite.registry import Registry
from vision.models import Encoder
from vision.train import evaluate_checkpoint, pretrain

from .test_e2e import _cfg


def test_pretrain_exports_encoder_with_card(tmp_path: Path) -> None:
    """SimCLR on digits, 1 epoch with the registry -> <folder>/export: README.md (loss, hparams, images, steps, seed,
    run id, the registry's kNN metric, how to load it), run.json, and the weights Encoder.from_pretrained reads."""
    reg = Registry(str(tmp_path / "r.sqlite"))
    res = pretrain(_cfg(tmp_path / "run", epochs=1, loss="macl", seed=4, registry=True), registry=reg)
    export = res.export
    assert export is not None
    card = (export / "README.md").read_text()
    assert "simclr convnet on digits with the macl loss" in card and '"tau0"' in card
    assert f"| training examples | {res.info['data']['train']} |" in card and "| seed | 4 |" in card
    assert f"| {res.run_id} |" in card and "test/knn_acc" in card and "Encoder.from_pretrained" in card
    assert (export / "run.json").is_file() and isinstance(Encoder.from_pretrained(export), Encoder)
    assert reg.runs()[0]["primary_metric"] == "knn_acc"  # the headline: kNN without the linear probe


def test_export_and_checkpoint_hold_the_trained_encoder(tmp_path: Path) -> None:
    """The exported weights are the final checkpoint's query encoder, and evaluating that checkpoint (by its run
    folder) reproduces the run's kNN accuracy."""
    res = pretrain(_cfg(tmp_path / "run", epochs=1, max_steps_per_epoch=2, geometry_batches=0))
    enc = Encoder.from_pretrained(res.export)
    ckpt = sorted((res.folder / "checkpoints").glob("step-*.pt"))[-1]
    model = torch.load(ckpt, weights_only=True)["model"]
    for k, v in enc.state_dict().items():
        assert torch.equal(model[f"encoder.{k}"], v), k
    m = evaluate_checkpoint(res.folder, {}, linear=False)
    assert m["knn_acc"] == pytest.approx(res.metrics["knn_acc"])
