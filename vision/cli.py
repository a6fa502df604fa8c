"""``suite vision ...``: ``pretrain`` (SimCLR / MoCo-v2 with any loss) and ``eval --ckpt``.

    suite vision pretrain --dataset cifar10 --framework simclr --loss cacr --views 5 --encoder resnet18 \\
        --epochs 200 --batch-size 256
    suite vision pretrain --config vision/configs/digits_smoke.yaml --loss macl
    torchrun --nproc_per_node 4 -m suite vision pretrain ...      # DDP, negatives gathered over ranks
    suite vision eval --ckpt runs/pretrain-simclr/<run>         # its newest checkpoint (or a checkpoint file), by
                                                                # the run's protocol (probe, crops, bank)
    suite vision gmm --experiment mixture2d --loss simclr_l2   # t-SimCLR paper, Figure 1 (suite/gmm.py)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from suite.config import add_config_args, config_from_args


def _pretrain(args: argparse.Namespace) -> int:
    from vision.config import PretrainConfig
    from vision.train import pretrain

    cfg = config_from_args(PretrainConfig, args, args.config)
    res = pretrain(cfg)  # recorded in the default registry unless --no-registry (the run owner's rule)
    print(_summary(res.metrics) + f"; run folder {res.folder}")  # one line, as the other front-ends print
    if res.export:
        print(f"load it with: vision.models.Encoder.from_pretrained({str(res.export)!r}), or suite vision eval --ckpt "
              f"{res.folder}")
    if args.json:
        args.json.write_text(json.dumps({"metrics": res.metrics, "train": res.info["train"], "data": res.info["data"],
                                         "folder": str(res.folder), "export": str(res.export) if res.export else None},
                                        indent=2, default=str))
    return 0


def _summary(metrics: dict[str, Any]) -> str:
    """The headline figures of an evaluation in one line (every metric: --json FILE, or the registry)."""
    keys = [k for k in ("knn_acc", "linear_acc", "linear_train_acc", "knn_acc_top5") if k in metrics]
    shown = [f"{k} {metrics[k]:.4f}" for k in keys if isinstance(metrics[k], (int, float))]
    return " | ".join(shown) or f"{len(metrics)} metrics"


_EVAL_OVERRIDES = ("dataset", "data_root", "device", "eval_dataset", "knn_t", "eval_train_per_class",
                   "eval_test_per_class", "probe", "probe_epochs", "probe_lr", "probe_schedule", "eval_batch_size",
                   "workers")


def _eval(args: argparse.Namespace) -> int:
    from vision.train import evaluate_checkpoint

    # what the command changes of the run's protocol; the rest is the run's (its recorded config)
    overrides: dict[str, Any] = {k: getattr(args, k) for k in _EVAL_OVERRIDES if getattr(args, k) is not None}
    m = evaluate_checkpoint(args.ckpt, overrides, knn_k=args.knn_k or 0,
                            linear=False if args.no_linear else (True if args.linear else None),
                            registry=False if args.no_registry else None)
    print(_summary(m) + f"  (the run's protocol: suite results show; every metric: --json FILE)")
    if args.json:
        args.json.write_text(json.dumps(m, indent=2, default=str))
    return 0


def _gmm(args: argparse.Namespace) -> int:
    from suite.gmm import GMMConfig, run_gmm

    res = run_gmm(config_from_args(GMMConfig, args, args.config))
    print(json.dumps(res.metrics, indent=1))
    return 0


def register(sub: Any) -> None:
    from vision.config import PretrainConfig

    p = sub.add_parser("vision", help="image pretraining (SimCLR, MoCo-v2) with any loss; kNN / linear evaluation")
    vs = p.add_subparsers(dest="vision_command", metavar="COMMAND")
    pp = vs.add_parser("pretrain", help="pretrain an encoder, evaluate it, record the run")
    pp.add_argument("--config", default=None, help="YAML config (vision/configs/*.yaml); flags override it")
    add_config_args(pp, PretrainConfig)
    pp.add_argument("--json", type=Path, default=None, help="also write every metric and count to this JSON file")
    pp.set_defaults(func=_pretrain)
    pe = vs.add_parser("eval", help="kNN / linear probe / geometry of a checkpoint on the test split")
    pe.add_argument("--ckpt", required=True, help="a checkpoint file, or a run folder (its newest checkpoint)")
    pe.add_argument("--dataset", default=None, help="evaluate on another data set (default: the checkpoint's)")
    pe.add_argument("--data-root", dest="data_root", default=None)
    pe.add_argument("--device", default=None)
    pe.add_argument("--eval-dataset", dest="eval_dataset", default=None,
                    help="kNN / probe data of streamed data (default: the run's)")
    pe.add_argument("--knn-k", dest="knn_k", type=int, default=None, help="default: the run's")
    pe.add_argument("--knn-t", dest="knn_t", type=float, default=None, help="default: the run's")
    pe.add_argument("--eval-train-per-class", dest="eval_train_per_class", type=int, default=None,
                    help="kNN / probe bank images per class (default: the run's)")
    pe.add_argument("--eval-test-per-class", dest="eval_test_per_class", type=int, default=None,
                    help="test images per class (default: the run's)")
    pe.add_argument("--probe", choices=("features", "sgd"), default=None,
                    help="the linear probe (default: the run's): features (logistic regression on frozen features) "
                         "or sgd (ImageNet's protocol, streamed data)")
    pe.add_argument("--probe-epochs", dest="probe_epochs", type=int, default=None, help="default: the run's")
    pe.add_argument("--probe-lr", dest="probe_lr", type=float, default=None, help="default: the run's")
    pe.add_argument("--probe-schedule", dest="probe_schedule", choices=("moco", "simclr"), default=None,
                    help="the SGD probe's linear protocol, MoCo's or SimCLR's (default: the run's)")
    pe.add_argument("--eval-batch-size", dest="eval_batch_size", type=int, default=None)
    pe.add_argument("--workers", type=int, default=None, help="DataLoader workers decoding streamed images")
    lin = pe.add_mutually_exclusive_group()
    lin.add_argument("--no-linear", dest="no_linear", action="store_true", help="kNN only")
    lin.add_argument("--linear", action="store_true", help="the linear probe even where the run had none")
    pe.add_argument("--no-registry", dest="no_registry", action="store_true")
    pe.add_argument("--json", type=Path, default=None, help="also write every metric to this JSON file")
    pe.set_defaults(func=_eval)
    from suite.gmm import GMMConfig  # 2-D synthetic data: the core's own experiment, its command kept here

    pg = vs.add_parser("gmm", help="the t-SimCLR paper's Gaussian-mixture experiments (Sec. 3, Figure 1)")
    pg.add_argument("--config", default=None)
    add_config_args(pg, GMMConfig)
    pg.set_defaults(func=_gmm)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
