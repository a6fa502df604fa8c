"""``suite graph tu`` (pretrain + evaluate, one seed) and ``suite graph tu-eval`` (reload a saved
encoder and evaluate it).

    suite graph tu --dataset MUTAG --loss macl --seed 0 [--epochs 20 --aug random4 ...]
    suite graph tu --config graph/configs/tu.yaml --loss-hparams tau0=0.1
    torchrun --nproc_per_node 2 -m suite graph tu --dataset PROTEINS
    suite graph tu-eval runs/MUTAG_macl_seed0.pt
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from suite.config import add_config_args, config_from_args

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tu.yaml"


def add_tu_parser(gsub: Any) -> argparse.ArgumentParser:
    from graph.tu.graphcl import TUConfig

    p = gsub.add_parser("tu", help="GraphCL pretraining on a TU dataset + SVM evaluation (results to the registry)")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML config (CLI flags override it)")
    p.add_argument("--rerun", action="store_true", help="rerun a config already finished in the registry")
    add_config_args(p, TUConfig)
    p.set_defaults(func=cmd_tu)
    e = gsub.add_parser("tu-eval", help="reload a saved encoder and evaluate it (SVM protocol)")
    e.add_argument("checkpoint")
    e.add_argument("--data-root", default=None)
    e.add_argument("--seed", type=int, default=None, help="fold seed (default: the training seed)")
    e.set_defaults(func=cmd_tu_eval)
    return p


def cmd_tu(args: argparse.Namespace) -> int:
    from graph.tu.graphcl import TUConfig
    from graph.tu.run import run_tu
    from suite import distributed as sd

    cfg = config_from_args(TUConfig, args, args.config)
    s = run_tu(cfg, rerun=args.rerun).info  # under torchrun the run owner sets up torch.distributed
    if sd.is_main() and s.get("acc") is not None:
        print(f"{cfg.dataset} {cfg.loss} seed {cfg.seed}: SVM accuracy (epoch {cfg.epochs}) {100 * s['acc']:.2f}"
              + (f"; epoch-10 accuracy {100 * s['acc_ep10']:.2f}" if s.get("acc_ep10") is not None else ""))
    return 0


def cmd_tu_eval(args: argparse.Namespace) -> int:
    from graph.tu.run import evaluate_checkpoint, summary_json

    print(summary_json(evaluate_checkpoint(args.checkpoint, args.data_root, args.seed)))
    return 0
