"""``pretrain(cfg)``: SimCLR / MoCo-v2 pretraining with any loss (:class:`PretrainTask` through the run owner).

Data stay uint8 tensors; each step takes a slice of a seeded per-epoch permutation (sharded over
ranks under torch.distributed, as a DistributedSampler would), augments it on the device with
kornia, and runs the framework. Seeds, the run folder, checkpoints (``<folder>/checkpoints/step-<N>.pt``),
resume, the registry row and the encoder export are the run owner's (:mod:`suite.train.run`). What a run is built from
(data, recipe, method, optimiser) is :mod:`vision.build`'s; the evaluation by the run's protocol, at the end and of a
checkpoint (:func:`evaluate_checkpoint`, here), is :mod:`vision.evaluate`'s. Their names are importable from here too.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from suite import distributed as sd
from suite.eval.points import log_points
from suite.config import check_ints, check_numbers, is_number
from suite.train import CachedStep, data_workers, to_device
from suite.train.legacy import Earlier, OldFolder, OldHash
from suite.train.run import RunContext, RunResult, Task, Training, run
from vision.build import base_lr, build_method, build_optimizer, lr_at, prepare_data, recipe_for
from vision.card import vision_card
from vision.config import PretrainConfig
from vision.data import ImageData
from vision.evaluate import (check_eval_options, class_similarities, eval_protocol, evaluate, projections_2d,
                             run_evaluation)
from vision.sources import expand_shards, is_streamed
from vision.stream import Crops, EpochBatch, Skips, StreamBatch, caption_embeddings
from vision.streamed import SKIP_COUNTS, StreamedData, prepare_stream
from vision.models import MODEL_TYPE, Encoder
from vision.transforms import ViewAugment

__all__ = ["CheckpointEvalTask", "EARLIER", "PretrainTask", "base_lr", "build_method", "build_optimizer",
           "check_config", "check_eval_options", "checkpoint_config", "class_similarities", "eval_protocol",
           "evaluate", "evaluate_checkpoint", "lr_at", "prepare_data", "pretrain", "projections_2d", "recipe_for",
           "run_evaluation", "step_output"]


_COUNTS = ("train_per_class", "eval_train_per_class", "eval_test_per_class", "val_per_class", "image_size",
           "proj_hidden", "warmup_epochs", "max_steps_per_epoch", "grad_cache_chunk", "eval_every", "checkpoint_every",
           "keep_checkpoints", "checkpoint_steps",
           "geometry_batches", "epochs", "points", "class_similarity")  # epochs 0: the untrained encoder evaluated (a random-init baseline)


_DEFAULT_MIN_RATIO = PretrainConfig.__dataclass_fields__["imbalance_min_ratio"].default
_DEFAULT_IOU_TAU = PretrainConfig.__dataclass_fields__["iou_tau"].default


def check_config(cfg: PretrainConfig) -> None:
    """Refuse settings no run can use before the data is loaded (``ValueError`` naming the field and value)."""
    check_ints(cfg, {**dict.fromkeys(_COUNTS, 0), **dict.fromkeys(
        ("batch_size", "views", "proj_dim", "queue_size", "bn_splits", "knn_k", "eval_batch_size"), 1)})
    check_numbers(cfg, dict.fromkeys(("lr", "weight_decay", "momentum", "width"), 0.0))
    check_ints(cfg, {"workers": -1})
    if not (is_number(cfg.lars_eta) and cfg.lars_eta > 0):
        raise ValueError(f"lars_eta must be a finite number > 0 (LARS's trust coefficient), got {cfg.lars_eta!r}")
    r = cfg.imbalance_min_ratio
    if not (is_number(r) and 0 < r <= 1):
        raise ValueError(f"imbalance_min_ratio must be in (0, 1] (the smallest class's fraction), got {r!r}")
    if cfg.imbalance != "exponential" and r != _DEFAULT_MIN_RATIO:  # a setting of another rule: refused, not recorded
        raise ValueError(f"--imbalance-min-ratio {r} applies to --imbalance exponential, not {cfg.imbalance!r}")
    if not (is_number(cfg.iou_tau) and cfg.iou_tau > 0):
        raise ValueError(f"iou_tau must be a finite number > 0, got {cfg.iou_tau!r}")
    if not cfg.iou_weights and cfg.iou_tau != _DEFAULT_IOU_TAU:
        raise ValueError(f"--iou-tau {cfg.iou_tau} sets the IoU pair weights: it needs --iou-weights")
    if is_streamed(cfg.dataset):
        from vision.sources import check_pattern

        check_pattern(cfg.dataset)
        if cfg.points or cfg.class_similarity:
            raise ValueError("--points and --class-similarity read test images in memory; streamed data sets "
                             f"({cfg.dataset}) take neither")
    check_eval_options(cfg)
    if cfg.points and cfg.proj_dim != 2:
        raise ValueError(f"points={cfg.points} logs 2-D projections: it needs proj_dim 2, got {cfg.proj_dim}")
    if cfg.grad_cache_chunk and cfg.framework != "simclr":
        raise ValueError("grad_cache_chunk applies to SimCLR (in-batch negatives); MoCo's queue already decouples "
                         "the negatives from the batch")
    if cfg.class_names:  # X-CLR's caption names: the file read and checked before any data
        from vision.graph import read_class_names

        read_class_names(cfg.class_names)
    if cfg.text_model.startswith("random"):
        from vision.graph import random_graph_seed

        random_graph_seed(cfg.text_model)
    if cfg.init:
        from vision.models import init_folder

        init_folder(cfg.init)


def step_output(ddp: nn.Module, inner: nn.Module, out: Any, labels: Tensor, chunk: int,
                captions: Tensor | None = None) -> Tensor | CachedStep:
    """One training step's loss from its augmented views ``out`` (``ViewAugment``'s output): the method's loss,
    or with ``chunk`` (SimCLR's gradient caching) the :class:`CachedStep` that encodes the views in chunks of
    ``chunk`` images and takes the loss over the whole batch; ``captions`` (N, D): X-CLR's per-sample graph."""
    extra = {} if captions is None else {"captions": captions}
    if chunk:
        return CachedStep(lambda c: ddp(out.views[:, c], embed_only=True),
                          list(torch.arange(out.views.shape[1], device=out.views.device).split(chunk)),
                          lambda z: inner.loss_of(z, labels, out.iou, **extra), dim=1)
    return ddp(out.views, labels=labels, iou=out.iou, **extra)


def _on_device(x: Tensor, device: torch.device, share: float = 0.25) -> Tensor:
    """``x`` moved to a CUDA ``device`` once when it takes at most ``share`` of its free memory (CIFAR-10's uint8
    images: 150 MB), so a step gathers its batch there; else (and on the CPU) ``x``."""
    if device.type != "cuda":
        return x
    free, _ = torch.cuda.mem_get_info(device)
    return x.to(device) if x.numel() * x.element_size() <= share * free else x


def _name_stem(cfg: PretrainConfig) -> str:
    return f"{cfg.dataset.replace(':', '_').replace('/', '_')}-{cfg.framework}-{cfg.loss}-v{cfg.views}-{cfg.encoder}-s{cfg.seed}"


# what the layout before the run owner left: <run folder>/epoch<N>.pt (the engine's format; the model's entry once
# named "method"), by default in runs/vision/<stem>-<experiment hash> or, older still, runs/vision/<stem>-<hash of
# the fields of then: device, run_name "" and ckpt_every were hashed; resume, registry, eval_every and the folder not>
EARLIER = Earlier(checkpoints=("epoch*.pt",), entries={"model": "method"}, folders=(
    OldFolder("runs/vision"),
    OldFolder("runs/vision", OldHash(drop=("resume", "registry", "eval_every", "out", "checkpoint_every",
                                           "keep_checkpoints"), constants={"run_name": ""},
                                     renamed={"ckpt_every": "checkpoint_every"}))))


class PretrainTask(Task[PretrainConfig]):
    """SimCLR / MoCo-v2 pretraining as a :class:`suite.train.run.Task` (task ``pretrain-<framework>``, headline
    ``linear_acc``, or ``knn_acc`` without the probe, on ``test``, or ``val`` with ``val_per_class``).

    What is particular to images: the data (uint8 tensors; each step takes a slice of the run's per-epoch
    permutation and augments it on the device with kornia), the per-step learning-rate schedule, MoCo's update after
    each optimiser step, the kNN / linear / geometry evaluation (every ``eval_every`` epochs and at the end) and the 2-D
    projections (``points``). The run owner seeds, checkpoints, resumes, records and exports the encoder
    (:meth:`vision.models.Encoder.from_pretrained`)."""

    modality, model_type, earlier = "vision", MODEL_TYPE, EARLIER

    def __init__(self, cfg: PretrainConfig) -> None:
        check_config(cfg)
        self.name = f"pretrain-{cfg.framework}"
        self.eval_split = "val" if cfg.val_per_class > 0 else "test"  # validation takes the test split's place
        self.primary = ("linear_acc" if cfg.linear_probe else "knn_acc", self.eval_split)
        self.stats: dict[str, float] = {}
        self.metrics: dict[str, float] = {}

    def stem(self, cfg: PretrainConfig) -> str:
        return _name_stem(cfg)

    def dataset(self, cfg: PretrainConfig) -> str:
        return _dataset_label(cfg)

    def loss_name(self, cfg: PretrainConfig) -> str:
        return self.loss.name

    def data_inputs(self, cfg: PretrainConfig) -> dict[str, str | Path | list[str]]:
        """A streamed folder's root or a shard pattern's shards (and an evaluation set's): reuse and resume decide on
        their identity (a manifest of names and sizes with a sample's content for a large set, a shard read at its
        head and tail only: :func:`suite.inputs.data_identity`), and the label files of a flat val/ kept outside the
        folder (Kaggle's ``LOC_val_solution.csv`` at its root: :func:`vision.sources.flat_val_files`)."""
        from vision.sources import flat_val_files

        out: dict[str, str | Path | list[str]] = {}
        for name, ds in (("data", cfg.dataset), ("eval_data", cfg.eval_dataset)):
            kind, _, where = ds.partition(":")
            if kind.lower() == "folder":
                out[name] = where
                if labels := flat_val_files(where):
                    out[f"{name}_val_labels"] = [str(f) for f in labels]
            elif kind.lower() == "wds":
                out[name] = expand_shards(where)
        return out

    def run_info(self, cfg: PretrainConfig) -> dict[str, Any]:
        """X-CLR's caption names of a class graph (source, count, sha256), and what produces each evaluation metric
        (:func:`eval_protocol`), recorded with the run options."""
        names = getattr(getattr(self, "method", None), "caption_names", None)
        recipe = getattr(self, "recipe", None)
        protocol = {"eval_protocol": eval_protocol(cfg, recipe.size)} if recipe is not None else {}
        return {**({"caption_names": names} if names else {}), **protocol}

    def build(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig]) -> Training:
        device = ctx.device
        self.skips = Skips()  # streamed data: the unreadable files met, each said once and counted
        data: ImageData | StreamedData
        if is_streamed(cfg.dataset):
            data, info = prepare_stream(cfg)
            self.eval_data = data
            info.update(skipped_train_images=0, skipped_test_images=0)  # no image is skipped for its size
        else:
            data, self.eval_data, info = prepare_data(cfg)
        self.info = info
        if (info["skipped_train_images"] or info["skipped_test_images"]) and sd.is_main():
            print(f"{cfg.dataset}: skipped {info['skipped_train_images']} training and {info['skipped_test_images']} "
                  f"test images whose size differs from the first image ({data.info.get('source', '')})", flush=True)
        self.recipe = recipe_for(cfg, data)
        self.method = method = build_method(cfg, data, self.recipe).to(device)
        if cfg.framework == "simclr" and cfg.cross_rank_bn and sd.is_distributed():  # global BN (on its device)
            method.encoder = sd.convert_sync_batchnorm(method.encoder)  # type: ignore[assignment]
        if cfg.init:  # fine-tuning: the encoder starts from an export (a resumed run's checkpoint replaces it)
            from vision.models import load_init

            load_init(method.query_encoder, cfg.init)  # type: ignore[arg-type]
            if hasattr(method, "key_encoder"):  # MoCo: the key encoder starts as the query encoder
                method.key_encoder.load_state_dict(method.query_encoder.state_dict())  # type: ignore[union-attr,operator]
        self.loss = method.loss  # type: ignore[union-attr]
        if device.type == "cuda":  # GPU speed (issue 47): NHWC convolutions, cuDNN's autotuner for the fixed shapes,
            for enc in (method.query_encoder, getattr(method, "key_encoder", None)):  # the images on the device once
                if isinstance(enc, Encoder):
                    enc.channels_last()
            torch.backends.cudnn.benchmark = True
        augment = ViewAugment(self.recipe, cfg.views, return_iou=cfg.iou_weights).to(device)
        opt, base_lr = build_optimizer(cfg, [p for p in method.parameters() if p.requires_grad], device)
        self.t_aug = [0.0, time.perf_counter()]  # augmentation seconds this epoch, epoch start
        if isinstance(data, StreamedData):
            batches, step, collate = self._streamed(cfg, ctx, data, augment)
        else:
            batches, step = self._in_memory(cfg, ctx, data, augment)
            collate = None
        steps_per_epoch = len(batches(0))
        total, warmup = max(1, steps_per_epoch * cfg.epochs), steps_per_epoch * cfg.warmup_epochs
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, total, warmup, base_lr) / base_lr)
        counts = {f"class_count_{i}": c for i, c in enumerate(info.get("class_counts", []))}
        streamed = {k: info[k] for k in SKIP_COUNTS if info.get(k)}
        return Training(method, opt, batches, step, epochs=cfg.epochs, scheduler=sched, loss=self.loss, compile=cfg.compile,
                        precision="bf16" if cfg.bf16 else "fp32", on_step=method.after_step,  # type: ignore[arg-type]
                        rate_name="images_per_s", unit="step", collate=collate,
                        workers=(cfg.workers if cfg.workers >= 0 else data_workers(device)) if collate else 0,
                        size=len if collate else None, checkpoint_steps=cfg.checkpoint_steps,
                        data_info={**counts, **streamed, "train_images": info["train"],
                                   "skipped_train_images": info["skipped_train_images"],
                                   "skipped_test_images": info["skipped_test_images"]})

    def _in_memory(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], data: ImageData,
                   augment: ViewAugment) -> tuple[Any, Any]:
        """The epoch's index batches and the step of data held in memory: a step gathers its images and augments
        them on the device."""
        device, method = ctx.device, self.method
        train_x, train_y = _on_device(data.train_x, device), _on_device(data.train_y, device)
        n = data.train_x.shape[0]

        def batches(epoch: int) -> list[Tensor]:
            bs = ctx.epoch_batches(n, cfg.batch_size, epoch)
            bs = bs[: cfg.max_steps_per_epoch] if cfg.max_steps_per_epoch else bs
            if train_x.device.type == "cuda":  # the epoch's indices copied once (a step's copy from pageable memory
                bs = list(torch.cat(bs).to(train_x.device).split([len(b) for b in bs]))  # waits for the GPU)
            return bs

        def step(idx: Tensor) -> Tensor | CachedStep:
            x, y = to_device(train_x[idx], device), to_device(train_y[idx], device)
            t0 = time.perf_counter()
            out = augment(x)  # views (V, N, C, S, S)
            self.t_aug[0] += time.perf_counter() - t0
            return step_output(ctx.engine.ddp, method, out, y, cfg.grad_cache_chunk)  # type: ignore[union-attr]

        return batches, step

    def _streamed(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], data: StreamedData,
                  augment: ViewAugment) -> tuple[Any, Any, Crops]:
        """The epoch's batches, the step and the loader's part of streamed data: the loader's workers decode each
        batch's images and take their random resized crops (:class:`vision.stream.Crops`, seeded per sample and
        epoch); the step flips, jitters and blurs them on the device."""
        device, method = ctx.device, self.method
        captions = None
        if data.captions and "similarity" in self.loss.requires:  # computed once per source, memory-mapped
            captions = caption_embeddings(data.train, cfg.text_model)
        r = self.recipe
        crops = Crops(data.train, r.size, cfg.views, r.scale, r.ratio, cfg.seed, captions, iou=cfg.iou_weights)
        n = len(data.train)

        def batches(epoch: int) -> list[EpochBatch]:
            bs = ctx.epoch_batches(n, cfg.batch_size, epoch)
            return [EpochBatch(epoch, b) for b in (bs[: cfg.max_steps_per_epoch] if cfg.max_steps_per_epoch else bs)]

        def step(sb: StreamBatch) -> Tensor | CachedStep:
            self.skips.add(sb.skipped)
            x, y = to_device(sb.images, device), to_device(sb.labels, device)
            t0 = time.perf_counter()
            out = augment.from_crops(x, None if sb.iou is None else to_device(sb.iou, device))
            self.t_aug[0] += time.perf_counter() - t0
            cap = None if sb.captions is None else to_device(sb.captions, device)
            return step_output(ctx.engine.ddp, method, out, y, cfg.grad_cache_chunk, cap)  # type: ignore[union-attr]

        return batches, step, crops

    def _evaluate(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], linear: bool) -> dict[str, float]:
        m = run_evaluation(cfg, self.method.query_encoder, self.eval_data, self.recipe, ctx.device,  # type: ignore[arg-type]
                           linear=linear, skips=self.skips)
        self.method.train()
        return m

    def on_epoch(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], training: Training, epoch: int,
                 stats: dict[str, float]) -> None:
        self.stats = {**stats, "aug_fraction": self.t_aug[0] / max(1e-9, time.perf_counter() - self.t_aug[1])}
        self.t_aug[0], self.t_aug[1] = 0.0, time.perf_counter()
        ctx.log({"aug_fraction": self.stats["aug_fraction"]}, split="train", step=epoch)
        if isinstance(self.eval_data, StreamedData):  # unreadable files met so far (each named once when met)
            ctx.log({"unreadable_images": float(len(self.skips))}, split="data", step=epoch)
        if sd.is_main() and cfg.eval_every and epoch % cfg.eval_every == 0 and epoch < cfg.epochs:
            ctx.log(self._evaluate(cfg, ctx, linear=False), split=self.eval_split, step=epoch)

    def evaluate(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], training: Training) -> dict[str, float]:
        self.metrics = self._evaluate(cfg, ctx, linear=cfg.linear_probe)
        if ctx.run is not None and cfg.points:
            log_points(ctx.run, *projections_2d(self.method.query_encoder, self.eval_data, self.recipe, ctx.device,  # type: ignore[arg-type]
                                                cfg.points, self.loss.hypersphere), "test-2d")
        if cfg.class_similarity:  # learned class similarities and, for X-CLR, its target graph (X-CLR Fig. 4)
            ctx.log(class_similarities(self.method.query_encoder, self.eval_data, self.recipe, ctx.device,  # type: ignore[arg-type]
                                       cfg.class_similarity), split="class-sim")
            graph = getattr(self.method, "class_graph", None)
            if graph is not None:
                from vision.eval.class_sim import as_metrics

                ctx.log(as_metrics(graph.float().cpu()), split="class-graph")
        return self.metrics

    def export_module(self, cfg: PretrainConfig, training: Training) -> nn.Module | None:
        return self.method.query_encoder  # type: ignore[return-value]

    def card(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], training: Training) -> dict[str, Any]:
        return vision_card(cfg, self.loss, int(self.info["train"]), ctx.engine.step, ctx.run,  # type: ignore[union-attr]
                           lr=base_lr(cfg), protocol=eval_protocol(cfg, self.recipe.size))


def pretrain(cfg: PretrainConfig, registry: Any = None, stop_after: int | None = None) -> RunResult:
    """Pretrain through the run owner (:func:`suite.train.run.run`), evaluate, record (``registry`` as the owner takes
    it: None the default registry, False or ``cfg.registry`` false no row),
    export (``stop_after``: stop after that many epochs, as an interruption would). Returns the owner's result
    (``metrics``: the final evaluation); its ``info`` holds {"train": last epoch's stats, "data": data counts,
    "recipe"}."""
    task = PretrainTask(cfg)
    res = run(task, cfg, registry=registry, stop_after=stop_after)
    res.info = {"train": task.stats, "data": task.info, "recipe": dataclasses.asdict(task.recipe)}
    return res


class CheckpointEvalTask(Task[PretrainConfig]):
    """``suite vision eval``: kNN / linear probe / geometry of a pretraining checkpoint (task ``eval``), by the run's
    own protocol (:func:`run_evaluation`, ``cfg`` the run's config with the command's overrides)."""

    modality, name = "vision", "eval"

    def __init__(self, cfg: PretrainConfig, ckpt: Path) -> None:
        self.ckpt = ckpt
        self.eval_split = "val" if cfg.val_per_class > 0 else "test"  # as the run logged it
        self.primary = ("linear_acc" if cfg.linear_probe else "knn_acc", self.eval_split)
        self.data: ImageData | StreamedData
        if is_streamed(cfg.dataset):
            self.data = prepare_stream(cfg)[0]
        else:
            _, self.data, _ = prepare_data(cfg)
        self.recipe = recipe_for(cfg, self.data)
        self.method = build_method(cfg, self.data, self.recipe)

    def loss_name(self, cfg: PretrainConfig) -> str:
        return self.method.loss.name  # type: ignore[union-attr]

    def record(self, cfg: PretrainConfig, experiment: dict[str, Any], training: Any) -> dict[str, Any]:
        return {**dataclasses.asdict(cfg), "ckpt": str(self.ckpt)}

    def run_info(self, cfg: PretrainConfig) -> dict[str, Any]:
        return {"eval_protocol": eval_protocol(cfg, self.recipe.size)}

    def evaluate(self, cfg: PretrainConfig, ctx: RunContext[PretrainConfig], training: Any) -> dict[str, float]:
        encoder = self.method.to(ctx.device).query_encoder
        skips = Skips() if isinstance(self.data, StreamedData) else None
        return run_evaluation(cfg, encoder, self.data, self.recipe, ctx.device,  # type: ignore[arg-type]
                              linear=cfg.linear_probe, skips=skips)


def checkpoint_config(recorded: dict[str, Any], overrides: dict[str, Any]) -> PretrainConfig:
    """The config a checkpoint is evaluated with: the run's (``recorded``, less what the run owner adds to it) with
    ``overrides``; another ``dataset`` drops the run's evaluation set and, held in memory, its streamed probe unless
    they are given too. Checked as a run's (:func:`check_eval_options`) before anything is read."""
    from suite.config import load_config
    from suite.train.run import INPUTS

    run_cfg = {k: v for k, v in recorded.items() if k != INPUTS}
    given = {k: v for k, v in overrides.items() if v is not None}
    if "dataset" in given and given["dataset"] != run_cfg.get("dataset"):
        given.setdefault("eval_dataset", "")  # the run's evaluation set went with its training data
        if not is_streamed(given["dataset"]):
            given.setdefault("probe", "features")
    cfg = load_config(PretrainConfig, None, {**run_cfg, **given})
    check_eval_options(cfg)
    return cfg


def evaluate_checkpoint(path: str | Path, overrides: dict[str, Any], *, knn_k: int = 0, linear: bool | None = None,
                        registry: Any = None) -> dict[str, float]:
    """Evaluate a pretraining checkpoint (a file, or a run folder: its newest checkpoint) with its recorded config
    and protocol (kNN k and t, the probe and its epochs and rate, the bank, the crops) (``overrides`` replace fields:
    another data set, device, bank size, ``probe``; ``knn_k`` > 0 and ``linear`` not None override ``knn_k`` and
    ``linear_probe``), recorded as an ``eval`` row (``registry`` as the owner takes it: None the default registry,
    False none) whose run options hold the protocol (``eval_protocol``)."""
    from suite.train.run import CHECKPOINTS, evaluation, newest_checkpoint, read_checkpoint

    p = Path(path)
    if p.is_dir():
        found = newest_checkpoint(p, EARLIER)
        if found is None:
            raise ValueError(f"{p}: no checkpoint in {p / CHECKPOINTS} (nor one of an earlier layout)")
        p = found
    state = read_checkpoint(p, EARLIER)
    given = dict(overrides)
    if knn_k:
        given["knn_k"] = knn_k
    if linear is not None:
        given["linear_probe"] = linear
    cfg = checkpoint_config(state.get("config") or {}, given)
    task = CheckpointEvalTask(cfg, p)
    task.method.load_state_dict(state["model"])
    return evaluation(task, cfg, registry=registry, loss=task.method.loss,  # type: ignore[arg-type]
                      folder=p.parent, step=int(state.get("epoch", 0))).metrics


def _dataset_label(cfg: PretrainConfig) -> str:
    label = cfg.dataset
    if cfg.train_per_class:
        label += f"-{cfg.train_per_class}pc"
    if cfg.imbalance != "none":
        label += f"-{cfg.imbalance}"
    return label
