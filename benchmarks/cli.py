"""``suite bench ...``: the benchmark scripts behind one sub-command (registered by entry point)."""
from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run benchmarks and write their tables")
    bsub = p.add_subparsers(dest="bench_command", metavar="BENCH")
    from benchmarks import losses

    losses.register(bsub)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
