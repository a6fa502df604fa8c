"""What a pretraining run is built from (:func:`vision.train.pretrain`, and a checkpoint's re-evaluation): the data
(:func:`prepare_data`: the pretraining split, the evaluation bank and test split), the augmentation recipe
(:func:`recipe_for`), the method (:func:`build_method`: SimCLR or MoCo-v2 around an encoder and a loss), the optimiser
(:func:`build_optimizer`, its rate :func:`base_lr`) and the schedule (:func:`lr_at`)."""
from __future__ import annotations

import inspect
import math
from typing import Any

import torch
from torch import nn

from suite import distributed as sd
from suite.presets import make_loss
from suite.train import optimizer_options
from suite.train.lars import LARS, scaled_lr
from vision.config import PretrainConfig
from vision.data import ImageData, class_subset_indices, imbalanced_indices, load_dataset
from vision.streamed import VAL_SPLIT_SEED, StreamedData
from vision.methods import MoCo, SimCLR, check_views_for_loss
from vision.models import build_encoder
from vision.transforms import Recipe, get_recipe


def recipe_for(cfg: PretrainConfig, data: ImageData | StreamedData) -> Recipe:
    name = cfg.recipe
    if name == "auto" and isinstance(data, StreamedData):
        name = "imagenet"  # streamed folders and shards: images of any size, ImageNet's recipe
    elif name == "auto":
        name = {"digits": "digits", "stl10": "stl10"}.get(data.name, "cifar" if data.image_shape[-1] <= 32 else "imagenet")
    return get_recipe(name, cfg.image_size)


def prepare_data(cfg: PretrainConfig) -> tuple[ImageData, ImageData, dict[str, Any]]:
    """Load the data set; returns the pretraining data (imbalance rule / balanced subset applied),
    the evaluation data (the balanced standard training split as kNN bank / probe training set,
    optionally subsampled per class, and the test split) and log info."""
    data = load_dataset(cfg.dataset, cfg.data_root or None)
    skipped = data.info.get("skipped") or {}  # image folders: images of another size, not stacked
    if cfg.val_per_class > 0:  # validation: held-out training images take the test split's place, never the test set
        val = class_subset_indices(data.train_y, cfg.val_per_class, seed=VAL_SPLIT_SEED)
        keep = torch.ones(data.train_y.shape[0], dtype=torch.bool)
        keep[val] = False
        data = ImageData(data.name, data.train_x[keep], data.train_y[keep], data.train_x[val], data.train_y[val],
                         data.classes, {**data.info, "validation": int(val.numel())})
    eval_data = data
    if cfg.eval_train_per_class > 0:
        eval_data = eval_data.subset_train(class_subset_indices(data.train_y, cfg.eval_train_per_class, seed=cfg.seed))
    if cfg.eval_test_per_class > 0:
        ti = class_subset_indices(data.test_y, cfg.eval_test_per_class, seed=cfg.seed)
        eval_data = ImageData(data.name, eval_data.train_x, eval_data.train_y, data.test_x[ti], data.test_y[ti],
                              data.classes, data.info)
    info: dict[str, Any] = {"train_full": int(data.train_x.shape[0]), "test": int(eval_data.test_x.shape[0]),
                            "eval_bank": int(eval_data.train_x.shape[0]),
                            "skipped_train_images": int(skipped.get("train", 0)),
                            "skipped_test_images": int(skipped.get("test", 0))}
    if cfg.train_per_class > 0:
        idx = class_subset_indices(data.train_y, cfg.train_per_class, seed=cfg.seed)
        data = data.subset_train(idx, train_per_class=cfg.train_per_class)
    if cfg.imbalance != "none":
        idx, counts = imbalanced_indices(data.train_y, cfg.imbalance, seed=cfg.seed, min_ratio=cfg.imbalance_min_ratio,
                                         num_classes=data.num_classes)
        data = data.subset_train(idx, imbalance=cfg.imbalance, class_counts=counts)
        info["class_counts"] = counts
    info["train"] = int(data.train_x.shape[0])
    return data, eval_data, info


def build_method(cfg: PretrainConfig, data: ImageData | StreamedData, recipe: Recipe) -> nn.Module:
    context = {"dataset": cfg.dataset, "views": cfg.views} if cfg.dataset else {}
    loss = make_loss(cfg.framework, cfg.loss, cfg.loss_hparams, provides=("labels", "similarity"), **context).loss
    check_views_for_loss(loss, cfg.views)
    if cfg.grad_cache_chunk and cfg.framework != "simclr":
        raise ValueError("grad_cache_chunk applies to SimCLR (in-batch negatives); MoCo's queue already decouples "
                         "the negatives from the batch")
    if cfg.grad_cache_chunk < 0:
        raise ValueError(f"grad_cache_chunk must be >= 0, got {cfg.grad_cache_chunk}")
    if cfg.iou_weights and "weights" not in inspect.signature(loss.forward).parameters:
        raise ValueError(f"iou_weights needs a loss that takes pair weights (infonce, dcl, macl, hard_negative, "
                         f"tsimclr), not {loss.name!r}")
    graph, caption_record = None, None
    if "similarity" in loss.requires and getattr(data, "captions", False):  # each image's own caption (X-CLR CC3M)
        if cfg.framework != "simclr":
            raise ValueError("X-CLR's graph from captions runs with --framework simclr (MoCo's queue keeps classes)")
        if cfg.text_model in ("labels",) or cfg.text_model.startswith("random"):
            raise ValueError(f"--text-model {cfg.text_model} makes a class graph; image-caption shards take a "
                             "sentence-transformers model for their captions")
    elif "similarity" in loss.requires:  # captions of the class names (WordNet ids named; --class-names)
        from vision.graph import named_class_graph

        graph, caption_record = named_class_graph(list(data.classes), cfg.text_model, cfg.caption_template,
                                                  cfg.class_names)
    head = cfg.proj_head if cfg.proj_head != "auto" else ("mocov2" if cfg.framework == "moco" else "simclr")
    enc = build_encoder(cfg.encoder, cfg.width, recipe.size, cfg.proj_dim, cfg.proj_hidden, cfg.stem, head)
    method: nn.Module
    if cfg.framework == "simclr":
        method = SimCLR(enc, loss, graph, cfg.iou_tau)
    elif cfg.framework == "moco":
        method = MoCo(enc, loss, cfg.queue_size, cfg.moco_momentum, graph, cfg.bn_splits, cfg.iou_tau,
                      shuffle_ranks=cfg.cross_rank_bn)
    else:
        raise ValueError(f"framework must be 'simclr' or 'moco', got {cfg.framework!r}")
    method.caption_names = caption_record  # X-CLR's class captions (source, sha256): recorded by the run (run_info)
    return method


def base_lr(cfg: PretrainConfig) -> float:
    """The peak learning rate: ``lr`` scaled by the global batch under ``lr_scaling``, or without ``lr`` the
    optimiser's rule (sgd 0.06 x B / 256; adam 1e-3; lars 0.3 x B / 256, or 0.075 x sqrt(B) with ``sqrt``, SimCLR's
    and MACL's App. B.1)."""
    batch = cfg.batch_size * sd.world_size()
    if cfg.lr:
        return scaled_lr(cfg.lr, batch, cfg.lr_scaling)
    if cfg.optimizer == "lars":
        return scaled_lr(0.075, batch, "sqrt") if cfg.lr_scaling == "sqrt" else scaled_lr(0.3, batch, "linear")
    if cfg.lr_scaling != "none":
        raise ValueError(f"--lr-scaling {cfg.lr_scaling} scales a base learning rate: give --lr")
    return 0.06 * batch / 256 if cfg.optimizer == "sgd" else 1e-3


def build_optimizer(cfg: PretrainConfig, params: list[nn.Parameter],
                    device: torch.device = torch.device("cpu")) -> tuple[torch.optim.Optimizer, float]:
    """The optimiser and its base learning rate (:func:`base_lr`); SGD and Adam fused on CUDA
    (:func:`suite.train.optimizer_options`); LARS (:class:`suite.train.lars.LARS`) with BatchNorm and biases
    excluded from adaptation and weight decay."""
    fast = optimizer_options(device)
    lr = base_lr(cfg)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, **fast), lr
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay, **fast), lr
    if cfg.optimizer == "lars":
        return LARS(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, eta=cfg.lars_eta), lr
    raise ValueError(f"optimizer must be 'sgd', 'adam' or 'lars', got {cfg.optimizer!r}")


def lr_at(step: int, total: int, warmup: int, base: float) -> float:
    """Linear warm-up then cosine decay to 0 (steps)."""
    if step < warmup:
        return base * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * t))
