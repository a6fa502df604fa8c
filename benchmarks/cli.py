"""``suite bench ...``: every module of this package tree (the runner, the tables, the report, the measurements) that
defines its own ``register(subparsers)`` adds its sub-command (registered through the ``suite.cli`` entry point)."""
from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import Any

import benchmarks


def _modules() -> list[str]:
    """Every module and package of ``benchmarks`` (not ``cli``, nothing private), sorted."""
    names = [m.name for m in pkgutil.walk_packages(benchmarks.__path__, prefix="benchmarks.")]
    return sorted(n for n in names if n != "benchmarks.cli" and not any(p.startswith("_") for p in n.split(".")))


def candidates() -> set[str]:
    """The names ``suite bench`` may take without importing anything: those of the modules and packages (a command is
    named after the module that registers it, or its package)."""
    return {n.rsplit(".", 1)[-1].replace("_", "-") for n in _modules()}


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run benchmarks and write their tables (benchmarks/results/*.md)")
    bsub = p.add_subparsers(dest="bench_command", metavar="BENCH")
    # import only the benchmark named on the command line (they import front-ends): the modules named like it, or
    # inside a package named like it; all of them for --help
    argv = sys.argv[1:]
    wanted = argv[argv.index("bench") + 1].replace("-", "_") if "bench" in argv[:-1] else None
    names = _modules()
    chosen = [n for n in names if wanted in n.split(".")[1:]] if wanted else []
    for name in chosen or names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # missing extra: report when invoked
            bad = bsub.add_parser(name.rsplit(".", 1)[-1].replace("_", "-"), help=f"(unavailable: {type(exc).__name__})")
            bad.set_defaults(func=lambda a, e=exc: (print(f"cannot load benchmark: {e}", file=sys.stderr), 2)[1])
            continue
        reg = getattr(module, "register", None)
        if reg is not None and reg.__module__ == name:  # its own command, not one a package re-exports
            reg(bsub)
    p.set_defaults(func=lambda a: (p.print_help(), 1)[1])
