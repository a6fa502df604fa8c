"""``suite graph pretrain-mol``, ``suite graph finetune-mol`` and ``suite graph predict`` (registered by
``graph/cli.py``).

    suite graph pretrain-mol --profile cpu --corpus zinc --loss macl --out ckpt/macl
    suite graph finetune-mol --dataset bbbp --init ckpt/macl --seed 0
    suite graph finetune-mol --dataset bbbp --init none          # no-pretraining baseline
    suite graph finetune-mol --data my.csv --smiles-column smiles --target-columns logS,pKa --init ckpt/macl \
        --out runs/mine                                          # your own molecules; the model in runs/mine/export
    suite graph predict --model runs/mine --data new.csv --out preds.csv

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
        if cfg.data:  # what was fine-tuned on: the task (given or inferred) and the targets, said once
            print(f"{r['dataset']}: {r['task']} ({r['task_reason']}) on {len(r['targets'])} target(s): "
                  f"{', '.join(r['targets'])}")
        if r["metric"] == "rmse":
            print(f"{r['dataset']} ({r['loss']}) seed {r['seed']}: test RMSE last {r['test_rmse_last']:.4g} "
                  f"(MAE {r['test_mae_last']:.4g}), best-valid (epoch {int(r['best_epoch'])}) RMSE "
                  f"{r['test_rmse_bestval']:.4g} (MAE {r['test_mae_bestval']:.4g})")
        else:
            print(f"{r['dataset']} ({r['loss']}) seed {r['seed']}: test ROC-AUC last {100 * r['test_rocauc_last']:.2f}, "
                  f"best-valid (epoch {int(r['best_epoch'])}) {100 * r['test_rocauc_bestval']:.2f}")
        if r["skipped"] or r["non_numeric_labels"]:
            print(f"{r['dataset']}: {r['molecules']} molecules used, {r['skipped']} skipped (SMILES not "
                  f"featurised), {r['non_numeric_labels']} non-numeric label(s) treated as missing")
        if res.export is not None:
            print(f"model: {res.export} (suite graph predict --model {res.folder} --data new.csv)")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from graph.mol.predict import predict_file

    p = predict_file(args.model, args.data, smiles_column=args.smiles_column, out=args.out,
                     batch_size=args.batch_size, device=args.device)
    print(p.line)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=PROFILES, default="cpu", help="config profile (default cpu)")
    p.add_argument("--config", default=None, help="YAML config (overrides --profile)")


def register_mol(gsub: Any) -> None:
    """Add ``pretrain-mol``, ``finetune-mol`` and ``predict`` to the ``graph`` sub-parsers."""
    from graph.mol.finetune import FinetuneMolConfig
    from graph.mol.pretrain import PretrainMolConfig

    p = gsub.add_parser("pretrain-mol", help="contrastive GNN pretraining on molecules (GraphCL transfer setting)")
    _common(p)
    add_config_args(p, PretrainMolConfig)
    p.set_defaults(func=_cmd_pretrain)
    f = gsub.add_parser("finetune-mol", help="fine-tune on a MoleculeNet classification set (ROC-AUC) or on your own "
                                             "CSV (--data: classification or regression; the model is exported)")
    _common(f)
    add_config_args(f, FinetuneMolConfig)
    f.set_defaults(func=_cmd_finetune)
    pr = gsub.add_parser("predict", help="predict new molecules with a model fine-tuned on your own CSV (one row per "
                                         "input row)")
    pr.add_argument("--model", required=True, help="the fine-tuning's run folder or its export/")
    pr.add_argument("--data", required=True, help="a CSV of molecules with a SMILES column")
    pr.add_argument("--smiles-column", default=None, help="the SMILES column (default: the one the model was trained "
                                                          "on, else a column named smiles, else the first)")
    pr.add_argument("--out", default=None, help="the predictions CSV (default: <data stem>_preds.csv beside the data)")
    pr.add_argument("--batch-size", type=int, default=512, help="molecules per forward pass (default: 512)")
    pr.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
    pr.set_defaults(func=_cmd_predict)
    register_ecfp(gsub)


def _cmd_ecfp(args: argparse.Namespace) -> int:
    from graph.mol.ecfp import EcfpMolConfig, ecfp_mol

    res = ecfp_mol(config_from_args(EcfpMolConfig, args, args.config))
    i = res.info
    print(f"{i['dataset']} (ecfp-rf) seed {i['seed']}: test ROC-AUC {100 * i['test_rocauc']:.2f}, valid "
          f"{100 * i['valid_rocauc']:.2f} ({int(i['molecules'])} molecules, {int(i['tasks'])} tasks, forests "
          f"{i['fit_s']:.0f} s)")
    return 0


def register_ecfp(gsub: Any) -> None:
    """Add ``ecfp-mol`` (the Morgan-fingerprint random-forest baseline, :mod:`graph.mol.ecfp`)."""
    from graph.mol.ecfp import EcfpMolConfig

    e = gsub.add_parser("ecfp-mol", help="Morgan-fingerprint (ECFP4) random-forest baseline on a MoleculeNet set, "
                                         "same scaffold split and seeds as finetune-mol (ROC-AUC)")
    e.add_argument("--config", default=None, help="YAML config of your own")
    add_config_args(e, EcfpMolConfig)
    e.set_defaults(func=_cmd_ecfp)
