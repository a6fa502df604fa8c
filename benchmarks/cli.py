"""``suite bench ...``: every benchmark module in this package that defines ``register(subparsers)``
becomes a sub-command (registered through the ``suite.cli`` entry point)."""
from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import benchmarks


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run benchmarks and write their tables (benchmarks/results/*.md)")
    bsub = p.add_subparsers(dest="bench_command", metavar="BENCH")
    # import only the benchmark named on the command line (they import front-ends); all for --help
    argv = sys.argv[1:]
    wanted = argv[argv.index("bench") + 1].replace("-", "_") if "bench" in argv[:-1] else None
    names = {m.name for m in pkgutil.iter_modules(benchmarks.__path__)}
    if wanted not in names:
        wanted = None
    for mod in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if mod.name in ("cli",) or mod.name.startswith("_"):
            continue
        if wanted and not wanted.startswith("-") and mod.name != wanted:
            continue
        try:
            module = importlib.import_module(f"benchmarks.{mod.name}")
        except Exception as exc:  # missing extra: report when invoked
            bad = bsub.add_parser(mod.name.replace("_", "-"), help=f"(unavailable: {type(exc).__name__})")
            bad.set_defaults(func=lambda a, e=exc: (print(f"cannot load benchmark: {e}", file=sys.stderr), 2)[1])
            continue
        if hasattr(module, "register"):
            module.register(bsub)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
