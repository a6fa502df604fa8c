"""``suite vision ...``: ``pretrain`` (SimCLR / MoCo-v2 with any loss) and ``eval --ckpt``.

    suite vision pretrain --dataset cifar10 --framework simclr --loss cacr --views 5 --encoder resnet18 \\
        --epochs 200 --batch-size 256
    suite vision pretrain --config vision/configs/digits_smoke.yaml --loss macl
    torchrun --nproc_per_node 4 -m suite vision pretrain ...      # DDP, negatives gathered over ranks
    suite vision eval --ckpt runs/pretrain-simclr/<run>         # its newest checkpoint (or a checkpoint file)
    suite vision gmm --experiment mixture2d --loss simclr_l2   # t-SimCLR paper, Figure 1 (suite/gmm.py)
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from suite.config import add_config_args, config_from_args


def _pretrain(args: argparse.Namespace) -> int:
    from vision.config import PretrainConfig
    from vision.train import pretrain

    cfg = config_from_args(PretrainConfig, args, args.config)
    res = pretrain(cfg)  # recorded in the default registry unless --no-registry (the run owner's rule)
    print(json.dumps({"metrics": res.metrics, "train": res.info["train"], "data": res.info["data"],
                      "folder": str(res.folder), "export": str(res.export) if res.export else None},
                     indent=2, default=str))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from vision.train import evaluate_checkpoint

    overrides: dict[str, Any] = {k: v for k, v in (("dataset", args.dataset), ("data_root", args.data_root),
                                                   ("device", args.device)) if v}
    if args.eval_train_per_class:
        overrides["eval_train_per_class"] = args.eval_train_per_class
    m = evaluate_checkpoint(args.ckpt, overrides, knn_k=args.knn_k, linear=not args.no_linear,
                            registry=False if args.no_registry else None)
    print(json.dumps(m, indent=2))
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
    pp.set_defaults(func=_pretrain)
    pe = vs.add_parser("eval", help="kNN / linear probe / geometry of a checkpoint on the test split")
    pe.add_argument("--ckpt", required=True, help="a checkpoint file, or a run folder (its newest checkpoint)")
    pe.add_argument("--dataset", default=None, help="evaluate on another data set (default: the checkpoint's)")
    pe.add_argument("--data-root", dest="data_root", default=None)
    pe.add_argument("--device", default=None)
    pe.add_argument("--knn-k", dest="knn_k", type=int, default=0)
    pe.add_argument("--eval-train-per-class", dest="eval_train_per_class", type=int, default=0)
    pe.add_argument("--no-linear", dest="no_linear", action="store_true")
    pe.add_argument("--no-registry", dest="no_registry", action="store_true")
    pe.set_defaults(func=_eval)
    from suite.gmm import GMMConfig  # 2-D synthetic data: the core's own experiment, its command kept here

    pg = vs.add_parser("gmm", help="the t-SimCLR paper's Gaussian-mixture experiments (Sec. 3, Figure 1)")
    pg.add_argument("--config", default=None)
    add_config_args(pg, GMMConfig)
    pg.set_defaults(func=_gmm)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
