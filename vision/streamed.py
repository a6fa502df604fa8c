"""Streamed pretraining data (:mod:`vision.stream`) as the pretraining task takes it: the pretraining samples, the kNN
/ probe bank and the test split with the same subsets as data held in memory (:func:`prepare_stream`), and their
evaluation, features extracted as the images are decoded (:func:`evaluate_streamed`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from suite.train import to_device
from vision.config import PretrainConfig
from vision.data import class_subset_indices, imbalanced_indices
from vision.eval import ClassificationEvaluator, GeometryEvaluator
from vision.models import Encoder
from vision.stream import Skips, Source, eval_images, open_source
from vision.transforms import EvalTransform, Recipe, ViewAugment

VAL_SPLIT_SEED = 20_241_122  # one validation split for every run and seed (in memory and streamed)


@dataclass
class StreamedData:
    """Streamed pretraining data (:mod:`vision.stream`): the pretraining samples, the kNN / probe bank and the test
    split, each a :class:`vision.stream.Source` (a file index; nothing decoded until a step or an evaluation)."""

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
    info: dict[str, Any] = {"train_full": len(train), "empty_classes": int(train.info.get("empty_classes", 0)),
                            "shard_problems": int(train.info.get("shard_problems", 0))}
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
                      geometry_batches: int = 20, workers: int = 0, skips: Skips | None = None) -> dict[str, float]:
    """:func:`evaluate` of streamed data: the bank's and the test split's features extracted as they are decoded
    (ImageNet's evaluation crops, resize 256 and centre 224 at the recipe's size, :func:`vision.stream.eval_images`),
    so memory holds features, not images; kNN and the probe on them; the geometry of the projections on the first
    ``geometry_batches`` x 256 test crops, augmented as in training."""
    tf = EvalTransform(recipe).to(device)
    was_training = model.training
    model.eval()
    size = recipe.size

    def feats(source: Source) -> tuple[Tensor, Tensor]:
        hs, ys = [], []
        for x, y in eval_images(source, size, batch_size, workers, skips):
            hs.append(model.features(tf(to_device(x, device))).float().cpu())
            ys.append(y)
        return torch.cat(hs), torch.cat(ys)

    (tr, tr_y), (te, te_y) = feats(data.bank), feats(data.test)
    clf = ClassificationEvaluator(torch.empty(0), tr_y, torch.empty(0), te_y, data.num_classes, knn_k, knn_t, linear,
                                  batch_size)
    out = clf.from_features(tr, te)
    if geometry_batches > 0:
        n = min(len(data.test), 256 * geometry_batches)
        first = data.test.take(np.arange(n))
        images = torch.cat([x for x, _ in eval_images(first, size, batch_size, workers, skips)])
        aug = ViewAugment(recipe, views=2).to(device)
        out.update(GeometryEvaluator(images.to(device), aug, batch_size=min(256, n), max_batches=geometry_batches,
                                     seed=seed)(lambda v: model(v.to(device)).float()))
    model.train(was_training)
    return out
