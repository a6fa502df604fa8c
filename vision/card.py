"""The model card of an image pretraining run's export."""
from __future__ import annotations

from typing import Any

from suite.model_card import card_info


def vision_card(cfg: Any, loss: Any, n_train: int, steps: int, run: Any = None) -> dict[str, Any]:
    """The card of a ``PretrainConfig`` run's export (``<run folder>/export/README.md``, written by the run owner)."""
    return card_info(
        title=f"{cfg.framework} {cfg.encoder} on {cfg.dataset} with the {loss.name} loss",
        what=(f"{cfg.encoder} encoder (+ projection {cfg.proj_dim}) pretrained by contrastive-suite's {cfg.framework} "
              f"front-end, {cfg.views} views per image."),
        modality="vision", loss=loss.name, loss_hparams=loss.hparams(), data=cfg.dataset, n_train=n_train, steps=steps,
        seed=cfg.seed, run=run,
        extra={"epochs": cfg.epochs, "batch_size": cfg.batch_size, "optimizer": cfg.optimizer, "lr": cfg.lr},
        load=("from vision.models import Encoder\n"
              "encoder = Encoder.from_pretrained('<run folder>/export')\n"
              "h = encoder.features(x)  # (B, 3, H, W) -> (B, d); encoder(x): the projection\n"
              "# suite vision eval --ckpt <run folder>   (kNN / linear probe of its newest checkpoint)"))
