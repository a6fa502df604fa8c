"""``pretrain(cfg)``: SimCLR / MoCo-v2 pretraining with any loss, evaluation, registry, checkpoints.

Data stay uint8 tensors; each step takes a slice of a seeded per-epoch permutation (sharded over
ranks under torch.distributed, as a DistributedSampler would), augments it on the device with
kornia, and runs the framework. Checkpoints (model, optimiser, queue, RNG states, epoch) are written
atomically after every ``ckpt_every`` epochs to ``<out_dir>/<run name>/epoch<N>.pt``; with
``resume`` a run continues from the newest one.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn

from suite import distributed as sd
from suite.eval.points import log_points
from suite.config import experiment_config, experiment_hash, hash_config, run_option_values, run_options
from suite.registry import Registry
from suite.train import CachedStep, Engine, epoch_batches, latest_checkpoint, resolve_device, resumable, seed_everything
from vision.card import write_vision_card
from vision.config import PretrainConfig
from vision.data import ImageData, class_subset_indices, imbalanced_indices, load_dataset
from vision.eval import ClassificationEvaluator, GeometryEvaluator
from vision.methods import MoCo, SimCLR, build_loss, check_views_for_loss
from vision.models import Encoder, build_encoder
from vision.transforms import EvalTransform, Recipe, ViewAugment, get_recipe


def recipe_for(cfg: PretrainConfig, data: ImageData) -> Recipe:
    name = cfg.recipe
    if name == "auto":
        name = {"digits": "digits", "stl10": "stl10"}.get(data.name, "cifar" if data.image_shape[-1] <= 32 else "imagenet")
    return get_recipe(name, cfg.image_size)


VAL_SPLIT_SEED = 20_241_122  # one validation split for every run and seed


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


_COUNTS = ("train_per_class", "eval_train_per_class", "eval_test_per_class", "val_per_class", "image_size",
           "proj_hidden", "warmup_epochs", "max_steps_per_epoch", "grad_cache_chunk", "eval_every", "ckpt_every",
           "geometry_batches", "epochs", "points")  # epochs 0: the untrained encoder evaluated (a random-init baseline)


def check_config(cfg: PretrainConfig) -> None:
    """Refuse settings no run can use before the data is loaded (``ValueError`` naming the field and value)."""
    for name in _COUNTS:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
    for name in ("batch_size", "views", "proj_dim", "queue_size", "bn_splits", "knn_k", "eval_batch_size"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    for name in ("lr", "weight_decay", "momentum", "width"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if cfg.points and cfg.proj_dim != 2:
        raise ValueError(f"points={cfg.points} logs 2-D projections: it needs proj_dim 2, got {cfg.proj_dim}")
    if cfg.grad_cache_chunk and cfg.framework != "simclr":
        raise ValueError("grad_cache_chunk applies to SimCLR (in-batch negatives); MoCo's queue already decouples "
                         "the negatives from the batch")


def build_method(cfg: PretrainConfig, data: ImageData, recipe: Recipe) -> nn.Module:
    loss = build_loss(cfg.loss, cfg.loss_hparams, cfg.framework, cfg.dataset, cfg.views)
    check_views_for_loss(loss, cfg.views)
    if cfg.grad_cache_chunk and cfg.framework != "simclr":
        raise ValueError("grad_cache_chunk applies to SimCLR (in-batch negatives); MoCo's queue already decouples "
                         "the negatives from the batch")
    if cfg.grad_cache_chunk < 0:
        raise ValueError(f"grad_cache_chunk must be >= 0, got {cfg.grad_cache_chunk}")
    if cfg.iou_weights and "weights" not in inspect.signature(loss.forward).parameters:
        raise ValueError(f"iou_weights needs a loss that takes pair weights (infonce, dcl, macl, hard_negative, "
                         f"tsimclr), not {loss.name!r}")
    graph = None
    if "similarity" in loss.requires:
        from vision.graph import class_graph

        graph = class_graph(data.classes, cfg.text_model, cfg.caption_template)
    enc = build_encoder(cfg.encoder, cfg.width, recipe.size, cfg.proj_dim, cfg.proj_hidden)
    if cfg.framework == "simclr":
        return SimCLR(enc, loss, graph, cfg.iou_tau)
    if cfg.framework == "moco":
        return MoCo(enc, loss, cfg.queue_size, cfg.moco_momentum, graph, cfg.bn_splits, cfg.iou_tau)
    raise ValueError(f"framework must be 'simclr' or 'moco', got {cfg.framework!r}")


def step_output(ddp: nn.Module, inner: nn.Module, out: Any, labels: Tensor, chunk: int) -> Tensor | CachedStep:
    """One training step's loss from its augmented views ``out`` (``ViewAugment``'s output): the method's loss,
    or with ``chunk`` (SimCLR's gradient caching) the :class:`CachedStep` that encodes the views in chunks of
    ``chunk`` images and takes the loss over the whole batch."""
    if chunk:
        return CachedStep(lambda c: ddp(out.views[:, c], embed_only=True),
                          list(torch.arange(out.views.shape[1], device=out.views.device).split(chunk)),
                          lambda z: inner.loss_of(z, labels, out.iou), dim=1)
    return ddp(out.views, labels=labels, iou=out.iou)


def build_optimizer(cfg: PretrainConfig, params: list[nn.Parameter]) -> tuple[torch.optim.Optimizer, float]:
    if cfg.optimizer == "sgd":
        lr = cfg.lr or 0.06 * cfg.batch_size * sd.world_size() / 256
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay), lr
    if cfg.optimizer == "adam":
        lr = cfg.lr or 1e-3
        return torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay), lr
    raise ValueError(f"optimizer must be 'sgd' or 'adam', got {cfg.optimizer!r}")


def lr_at(step: int, total: int, warmup: int, base: float) -> float:
    """Linear warm-up then cosine decay to 0 (steps)."""
    if step < warmup:
        return base * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * t))


def run_name(cfg: PretrainConfig) -> str:
    """``cfg.run_name``, or ``<dataset>-<framework>-<loss>-v<views>-<encoder>-s<seed>-<experiment hash>``: the hash of
    the experiment config (:func:`suite.config.experiment_hash`, the config's declared ``RUN_OPTIONS`` left out), so a
    restart with another ``--device`` or ``--ckpt-every`` finds the interrupted run's folder."""
    if cfg.run_name:
        return cfg.run_name
    return f"{_name_stem(cfg)}-{experiment_hash(cfg)}"


def _name_stem(cfg: PretrainConfig) -> str:
    return f"{cfg.dataset.replace(':', '_').replace('/', '_')}-{cfg.framework}-{cfg.loss}-v{cfg.views}-{cfg.encoder}-s{cfg.seed}"


def _legacy_run_name(cfg: PretrainConfig) -> str:
    """The default folder name before the experiment hash (a hand-written list of fields left out: device and
    ckpt_every were hashed); a run started then is still found and resumed."""
    return f"{_name_stem(cfg)}-{hash_config(cfg, exclude=('resume', 'registry', 'eval_every', 'out_dir'))[:8]}"


def run_dir(cfg: PretrainConfig) -> Path:
    """``out_dir / run_name(cfg)``; a folder of the same run under its older default name when only that exists."""
    new = Path(cfg.out_dir) / run_name(cfg)
    if not cfg.run_name and cfg.resume and not new.exists():
        old = Path(cfg.out_dir) / _legacy_run_name(cfg)
        if old.is_dir():
            return old
    return new


def evaluate(model: Encoder, data: ImageData, recipe: Recipe, device: torch.device, *, knn_k: int = 200,
             knn_t: float = 0.1, linear: bool = True, batch_size: int = 512, seed: int = 0,
             geometry_batches: int = 20) -> dict[str, float]:
    """kNN / linear-probe accuracy on backbone features (bank: ``data``'s training split) and the
    geometry of projections, on ``data``'s test split."""
    tf = EvalTransform(recipe).to(device)
    was_training = model.training
    model.eval()
    train_x, train_y = data.train_x, data.train_y

    def feats(x: Tensor) -> Tensor:
        return model.features(tf(x.to(device))).float()

    clf = ClassificationEvaluator(train_x, train_y, data.test_x, data.test_y, data.num_classes, knn_k, knn_t, linear,
                                  batch_size)
    out = clf(feats)
    if geometry_batches > 0:
        aug = ViewAugment(recipe, views=2).to(device)

        def project(v: Tensor) -> Tensor:
            return model(v.to(device)).float()

        bs = min(256, data.test_x.shape[0])
        out.update(GeometryEvaluator(data.test_x.to(device), aug, batch_size=bs, max_batches=geometry_batches,
                                     seed=seed)(project))
    model.train(was_training)
    return out


def pretrain(cfg: PretrainConfig, registry: Registry | None = None,
             on_epoch: Callable[[int, dict[str, float]], None] | None = None) -> dict[str, Any]:
    """Pretrain on :class:`suite.train.Engine`, evaluate, record. Returns {"metrics": final eval metrics,
    "train": last epoch stats, ...}. The vision front-end keeps its data, views (augmentation inside the
    step), the per-step learning-rate schedule (as a scheduler), MoCo's update after each optimiser step
    and its evaluation; device, precision, the step, the non-finite check, checkpoints and resume are
    the engine's."""
    check_config(cfg)
    sd.init_from_env()
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed, rank=sd.rank())
    data, eval_data, data_info = prepare_data(cfg)
    eval_split = "val" if cfg.val_per_class > 0 else "test"  # what the evaluation metrics are logged as
    recipe = recipe_for(cfg, data)
    method = build_method(cfg, data, recipe).to(device)
    inner = method
    augment = ViewAugment(recipe, cfg.views, return_iou=cfg.iou_weights).to(device)
    opt, base_lr = build_optimizer(cfg, [p for p in method.parameters() if p.requires_grad])
    n = data.train_x.shape[0]

    def batches(epoch: int) -> list[Tensor]:
        bs = epoch_batches(n, cfg.batch_size, cfg.seed, epoch)
        return bs[: cfg.max_steps_per_epoch] if cfg.max_steps_per_epoch else bs

    steps_per_epoch = len(batches(0))
    total_steps = max(1, steps_per_epoch * cfg.epochs)
    warmup = steps_per_epoch * cfg.warmup_epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, total_steps, warmup, base_lr) / base_lr)
    loss_obj = inner.loss  # type: ignore[union-attr]
    engine = Engine(method, opt, device=device, scheduler=sched, precision="bf16" if cfg.bf16 else "fp32",
                    loss=loss_obj, desc="pretrain", unit="step")
    ckpt_dir = run_dir(cfg)
    experiment = experiment_config(cfg)
    if cfg.resume and (last := latest_checkpoint(ckpt_dir, "epoch*.pt")) is not None:
        engine.load(last, experiment, ignore=run_options(cfg))
    start_epoch = engine.epoch
    ctx = registry.run(resume_id=resumable(registry, engine.resume_run_id), modality="vision",
                       task=f"pretrain-{cfg.framework}", dataset=_dataset_label(cfg), loss=loss_obj.name,
                       loss_hparams=loss_obj.hparams(), config=experiment, run_options=run_option_values(cfg),
                       seed=cfg.seed) if (registry is not None and sd.is_main()) else nullcontext()
    result: dict[str, Any] = {"data": data_info, "recipe": dataclasses.asdict(recipe), "ckpt_dir": str(ckpt_dir),
                              "resumed_from_epoch": start_epoch}
    t_start = time.perf_counter()
    n_skipped = data_info["skipped_train_images"] + data_info["skipped_test_images"]
    if n_skipped and sd.is_main():
        print(f"{cfg.dataset}: skipped {data_info['skipped_train_images']} training and "
              f"{data_info['skipped_test_images']} test images whose size differs from the first image "
              f"({data.info.get('source', '')})", flush=True)
    t_aug = [0.0, time.perf_counter()]  # augmentation seconds this epoch, epoch start

    def step(idx: Tensor) -> Tensor | CachedStep:
        x = data.train_x[idx].to(device, non_blocking=True)
        y = data.train_y[idx].to(device)
        t0 = time.perf_counter()
        out = augment(x)  # views (V, N, C, S, S)
        t_aug[0] += time.perf_counter() - t0
        return step_output(engine.ddp, inner, out, y, cfg.grad_cache_chunk)

    stats: dict[str, float] = {}

    def epoch_end(epoch: int, st: dict[str, float]) -> None:
        nonlocal stats
        stats = {**st, "aug_fraction": t_aug[0] / max(1e-9, time.perf_counter() - t_aug[1])}
        t_aug[0], t_aug[1] = 0.0, time.perf_counter()
        if run is not None:
            run.log_many({"aug_fraction": stats["aug_fraction"]}, split="train", step=epoch)
        if cfg.ckpt_every and (epoch % cfg.ckpt_every == 0 or epoch == cfg.epochs):  # every rank: a collective
            engine.save(ckpt_dir / f"epoch{epoch:04d}.pt", experiment)
        if on_epoch is not None:
            on_epoch(epoch, stats)
        last_epoch = epoch == cfg.epochs
        if sd.is_main() and (last_epoch or (cfg.eval_every and epoch % cfg.eval_every == 0)):
            m = evaluate(inner.query_encoder, eval_data, recipe, device, knn_k=cfg.knn_k, knn_t=cfg.knn_t,  # type: ignore[union-attr]
                         linear=cfg.linear_probe and last_epoch, batch_size=cfg.eval_batch_size, seed=cfg.seed,
                         geometry_batches=cfg.geometry_batches)
            if run is not None:
                run.log_many(m, split=eval_split, step=epoch)
            result["metrics"] = m
        method.train()

    with ctx as run:
        engine.run = run
        if run is not None:
            run.log_many({f"class_count_{i}": c for i, c in enumerate(data_info.get("class_counts", []))}, split="data")
            run.log_many({"train_images": data_info["train"], "start_epoch": start_epoch,
                          "skipped_train_images": data_info["skipped_train_images"],
                          "skipped_test_images": data_info["skipped_test_images"]}, split="data")
        engine.fit(batches, step, epochs=cfg.epochs, on_step=inner.after_step, on_epoch=epoch_end,
                   rate_name="images_per_s")
        result["train"] = stats
        result["wall_s"] = time.perf_counter() - t_start
        if "metrics" not in result and sd.is_main():  # resumed at the end: evaluate the final model
            result["metrics"] = evaluate(inner.query_encoder, eval_data, recipe, device, knn_k=cfg.knn_k,  # type: ignore[union-attr]
                                         knn_t=cfg.knn_t, linear=cfg.linear_probe, batch_size=cfg.eval_batch_size,
                                         seed=cfg.seed, geometry_batches=cfg.geometry_batches)
            if run is not None:
                run.log_many(result["metrics"], split=eval_split, step=cfg.epochs)
        if run is not None:
            result["run_id"] = run.id
            if cfg.points:
                log_points(run, *projections_2d(inner.query_encoder, eval_data, recipe, device, cfg.points,  # type: ignore[union-attr]
                                                loss_obj.hypersphere), "test-2d")
        if sd.is_main():
            write_vision_card(ckpt_dir, cfg, loss_obj, int(data_info["train"]), engine.step, run)
    return result


@torch.no_grad()
def projections_2d(model: Encoder, data: ImageData, recipe: Recipe, device: torch.device, n: int,
                   normalise: bool) -> tuple[Tensor, Tensor]:
    """(projections (n', 2), labels) of ``n // classes`` test images per class (a fixed subset), L2-normalised
    for the hypersphere losses (what their loss sees)."""
    idx = class_subset_indices(data.test_y, max(1, n // data.num_classes), seed=0)
    was = model.training
    model.eval()
    z = torch.cat([model(EvalTransform(recipe).to(device)(data.test_x[b].to(device))).float().cpu()
                   for b in idx.split(512)])
    model.train(was)
    return (torch.nn.functional.normalize(z, dim=-1) if normalise else z), data.test_y[idx]


def _dataset_label(cfg: PretrainConfig) -> str:
    label = cfg.dataset
    if cfg.train_per_class:
        label += f"-{cfg.train_per_class}pc"
    if cfg.imbalance != "none":
        label += f"-{cfg.imbalance}"
    return label
