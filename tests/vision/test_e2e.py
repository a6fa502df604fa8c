"""End-to-end SimCLR and MoCo on the built-in digits: kNN beats a randomly initialised encoder;
checkpoints resume; the CLI runs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from vision.config import PretrainConfig
from vision.train import pretrain

# per framework: few steps on 60 digits per class; MoCo needs more steps (its key encoder lags)
SETTINGS = {
    "simclr": dict(epochs=5, batch_size=100, lr=3e-3),  # 3 epochs beat random init by +1.4..+12 points over seeds
                                                        # (a seed-dependent margin); 5 epochs: +8..+13 (seeds 0, 1)
    "moco": dict(epochs=10, batch_size=64, lr=1e-2, moco_momentum=0.9, queue_size=256),  # 5 epochs: +1.1 (seed 0);
                                                                                       # 10: +7.8
}


def _cfg(tmp_path: Path, **kw: object) -> PretrainConfig:
    base = dict(dataset="digits", encoder="convnet", width=8, epochs=3, batch_size=100, optimizer="adam", lr=3e-3,
                weight_decay=1e-6, out=str(tmp_path), registry=False, linear_probe=False, geometry_batches=1,
                queue_size=256, seed=0, train_per_class=60)
    base.update(kw)
    return PretrainConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def random_knn(tmp_path_factory: pytest.TempPathFactory) -> float:
    return pretrain(_cfg(tmp_path_factory.mktemp("rand"), epochs=0)).metrics["knn_acc"]


@pytest.mark.parametrize("framework", ["simclr", pytest.param("moco", marks=pytest.mark.slow)])
def test_pretrain_beats_random_init(tmp_path: Path, random_knn: float, framework: str) -> None:
    res = pretrain(_cfg(tmp_path, framework=framework, **SETTINGS[framework]))  # type: ignore[arg-type]
    m = res.metrics
    assert m["knn_acc"] > random_knn + 0.03, (m["knn_acc"], random_knn)
    assert {"alignment", "uniformity", "cond_entropy"} <= set(m)
    assert res.info["train"]["images_per_s"] > 0
    assert len(_ckpts(res)) == 2  # the newest two kept (keep_checkpoints)
    from vision.models import Encoder

    enc = Encoder.from_pretrained(res.export)  # the run owner's export: the trained query encoder
    assert enc.features(torch.zeros(2, 3, 32, 32)).shape[0] == 2


def _ckpts(res: dict) -> list[Path]:
    return sorted((res.folder / "checkpoints").glob("step-*.pt"))


def test_resume_continues_from_checkpoint(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path / "r", epochs=2, max_steps_per_epoch=2, batch_size=32, train_per_class=10,
               framework="moco", queue_size=64)
    with pytest.raises(KeyboardInterrupt):  # interrupted after epoch 1 (its checkpoint is written)
        pretrain(cfg, stop_after=1)
    res = pretrain(cfg)
    assert res.resumed_from == 1
    fresh = pretrain(dataclasses.replace(cfg, out=str(tmp_path / "fresh")))
    a = torch.load(_ckpts(res)[-1], weights_only=True)["model"]
    b = torch.load(_ckpts(fresh)[-1], weights_only=True)["model"]
    for k in a:  # resumed == uninterrupted, bit for bit (weights, BN statistics, MoCo queue)
        assert torch.equal(a[k], b[k]), k


def test_cli_pretrain_and_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from suite.cli import main

    rc = main(["vision", "pretrain", "--dataset", "digits", "--encoder", "convnet", "--width", "4", "--epochs", "1",
               "--batch-size", "64", "--max-steps-per-epoch", "2", "--loss", "cacr", "--views", "3", "--out",
               str(tmp_path / "cli"), "--no-linear-probe", "--geometry-batches", "1", "--bf16", "--no-registry"])
    assert rc == 0
    ckpt = next((tmp_path / "cli" / "checkpoints").glob("step-*.pt"))
    for target in (ckpt, tmp_path / "cli"):  # a checkpoint, or the run folder (its newest checkpoint)
        assert main(["vision", "eval", "--ckpt", str(target), "--no-linear", "--no-registry"]) == 0
        assert "knn_acc" in capsys.readouterr().out
    assert main(["vision", "pretrain", "--dataset", "digits", "--loss", "infonce", "--views", "3", "--epochs", "1",
                 "--out", str(tmp_path / "x")]) == 2  # two-view loss with 3 views: clear error, exit 2


@pytest.mark.slow
@pytest.mark.parametrize("framework,loss", [("simclr", "xclr"), ("moco", "macl")])
def test_ddp_torchrun_two_processes(tmp_path: Path, framework: str, loss: str) -> None:
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "suite", "vision", "pretrain",
           "--dataset", "digits", "--encoder", "convnet", "--width", "4", "--epochs", "1", "--batch-size", "32",
           "--max-steps-per-epoch", "2", "--framework", framework, "--loss", loss, "--text-model", "labels",
           "--out", str(tmp_path / "ddp"), "--no-linear-probe", "--geometry-batches", "1",
           "--queue-size", "64", "--no-registry"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert list((tmp_path / "ddp" / "checkpoints").glob("step-*.pt"))


def test_iou_weights_with_any_weighted_loss(tmp_path: Path) -> None:
    """t-SimCLR Fig. 2a on cosine SimCLR: IoU pair weights reach infonce; a loss without weights is refused."""
    import suite.losses as L
    from vision.methods.common import loss_extras

    loss = L.build("infonce")
    iou = torch.tensor([0.1, 0.9, 0.5])
    extra = loss_extras(loss, iou=iou, iou_tau=0.5)
    assert torch.allclose(extra["weights"], L.iou_weights(iou, 0.5)) and extra["weights"].mean() == pytest.approx(1.0)
    res = pretrain(_cfg(tmp_path, loss="infonce", iou_weights=True, iou_tau=0.5, epochs=1, max_steps_per_epoch=1,
                        batch_size=16, train_per_class=4))
    assert res.info["train"]["images_per_s"] > 0
    with pytest.raises(ValueError, match="pair weights"):
        pretrain(_cfg(tmp_path / "c", loss="cacr", iou_weights=True, epochs=1))


def test_grad_cache_with_chunk_equal_to_batch_is_the_uncached_run(tmp_path: Path) -> None:
    """Gradient caching on SimCLR: with the chunk equal to the batch (BatchNorm sees the same batch) the
    trained weights and BatchNorm statistics equal the uncached run's; a smaller chunk trains (BatchNorm sees
    chunks); MoCo refuses it."""
    base = dict(epochs=1, max_steps_per_epoch=2, batch_size=16, train_per_class=4, linear_probe=False,
                geometry_batches=0, checkpoint_every=1)
    plain = pretrain(_cfg(tmp_path / "a", **base))
    cached = pretrain(_cfg(tmp_path / "b", grad_cache_chunk=16, **base))
    a = torch.load(_ckpts(plain)[-1], weights_only=True)["model"]
    b = torch.load(_ckpts(cached)[-1], weights_only=True)["model"]
    for k in a:
        assert torch.allclose(a[k].float(), b[k].float(), atol=1e-5, rtol=1e-4), k
    small = pretrain(_cfg(tmp_path / "c", grad_cache_chunk=5, **base))
    assert small.info["train"]["images_per_s"] > 0
    with pytest.raises(ValueError, match="MoCo"):
        pretrain(_cfg(tmp_path / "d", framework="moco", grad_cache_chunk=8, **base))


def test_validation_split_is_held_out_and_logged_as_val(tmp_path: Path) -> None:
    """val_per_class -> that many training images per class (one fixed split, the same for every seed) leave the
    pretraining set and the kNN bank and are evaluated instead of the test split; the run logs them as split 'val'
    (never 'test'); the default leaves the config as before"""
    from suite.config import experiment_config
    from suite.registry import Registry
    from vision.train import prepare_data

    full, _, _ = prepare_data(_cfg(tmp_path))
    data, ev, info = prepare_data(_cfg(tmp_path, val_per_class=5))
    assert info["test"] == 5 * ev.num_classes and ev.test_x.shape[0] == 5 * ev.num_classes
    assert not any(bool((x == ev.test_x).flatten(1).all(1).any()) for x in data.train_x[:, None])  # disjoint
    again, ev2, _ = prepare_data(_cfg(tmp_path, val_per_class=5, seed=3))
    assert torch.equal(ev.test_x, ev2.test_x)  # the same split for another seed
    assert "val_per_class" not in experiment_config(_cfg(tmp_path))
    reg = Registry(str(tmp_path / "r.sqlite"))
    pretrain(_cfg(tmp_path, val_per_class=5, epochs=1, registry=True, geometry_batches=0), registry=reg)
    run = reg.runs()[0]
    splits = {m["split"] for m in reg.metrics(run["id"]) if m["name"] == "knn_acc"}
    assert splits == {"val"}
