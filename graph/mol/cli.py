"""``suite graph pretrain-mol`` and ``suite graph finetune-mol`` (registered by ``graph/cli.py``).

    suite graph pretrain-mol --profile cpu --corpus zinc --loss macl --out ckpt/macl
    suite graph finetune-mol --dataset bbbp --init ckpt/macl --seed 0
    suite graph finetune-mol --dataset bbbp --init none          # no-pretraining baseline

Every config field is a flag; ``--profile`` (cpu | paper) picks ``graph/configs/mol_*_<profile>.yaml``
and ``--config`` a YAML file of your own. Under ``torchrun`` both commands run data-parallel.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from suite.config import add_config_args, config_from_args

if TYPE_CHECKING:
    from suite.train.run import RunResult

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
PROFILES = ("cpu", "paper")


def _config_path(kind: str, args: argparse.Namespace) -> Path:
    if args.config:
        return Path(args.config)
    return CONFIGS / f"mol_{kind}_{args.profile}.yaml"


def _run(kind: str, cls: type, fn: Callable[[Any], RunResult], args: argparse.Namespace) -> tuple[Any, RunResult | None]:
    """The config of ``kind`` from the profile / file and flags, ``fn(cfg)`` (under torchrun the run owner sets up
    torch.distributed); the run owner's result on the main rank (None elsewhere)."""
    from suite import distributed as sd

    cfg = config_from_args(cls, args, _config_path(kind, args))
    s = fn(cfg)
    return cfg, (s if sd.is_main() else None)


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from graph.mol.pretrain import PretrainMolConfig, pretrain

    _, s = _run("pretrain", PretrainMolConfig, pretrain, args)
    if s is not None:
        i = s.info
        print(f"pretrained {i['loss']} for {s.epochs} epochs on {i['molecules']} molecules "
              f"({i['skipped']} skipped): final loss {i['final_loss']:.4f}, {i['pretrain_mol_per_s']:.1f} molecules/s; "
              f"encoder: {s.export}")
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    from graph.mol.finetune import FinetuneMolConfig, finetune

    cfg, res = _run("finetune", FinetuneMolConfig, finetune, args)
    if res is not None:
        r = res.info
        print(f"{r['dataset']} ({r['loss']}) seed {r['seed']}: test ROC-AUC last {100 * r['test_rocauc_last']:.2f}, "
              f"best-valid (epoch {int(r['best_epoch'])}) {100 * r['test_rocauc_bestval']:.2f}")
        if r["skipped"] or r["non_numeric_labels"]:
            print(f"{cfg.dataset}: {r['molecules']} molecules used, {r['skipped']} skipped (SMILES not "
                  f"featurised), {r['non_numeric_labels']} non-numeric label(s) treated as missing")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=PROFILES, default="cpu", help="config profile (default cpu)")
    p.add_argument("--config", default=None, help="YAML config (overrides --profile)")


def register_mol(gsub: Any) -> None:
    """Add ``pretrain-mol`` and ``finetune-mol`` to the ``graph`` sub-parsers."""
    from graph.mol.finetune import FinetuneMolConfig
    from graph.mol.pretrain import PretrainMolConfig

    p = gsub.add_parser("pretrain-mol", help="contrastive GNN pretraining on molecules (GraphCL transfer setting)")
    _common(p)
    add_config_args(p, PretrainMolConfig)
    p.set_defaults(func=_cmd_pretrain)
    f = gsub.add_parser("finetune-mol", help="fine-tune on a MoleculeNet classification set (ROC-AUC)")
    _common(f)
    add_config_args(f, FinetuneMolConfig)
    f.set_defaults(func=_cmd_finetune)
