"""Streamed pretraining data (:mod:`vision.stream`) as the pretraining task takes it: the pretraining samples, the kNN
/ probe bank and the test split with the same subsets as data held in memory (:func:`prepare_stream`), and their
evaluation, features extracted as the images are decoded (:func:`evaluate_streamed`)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from suite.eval.bank import FeatureBank, bar
from suite.train import to_device
from vision.config import PretrainConfig
from vision.data import class_subset_indices, imbalanced_indices
from vision.eval import ClassificationEvaluator, GeometryEvaluator
from vision.models import Encoder
from vision.sources import Source, open_source
from vision.stream import Skips, eval_images
from vision.transforms import EvalTransform, Recipe, ViewAugment

SKIP_COUNTS = ("empty_classes", "not_files", "not_images", "shard_problems")  # what the file index left out, counted
VAL_SPLIT_SEED = 20_241_122  # one validation split for every run and seed (in memory and streamed)


@dataclass
class StreamedData:
    """Streamed pretraining data (:mod:`vision.stream`): the pretraining samples, the kNN / probe bank and the test
    split, each a :class:`vision.sources.Source` (a file index; nothing decoded until a step or an evaluation)."""

    name: str
    train: Source
    bank: Source
    test: Source
    classes: list[str]
    captions: bool = False  # X-CLR's graph from each sample's caption (image-caption shards)

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def prepare_stream(cfg: PretrainConfig) -> tuple[StreamedData, dict[str, Any]]:
    """The streamed counterpart of :func:`prepare_data`: the same subsets (validation hold-out, balanced or imbalanced
    training subsets, evaluation subsets per class) taken on the file index by label."""
    train = open_source(cfg.dataset, "train")
    shards = cfg.dataset.lower().startswith("wds:")
    ev = cfg.eval_dataset
    if not ev and shards:
        raise ValueError(f"--dataset {cfg.dataset}: shards have one split; give --eval-dataset folder:<path> (kNN bank "
                         "train/, test val/) or wds:<test shards> for the kNN / probe evaluation")
    if ev.lower().startswith("folder:"):
        bank = open_source(ev, "train")
        test = open_source(ev, "test", bank.classes)
    elif ev.lower().startswith("wds:"):
        bank, test = train, open_source(ev, "test")
    elif ev:
        raise ValueError(f"--eval-dataset must be folder:<path> or wds:<pattern>, got {ev!r}")
    else:
        bank, test = train, open_source(cfg.dataset, "test", train.classes)
    if (bank.labels < 0).any() or (test.labels < 0).any():
        raise ValueError(f"the kNN / probe evaluation needs a class for every image: {(bank.labels < 0).sum()} bank "
                         f"and {(test.labels < 0).sum()} test samples have none (shards: a .cls per sample)")
    classes = bank.classes if len(bank.classes) >= len(test.classes) else test.classes
    info: dict[str, Any] = {"train_full": len(train), **{k: int(train.info.get(k, 0)) for k in SKIP_COUNTS}}
    if cfg.val_per_class > 0:  # held-out training images take the test split's place
        labels = torch.from_numpy(bank.labels)
        val = class_subset_indices(labels, cfg.val_per_class, seed=VAL_SPLIT_SEED)
        keep = torch.ones(len(bank), dtype=torch.bool)
        keep[val] = False
        test = bank.take(val.numpy())
        if bank is train:
            train = bank = bank.take(keep.nonzero().flatten().numpy())
        else:
            bank = bank.take(keep.nonzero().flatten().numpy())
        info["validation"] = len(test)
    if cfg.eval_train_per_class > 0:
        bank = bank.take(class_subset_indices(torch.from_numpy(bank.labels), cfg.eval_train_per_class,
                                              seed=cfg.seed).numpy())
    if cfg.eval_test_per_class > 0:
        test = test.take(class_subset_indices(torch.from_numpy(test.labels), cfg.eval_test_per_class,
                                              seed=cfg.seed).numpy())
    if cfg.train_per_class > 0:
        train = train.take(class_subset_indices(torch.from_numpy(train.labels), cfg.train_per_class,
                                                seed=cfg.seed).numpy())
    if cfg.imbalance != "none":
        idx, counts = imbalanced_indices(torch.from_numpy(train.labels), cfg.imbalance, seed=cfg.seed,
                                         min_ratio=cfg.imbalance_min_ratio, num_classes=len(classes))
        train = train.take(idx.numpy())
        info["class_counts"] = counts
    info.update(train=len(train), test=len(test), eval_bank=len(bank))
    return StreamedData(train.name, train, bank, test, classes, captions=shards), info


@torch.no_grad()
def evaluate_streamed(model: Encoder, data: StreamedData, recipe: Recipe, device: torch.device, *, knn_k: int = 200,
                      knn_t: float = 0.1, linear: bool = True, batch_size: int = 512, seed: int = 0,
                      geometry_batches: int = 20, workers: int = 0, skips: Skips | None = None,
                      probe: str = "features", probe_epochs: int = 100, probe_lr: float = 30.0,
                      probe_schedule: str = "moco", bank_dtype: torch.dtype = torch.float16) -> dict[str, float]:
    """:func:`evaluate` of streamed data: the bank's and the test split's features extracted as they are decoded
    (ImageNet's evaluation crops, resize 256 and centre 224 at the recipe's size, :func:`vision.stream.eval_images`)
    into banks preallocated from the index (:class:`suite.eval.bank.FeatureBank`, ``bank_dtype`` fp16 by default),
    so memory holds the features alone, not images nor copies of them; kNN over chunks of the bank and the probe
    trained in torch on the stored features (:meth:`ClassificationEvaluator.from_banks`; ``probe`` "sgd": ImageNet's
    protocol instead, :func:`sgd_probe`); the geometry of the projections on the first ``geometry_batches`` x 256
    test crops, augmented as in training. Each stage's seconds are metrics too: ``eval_extract_s``, ``eval_knn_s``,
    ``eval_probe_s`` (when a probe runs), ``eval_geometry_s`` (when the geometry does)."""
    tf = EvalTransform(recipe).to(device)
    was_training = model.training
    model.eval()
    size = recipe.size

    def feats(source: Source, what: str) -> FeatureBank:
        bank = FeatureBank(len(source), bank_dtype)
        with bar(len(source), f"features of the {what}", unit="img") as progress:
            for x, y in eval_images(source, size, batch_size, workers, skips):
                bank.add(model.features(tf(to_device(x, device))), y)
                progress.update(int(y.shape[0]))
        return bank.trim()

    t0 = time.perf_counter()
    tr, te = feats(data.bank, "bank"), feats(data.test, "test split")
    extract_s = time.perf_counter() - t0
    clf = ClassificationEvaluator(torch.empty(0), tr.y, torch.empty(0), te.y, data.num_classes, knn_k, knn_t,
                                  linear and probe == "features", batch_size)
    out = {**clf.from_banks(tr, te, device), "eval_extract_s": extract_s}
    if linear and probe == "sgd":
        t0 = time.perf_counter()
        out.update(sgd_probe(model, data, recipe, device, te, epochs=probe_epochs, lr=probe_lr,
                             batch_size=batch_size, seed=seed, workers=workers, skips=skips, schedule=probe_schedule))
        out["eval_probe_s"] = time.perf_counter() - t0
    if geometry_batches > 0:
        t0 = time.perf_counter()
        n = min(len(data.test), 256 * geometry_batches)
        first = data.test.take(np.arange(n))
        images = torch.cat([x for x, _ in eval_images(first, size, batch_size, workers, skips)])
        aug = ViewAugment(recipe, views=2).to(device)
        out.update(GeometryEvaluator(images.to(device), aug, batch_size=min(256, n), max_batches=geometry_batches,
                                     seed=seed)(lambda v: model(v.to(device)).float()))
        out["eval_geometry_s"] = time.perf_counter() - t0
    model.train(was_training)
    return out


def sgd_probe(model: Encoder, data: StreamedData, recipe: Recipe, device: torch.device,
              test: FeatureBank | tuple[Tensor, Tensor],
              *, epochs: int, lr: float, batch_size: int, seed: int, workers: int = 0,
              skips: Skips | None = None, schedule: str = "moco") -> dict[str, float]:
    """ImageNet's linear evaluation: a linear classifier on the frozen backbone (eval mode), trained ``epochs`` epochs
    by SGD with no weight decay, ``schedule`` "moco" (MoCo's and MACL's protocol: momentum 0.9, the rate divided by
    10 at 60 % and 80 % of the epochs) or "simclr" (SimCLR's, App. B.6: Nesterov momentum 0.9, the rate decayed by a
    cosine over the steps), on random resized crops (torchvision's default scale 0.08-1) and horizontal flips
    of the whole bank in a seeded order, decoded as they are streamed; evaluated on the test features of the
    evaluation crops (``test``: a bank, or features and labels). Each epoch shows a progress bar over its
    batches."""
    from suite.train.batches import Prefetch
    from suite.train.seeding import seeded_generator
    from vision.stream import Crops, EpochBatch

    tf = EvalTransform(recipe).to(device)
    bank = test if isinstance(test, FeatureBank) else FeatureBank.of(*test)
    head = torch.nn.Linear(bank.dim, data.num_classes).to(device)
    if schedule not in ("moco", "simclr"):
        raise ValueError(f"probe schedule must be moco or simclr, got {schedule!r}")
    opt = torch.optim.SGD(head.parameters(), lr=lr, momentum=0.9, weight_decay=0.0, nesterov=schedule == "simclr")
    crops = Crops(data.bank, recipe.size, 1, (0.08, 1.0), recipe.ratio, seed=seed)
    pf = Prefetch(crops, workers=workers, pin=device.type == "cuda")
    n = len(data.bank)
    correct = seen = 0
    try:
        with torch.enable_grad():  # the evaluation runs under no_grad; the classifier learns
            steps = epochs * -(-n // batch_size)
            for epoch in range(epochs):
                for group in opt.param_groups:
                    group["lr"] = lr * (0.1 ** sum(epoch >= f * epochs for f in (0.6, 0.8)))
                g = seeded_generator(seed, epoch=epoch, stream="probe")
                order = torch.randperm(n, generator=g).split(batch_size)
                flips = torch.rand(n, generator=g) < 0.5
                progress = bar(n, f"probe epoch {epoch + 1}/{epochs}", unit="img", leave=False)
                for i, (b, sb) in enumerate(zip(order, pf([EpochBatch(epoch, b) for b in order]))):
                    if skips is not None:
                        skips.add(sb.skipped)
                    x = to_device(sb.images[0], device)
                    x = torch.where(to_device(flips[b], device)[:, None, None, None], x.flip(-1), x)
                    with torch.no_grad():
                        h = model.features(tf(x)).float()
                    logits = head(h)
                    y = to_device(sb.labels, device)
                    loss = torch.nn.functional.cross_entropy(logits, y)
                    if schedule == "simclr":  # the cosine over the steps, from the step's start
                        done = epoch * len(order) + i
                        for group in opt.param_groups:
                            group["lr"] = 0.5 * lr * (1 + math.cos(math.pi * min(done, steps) / steps))
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    if epoch == epochs - 1:
                        correct += int((logits.argmax(1) == y).sum())
                        seen += int(y.numel())
                    progress.update(int(b.numel()))
                progress.close()
    finally:
        pf.close()
    hits = sum(int((head(bank.raw(s, s + 8192, device)).argmax(1).cpu() == bank.y[s : s + 8192]).sum())
               for s in range(0, len(bank), 8192))
    acc = hits / max(1, len(bank))
    return {"linear_acc": acc, "linear_train_acc": correct / max(1, seen)}
