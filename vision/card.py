"""The model card of an image pretraining run's export."""
from __future__ import annotations

from typing import Any

from suite.model_card import card_info


def vision_card(cfg: Any, loss: Any, n_train: int, steps: int, run: Any = None, *, lr: float | None = None,
                protocol: dict[str, str] | None = None) -> dict[str, Any]:
    """The card of a ``PretrainConfig`` run's export (``<run folder>/export/README.md``, written by the run owner):
    ``lr`` the peak learning rate the optimiser applied (``cfg.lr`` scaled by the global batch, or the optimiser's
    rule: :func:`vision.train.base_lr`), ``protocol`` what produced each evaluation metric
    (:func:`vision.train.eval_protocol`), shown beside the metric and as the card's probe line."""
    protocol = dict(protocol or {})
    extra: dict[str, Any] = {"epochs": cfg.epochs, "batch_size": cfg.batch_size, "optimizer": cfg.optimizer,
                             "lr (peak, applied)": cfg.lr if lr is None else lr}
    if cfg.lr and getattr(cfg, "lr_scaling", "none") != "none":
        extra["lr (given)"] = f"{cfg.lr:g}, scaled {cfg.lr_scaling} by the global batch"
    if protocol:
        extra["kNN"] = protocol.get("knn_acc", "—")
        extra["linear probe"] = protocol.get("linear_acc", "none (kNN only)")
        extra["evaluation data"] = protocol.get("data", "—")
    return card_info(
        title=f"{cfg.framework} {cfg.encoder} on {cfg.dataset} with the {loss.name} loss",
        what=(f"{cfg.encoder} encoder (+ projection {cfg.proj_dim}) pretrained by contrastive-suite's {cfg.framework} "
              f"front-end, {cfg.views} views per image."),
        modality="vision", loss=loss.name, loss_hparams=loss.hparams(), data=cfg.dataset, n_train=n_train, steps=steps,
        seed=cfg.seed, run=run, extra=extra, protocol={k: v for k, v in protocol.items() if k != "data"},
        load=("from vision.models import Encoder\n"
              "encoder = Encoder.from_pretrained('<run folder>/export')\n"
              "h = encoder.features(x)  # (B, 3, H, W) -> (B, d); encoder(x): the projection\n"
              "# suite vision eval --ckpt <run folder>   (kNN / linear probe of its newest checkpoint, by its protocol)"))
