"""Argument parsing for ``suite graph tu`` (the command body lives in :mod:`graph.methods.graphcl`)."""
from __future__ import annotations

import argparse
from typing import Any


def add_tu_parser(gsub: Any) -> argparse.ArgumentParser:
    p = gsub.add_parser("tu", help="GraphCL pretraining on a TU dataset + SVM evaluation")
    p.set_defaults(func=_not_ready)
    return p


def _not_ready(args: argparse.Namespace) -> int:
    raise ValueError("suite graph tu: not implemented yet")
