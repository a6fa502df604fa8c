"""``suite text train ...`` and ``suite text eval ...``.

    suite text train --loss macl --backbone default --data wiki.txt --out runs/macl
    suite text train --config text/configs/unsup_minilm.yaml --loss cacr --seed 1
    suite text eval --model runs/macl --tasks all
    suite text mlm --out models:bert-mini-english    # the MLM start model (text/mlm/)
Under torchrun, ``train`` runs DDP (in-batch negatives gathered across ranks by the losses).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from suite.config import add_config_args, config_from_args


def _train(args: argparse.Namespace) -> int:
    from text.eval.senteval import EvalConfig, evaluate_model, summary_line
    from text.methods.simcse import SimCSEConfig, train_simcse

    cfg = config_from_args(SimCSEConfig, args, args.config)
    if args.final_eval != "none":  # its data checked before hours of training, not after
        from text.data import senteval_root

        if not senteval_root().is_dir():
            raise ValueError(f"--final-eval {args.final_eval} evaluates on SentEval's data, not found: {senteval_root()}; "
                             "set SUITE_DATA to the data root holding senteval/downstream, or train without it with "
                             "--final-eval none")
    res = train_simcse(cfg)
    out = str(res.export or res.folder)
    dev = (f"best STS-B dev Spearman {100 * res.info['best_stsb_dev']:.2f}" if cfg.dev_eval else
           "no STS-B dev evaluation (the last model)")
    print(f"{dev} after {res.steps} steps; {res.info['sentences_per_s']:.1f} sentences/s; saved to {out}")
    print(f"load it with: SentenceTransformer({out!r})  (sentence_transformers), or suite text eval --model {out}")
    if args.final_eval != "none":
        m = evaluate_model(EvalConfig(model=out, tasks=args.final_eval, label=cfg.loss, seed=cfg.seed))
        print(summary_line(m))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from text.eval.senteval import EvalConfig, evaluate_model, summary_line

    cfg = config_from_args(EvalConfig, args, args.config)
    m = evaluate_model(cfg)
    print(summary_line(m, cfg.aggregation))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(m, f, indent=1)
    return 0


def _mlm(args: argparse.Namespace) -> int:
    from text.mlm import MLMConfig, built_model, pretrain_mlm

    res = pretrain_mlm(config_from_args(MLMConfig, args, args.config))
    if res.reused is None:  # not already built
        val = res.metrics
        print(f"MLM: {res.steps} steps ({res.info['epochs']:.2f} epochs) in {res.wall_s:.0f} s; held-out "
              f"loss {val.get('mlm_loss', float('nan')):.3f}, masked-token accuracy {val.get('mlm_acc', float('nan')):.3f}; "
              f"saved to {res.folder} (the model: {res.export or built_model(res.folder)})")
    return 0


def register(sub: Any) -> None:
    from text.eval.senteval import EvalConfig
    from text.methods.simcse import SimCSEConfig

    p = sub.add_parser("text", help="sentence embeddings: SimCSE with any loss, SentEval STS/transfer evaluation")
    tsub = p.add_subparsers(dest="text_command", metavar="COMMAND")
    tr = tsub.add_parser("train", help="train SimCSE (unsup: dropout views; sup: NLI triplets)")
    tr.add_argument("--config", default=None, help="YAML file (text/configs/*.yaml); flags override it")
    tr.add_argument("--final-eval", choices=("none", "sts", "transfer", "all"), default="none")
    add_config_args(tr, SimCSEConfig)
    tr.set_defaults(func=_train)
    mlm = tsub.add_parser("mlm", help="pretrain a small BERT from scratch with masked-language modelling (a start "
                                      "model that is not contrastive)")
    mlm.add_argument("--config", default=None)
    from text.mlm import MLMConfig

    add_config_args(mlm, MLMConfig)
    mlm.set_defaults(func=_mlm)
    ev = tsub.add_parser("eval", help="SentEval-protocol evaluation of a saved model")
    ev.add_argument("--config", default=None)
    ev.add_argument("--json", default=None, help="also write the metrics to this JSON file")
    add_config_args(ev, EvalConfig)
    ev.set_defaults(func=_eval)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
