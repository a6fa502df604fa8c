"""Where the committed results live: the tables' folder and the registry snapshot they are built from, and the one
rule that keeps them whole: a file of :data:`RESULTS` is written only from :data:`SNAPSHOT` (issue 80).

Every command that renders a results file (``suite bench report``, each table's command, the measurements' tables,
``make gpu-all``) asks :func:`results_target` where to write. Built from the snapshot, a file goes to its committed
place; built from any other registry (a newcomer's local ``results/registry.sqlite``, a tiny CPU run), it goes to
:data:`LOCAL` (``results/tables/``, ignored by git) unless ``--out`` names another place, and an ``--out`` inside
:data:`RESULTS` is refused with one line. Runs reach the committed files only through the snapshot: ``suite results
export --format jsonl`` merges them into it, then ``suite bench report --registry benchmarks/results/registry.jsonl``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SNAPSHOT = RESULTS / "registry.jsonl"
LOCAL = Path("results") / "tables"  # relative to the working folder, as the default registry is (git-ignored)


def is_snapshot(registry: Any) -> bool:
    """Whether ``registry`` (a path or URL, or a :class:`suite.registry.Registry` opened from a ``.jsonl`` file, whose
    ``source`` names it) is the committed snapshot."""
    spec = getattr(registry, "source", registry)
    if spec is None or "://" in str(spec):
        return False
    try:
        return Path(str(spec)).resolve() == SNAPSHOT.resolve()
    except OSError:
        return False


def inside_results(path: Path) -> bool:
    """Whether ``path`` is the committed results folder or lies in it."""
    p, root = Path(path).resolve(), RESULTS.resolve()
    return p == root or root in p.parents


def results_target(out: Path | str | None, default: Path, registry: Any, local: Path | None = None) -> Path:
    """Where a results file built from ``registry`` is written: ``out`` where given, else ``default`` (its committed
    place in :data:`RESULTS`) when the registry is the snapshot, else ``local`` (default: :data:`LOCAL` under the
    same name). Raises
    ValueError (one line, before anything is measured or written) for an ``out`` inside :data:`RESULTS` built from
    another registry: the committed files would no longer rebuild from the snapshot."""
    if out is not None:
        target = Path(out)
    else:
        target = default if is_snapshot(registry) else (local or LOCAL / Path(default).name)
    if inside_results(target) and not is_snapshot(registry):
        spec = getattr(registry, "shown", None) or registry or "$SUITE_REGISTRY"
        raise ValueError(f"refusing to overwrite committed {_shown(target)} from registry {spec}: the committed results "
                         f"are built from {_shown(SNAPSHOT)} only; write elsewhere with --out (the default "
                         f"{LOCAL}/), or merge the runs into the snapshot (suite results export --format jsonl) first")
    return target


def _shown(path: Path) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(RESULTS.resolve().parents[1]))
    except ValueError:
        return str(p)
