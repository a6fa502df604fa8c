"""``suite vision ...``: ``pretrain`` (SimCLR / MoCo-v2 with any loss) and ``eval --ckpt``.

    suite vision pretrain --dataset cifar10 --framework simclr --loss cacr --views 5 --encoder resnet18 \\
        --epochs 200 --batch-size 256
    suite vision pretrain --config vision/configs/digits_smoke.yaml --loss macl
    torchrun --nproc_per_node 4 -m suite vision pretrain ...      # DDP, negatives gathered over ranks
    suite vision eval --ckpt runs/vision/<run>/epoch0200.pt
    suite vision gmm --experiment mixture2d --loss simclr_l2   # t-SimCLR paper, Figure 1
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from suite.config import add_config_args, config_from_args, load_config


def _pretrain(args: argparse.Namespace) -> int:
    from suite.registry import Registry
    from vision.config import PretrainConfig
    from vision.train import pretrain

    cfg = config_from_args(PretrainConfig, args, args.config)
    res = pretrain(cfg, Registry() if cfg.registry else None)
    if "metrics" in res:
        print(json.dumps({"metrics": res["metrics"], "train": res.get("train", {}), "data": res["data"],
                          "ckpt_dir": res["ckpt_dir"]}, indent=2, default=str))
    return 0


def _eval(args: argparse.Namespace) -> int:
    import torch

    from suite.registry import Registry
    from suite.train import load_checkpoint
    from vision.config import PretrainConfig
    from suite.train import resolve_device
    from vision.train import build_method, evaluate, prepare_data, recipe_for

    state = load_checkpoint(args.ckpt)
    overrides: dict[str, Any] = {k: v for k, v in (("dataset", args.dataset), ("data_root", args.data_root),
                                                   ("device", args.device)) if v}
    if args.eval_train_per_class:
        overrides["eval_train_per_class"] = args.eval_train_per_class
    cfg = load_config(PretrainConfig, None, {**state["config"], **overrides})
    device = resolve_device(cfg.device)
    _, data, _ = prepare_data(cfg)
    recipe = recipe_for(cfg, data)
    method = build_method(cfg, data, recipe)
    method.load_state_dict(state["model"] if "model" in state else state["method"])  # engine layout, or older
    method.to(device)
    torch.manual_seed(cfg.seed)
    m = evaluate(method.query_encoder, data, recipe, device, knn_k=args.knn_k or cfg.knn_k, knn_t=cfg.knn_t,  # type: ignore[arg-type]
                 linear=not args.no_linear, batch_size=cfg.eval_batch_size, seed=cfg.seed)
    print(json.dumps(m, indent=2))
    if not args.no_registry:
        loss = method.loss  # type: ignore[union-attr]
        with Registry().run(modality="vision", task="eval", dataset=cfg.dataset, loss=loss.name,
                            loss_hparams=loss.hparams(), config={**dataclasses.asdict(cfg), "ckpt": str(args.ckpt)},
                            seed=cfg.seed) as run:
            run.log_many(m, split="test", step=int(state.get("epoch", 0)))
    return 0


def _gmm(args: argparse.Namespace) -> int:
    from vision.gmm import GMMConfig, run_gmm

    m = run_gmm(config_from_args(GMMConfig, args, args.config))
    print(json.dumps(m, indent=1))
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
    pe.add_argument("--ckpt", required=True)
    pe.add_argument("--dataset", default=None, help="evaluate on another data set (default: the checkpoint's)")
    pe.add_argument("--data-root", dest="data_root", default=None)
    pe.add_argument("--device", default=None)
    pe.add_argument("--knn-k", dest="knn_k", type=int, default=0)
    pe.add_argument("--eval-train-per-class", dest="eval_train_per_class", type=int, default=0)
    pe.add_argument("--no-linear", dest="no_linear", action="store_true")
    pe.add_argument("--no-registry", dest="no_registry", action="store_true")
    pe.set_defaults(func=_eval)
    from vision.gmm import GMMConfig

    pg = vs.add_parser("gmm", help="the t-SimCLR paper's Gaussian-mixture experiments (Sec. 3, Figure 1)")
    pg.add_argument("--config", default=None)
    add_config_args(pg, GMMConfig)
    pg.set_defaults(func=_gmm)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
