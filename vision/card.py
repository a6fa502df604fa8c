"""The model card of an image pretraining run, written beside its checkpoints."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.model_card import card_info, write_card


def write_vision_card(ckpt_dir: str | Path, cfg: Any, loss: Any, n_train: int, steps: int, run: Any = None) -> Path | None:
    """``ckpt_dir/README.md`` for a ``PretrainConfig`` run (nothing if no checkpoint was saved)."""
    d = Path(ckpt_dir)
    ckpts = sorted(d.glob("epoch*.pt"))
    if not ckpts:
        return None
    info = card_info(
        title=f"{cfg.framework} {cfg.encoder} on {cfg.dataset} with the {loss.name} loss",
        what=(f"{cfg.encoder} encoder (+ projection {cfg.proj_dim}) pretrained by contrastive-suite's {cfg.framework} "
              f"front-end, {cfg.views} views per image; checkpoints {', '.join(p.name for p in ckpts)}."),
        modality="vision", loss=loss.name, loss_hparams=loss.hparams(), data=cfg.dataset, n_train=n_train, steps=steps,
        seed=cfg.seed, run=run,
        extra={"epochs": cfg.epochs, "batch_size": cfg.batch_size, "optimizer": cfg.optimizer, "lr": cfg.lr},
        load=(f"# suite vision eval --ckpt {ckpts[-1]}\n"
              "from suite.config import load_config\nfrom suite.train import load_checkpoint\n"
              "from vision.config import PretrainConfig\nfrom vision.train import build_method, prepare_data, recipe_for\n"
              f"state = load_checkpoint({str(ckpts[-1])!r})\n"
              "cfg = load_config(PretrainConfig, None, state['config'])\n"
              "_, data, _ = prepare_data(cfg)\n"
              "method = build_method(cfg, data, recipe_for(cfg, data)); method.load_state_dict(state['method'])\n"
              "encoder = method.query_encoder  # (B, 3, H, W) -> (B, d)"))
    return write_card(d, info)
