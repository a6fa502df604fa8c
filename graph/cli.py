"""``suite graph ...``: the graph front-end's commands.

- ``suite graph tu --dataset MUTAG --loss macl --seed 0``: GraphCL pretraining on a TU
  dataset with any loss of the core, SVM evaluation, results in the registry.
- ``suite graph pretrain-mol`` / ``finetune-mol`` / ``predict``: added by :mod:`graph.mol.cli` when present.
"""
from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the ``graph`` parser and its sub-commands to ``sub`` (the ``suite`` sub-parsers)."""
    p = sub.add_parser("graph", help="graph contrastive learning (GraphCL on TU datasets, molecules)")
    gsub = p.add_subparsers(dest="graph_command", metavar="GRAPH_COMMAND")
    _register_tu(gsub)
    try:  # molecule commands (owned by graph/mol/cli.py)
        from graph.mol.cli import register_mol
    except ImportError:
        pass
    else:
        register_mol(gsub)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])


def _register_tu(gsub: Any) -> None:
    from graph.tu.cli import add_tu_parser

    add_tu_parser(gsub)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="suite")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["graph", *(argv or [])])
    return int(args.func(args) or 0)
