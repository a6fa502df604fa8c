"""The one typed config of ``suite vision pretrain`` (YAML in vision/configs/, CLI overrides)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from suite.config import RUN_OPTION, RunOptions


@dataclass
class PretrainConfig(RunOptions):
    # where and how it runs, not what (left out of the experiment config a resume must match): RunOptions, and the
    # fields marked RUN_OPTION here (eval_every, points, class_similarity, checkpoint_steps, workers)
    RUN_HELP: ClassVar[dict[str, str]] = {
        "out": "run folder: checkpoints/, the encoder export (export/) (default: "
               "runs/pretrain-<framework>/<dataset>-...-<experiment hash>)"}
    # run options of older versions: out_dir / run_name (now ``out``), ckpt_every (now ``checkpoint_every``)
    RETIRED_RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out_dir", "run_name", "ckpt_every")
    # what 0 means where an option is otherwise > 0: the untrained encoder evaluated (the random-initialisation
    # baseline of the vision tables and tests)
    ZERO_MEANS: ClassVar[dict[str, str]] = {"epochs": "the untrained encoder evaluated, a random-initialisation baseline"}
    # data
    dataset: str = field(default="cifar10", metadata={
        "help": "digits | cifar10 | cifar100 | stl10 (in memory) | folder:<path> (an ImageNet-style folder, streamed: "
                "train/<class>/*, val/ or test/) | wds:<pattern> (WebDataset shards, streamed; X-CLR's graph from each "
                "image's caption) | mem:<path> (a small folder of same-size images, decoded into memory)"})
    eval_dataset: str = field(default="", metadata={
        "help": "kNN / probe data of streamed training: folder:<path> (bank train/, test val/), or wds:<pattern> "
                "(the test shards; the bank is the training shards' classes) (\"\" = the training folder's splits)",
        "omit_default": True})
    data_root: str = field(default="", metadata={"help": "folder holding the data set (default: $SUITE_DATA)"})
    imbalance: Literal["none", "linear", "exponential"] = field(default="none", metadata={"help": "CACR imbalance rule"})
    imbalance_min_ratio: float = field(default=0.1, metadata={"help": "smallest class fraction of the exponential rule"})
    train_per_class: int = field(default=0, metadata={"help": "balanced training subset: images per class (0 = all)"})
    eval_train_per_class: int = field(default=0, metadata={"help": "kNN/probe training images per class of the balanced "
                                                                     "training split (0 = all)"})
    eval_test_per_class: int = field(default=0, metadata={"help": "test images per class for evaluation (0 = all)"})
    val_per_class: int = field(default=0, metadata={
        "help": "hold out this many training images per class (one fixed split, the same for every seed) as a "
                "validation set: removed from pretraining and from the kNN/probe bank, evaluated instead of the test "
                "split and logged as split 'val' (model selection, e.g. a temperature search; 0 = off)",
        "omit_default": True})
    # augmentation
    recipe: str = field(default="auto", metadata={"help": "cifar | stl10 | imagenet (MoCo v2's) | simclr-imagenet "
                                                          "(SimCLR's) | digits | auto (by dataset)"})
    image_size: int = field(default=0, metadata={"help": "crop size (0 = recipe default)"})
    views: int = field(default=2, metadata={"help": "views per image (K = views - 1 positives for cacr/cmc)"})
    # model
    encoder: Literal["resnet18", "resnet50", "alexnet", "convnet"] = "resnet18"
    stem: Literal["auto", "imagenet", "cifar"] = field(default="auto", metadata={
        "help": "ResNet stem: imagenet (7x7 conv + max-pool, torchvision's) or cifar (3x3, no max-pool); auto: "
                "imagenet for crops of 128 pixels and more", "omit_default": True})
    width: float = field(default=0.0, metadata={"help": "encoder width; 0 = the encoder's own (resnet18 64, alexnet 1.0, convnet 32)"})
    proj_dim: int = 128
    proj_hidden: int = 0
    proj_head: Literal["auto", "simclr", "mocov2"] = field(default="auto", metadata={
        "help": "projection head: simclr (Linear-BN-ReLU-Linear) or mocov2 (Linear-ReLU-Linear, MoCo v2's); auto: "
                "mocov2 with --framework moco, simclr otherwise", "omit_default": True})
    init: str = field(default="", metadata={
        "help": "start from the encoder (backbone and projection head) of a finished run folder (its export/) or an "
                "encoder export (model.safetensors + config.json), e.g. to fine-tune a SimCLR encoder with X-CLR; the "
                "encoder settings must match (\"\" = random initialisation)", "omit_default": True})
    # framework and loss
    framework: Literal["simclr", "moco"] = "simclr"
    loss: str = "infonce"
    loss_hparams: dict[str, Any] = field(default_factory=dict)
    moco_momentum: float = 0.99
    queue_size: int = 4096
    bn_splits: int = field(default=1, metadata={"help": "MoCo key-encoder BN chunks (Shuffle-BN)"})
    cross_rank_bn: bool = field(default=True, metadata={
        "help": "under torch.distributed: SimCLR's BatchNorm statistics over the global batch (SyncBatchNorm), MoCo's "
                "key batch shuffled across ranks (Shuffle-BN); off: each rank's own batch", "omit_default": True})
    iou_weights: bool = field(default=False, metadata={"help": "IoU-weighted positive pairs, p ~ exp(IoU / iou_tau) "
                                                                "(t-SimCLR Sec. 4.1, Fig. 2a; any loss taking weights)"})
    iou_tau: float = 1.0
    text_model: str = field(default="", metadata={"help": "X-CLR's class graph: a sentence-transformers model for the "
                                                            "captions (default: packaged all-MiniLM-L6-v2); 'labels' = "
                                                            "hard label graph; 'random' or 'random:<seed>' = a seeded "
                                                            "random graph per class pair (X-CLR Table 8)"})
    caption_template: str = "a photo of a {}"
    class_names: str = field(default="", metadata={
        "help": "X-CLR's caption graph: a file of '<class folder><TAB><name>' lines naming every class (default: the "
                "folder names, with ImageNet's WordNet ids named from the shipped vision/assets/imagenet_classes.tsv)",
        "omit_default": True})
    # optimisation
    epochs: int = 200
    batch_size: int = 256
    optimizer: Literal["sgd", "adam", "lars"] = "sgd"
    lr: float = field(default=0.0, metadata={"help": "0 = 0.06 * batch_size / 256 for sgd, 1e-3 for adam, 0.3 * "
                                                     "batch_size / 256 for lars (0.075 * sqrt(batch) with "
                                                     "--lr-scaling sqrt); the global batch counts"})
    lr_scaling: Literal["none", "linear", "sqrt"] = field(default="none", metadata={
        "help": "lr is a base scaled by the global batch: linear lr * B / 256, sqrt lr * sqrt(B) (SimCLR, MACL App. "
                "B.1); none: lr as given", "omit_default": True})
    lars_eta: float = field(default=0.001, metadata={"help": "LARS trust coefficient (SimCLR: 0.001)",
                                                     "omit_default": True})
    momentum: float = 0.9
    weight_decay: float = 5e-4
    warmup_epochs: int = 0
    max_steps_per_epoch: int = field(default=0, metadata={"help": "cap on steps per epoch (0 = full epochs)"})
    bf16: bool = field(default=False, metadata={"help": "bfloat16 autocast for the encoder"})
    grad_cache_chunk: int = field(default=0, metadata={"help": "gradient caching (SimCLR): encode the batch in chunks "
                                                                "of K images; BatchNorm sees chunks, so K is part of "
                                                                "the experiment (0 = off)", "omit_default": True})
    seed: int = 0
    # evaluation and output
    eval_every: int = field(default=0, metadata={"help": "evaluate every k epochs (0 = at the end only)",
                                                 RUN_OPTION: True})
    knn_k: int = 200
    knn_t: float = 0.1
    linear_probe: bool = True
    probe: Literal["features", "sgd"] = field(default="features", metadata={
        "help": "the linear probe: features (logistic regression on the frozen features of un-augmented images) or "
                "sgd (ImageNet's protocol, streamed data only: a linear layer on the frozen backbone trained by SGD on "
                "random resized crops and flips, MoCo's schedule, evaluated on centre crops)", "omit_default": True})
    probe_epochs: int = field(default=100, metadata={"help": "--probe sgd: epochs (MoCo / MACL: 100)",
                                                     "omit_default": True})
    probe_lr: float = field(default=30.0, metadata={"help": "--probe sgd: learning rate (MoCo v2: 30; MACL: 10), "
                                                            "divided by 10 at 60 %% and 80 %% of the epochs (--probe-"
                                                            "schedule moco), or the cosine's peak (simclr)",
                                                    "omit_default": True})
    probe_schedule: Literal["moco", "simclr"] = field(default="moco", metadata={
        "help": "--probe sgd: moco (MoCo's linear protocol: momentum 0.9, the rate /10 at 60 %% and 80 %% of the "
                "epochs) or simclr (SimCLR's, App. B.6: Nesterov momentum 0.9, cosine decay, no weight decay)",
        "omit_default": True})
    eval_batch_size: int = 512
    geometry_batches: int = field(default=20, metadata={"help": "test batches (256 images) for alignment/uniformity/H(X-|X)"})
    points: int = field(default=0, metadata={
        "help": "with proj_dim 2: log the 2-D projections of this many test images (balanced over classes) to the "
                "registry for the report's pictures (split test-2d; 0 = off)", "omit_default": True, RUN_OPTION: True})
    class_similarity: int = field(default=0, metadata={
        "help": "log the mean cosine similarity of backbone features between every pair of classes over this many "
                "test images per class (X-CLR Fig. 4 / App. A.6: 100), split 'class-sim' (0 = off)",
        "omit_default": True, RUN_OPTION: True})
    checkpoint_steps: int = field(default=0, metadata={
        "help": "also checkpoint every N optimiser steps, in the middle of an epoch (a long ImageNet epoch on a "
                "cluster that may preempt it; 0: off)", "omit_default": True, RUN_OPTION: True})
    workers: int = field(default=-1, metadata={
        "help": "DataLoader workers decoding streamed images (-1: up to 4 on a GPU, none on the CPU)",
        "omit_default": True, RUN_OPTION: True})
