"""Every folder layout of an earlier version, read in one place: :func:`earlier_layout`.

A front-end reads only today's layout (a run folder's ``checkpoints/step-<N>.pt``, an export's ``config.json`` +
``model.safetensors`` + ``run.json``). What its earlier versions left on disk it declares as data, an
:class:`Earlier` (a :class:`suite.train.run.Task`'s ``earlier``, or beside an export loader), and this module alone
interprets it. The run owner asks :func:`earlier_layout` before it resumes (the checkpoints of an earlier layout,
resumed when the folder holds none of today's) and :func:`suite.pretrained.load_export` before it loads (an earlier
export file, converted into today's export: config, weights, run record). Files are read as data only
(``torch.load(weights_only=True)``, :func:`suite.safeio.load_tensors`); a file that holds the wrong data is a
``ValueError`` naming it and what is wrong.

Example (a front-end's whole knowledge of its earlier layouts)::

    EARLIER = Earlier(checkpoints=("epoch*.pt",),                        # <run folder>/epoch<N>.pt
                      folders=(OldFolder("runs/vision"),),               # runs/vision/<stem>-<experiment hash>
                      files={"simcse_head.safetensors": "simcse_head.pt"})
    found = earlier_layout(EARLIER, folder, cfg=cfg, stem=task.stem(cfg))
    found.checkpoints   # [Path('.../epoch0001.pt'), ...], oldest first
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from torch import Tensor

Field = tuple[str, Callable[[Any], bool]]  # (what the value must be, its check): suite.pretrained's field rule


@dataclass(frozen=True)
class OldHash:
    """The folder hash of an earlier naming: :func:`suite.registry.config_hash` (first ``length`` characters) of the
    config's fields less ``drop``, plus ``constants``, plus ``renamed`` (earlier name -> today's field, its value)."""

    drop: tuple[str, ...] = ()
    constants: dict[str, Any] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    length: int = 8


@dataclass(frozen=True)
class OldFolder:
    """Run folders an earlier version wrote outside today's runs root: ``<root>/<stem>-<hash>`` (relative to the
    working folder), the hash today's experiment hash (``hash`` None) or an :class:`OldHash`."""

    root: str
    hash: OldHash | None = None


@dataclass(frozen=True)
class OldExport:
    """An export of an earlier version: one torch file of tensors and plain data.

    ``files``: where it lies in a folder (names or globs, tried in order; the highest ``epoch<N>`` of a glob); a file
    path is read itself. ``weights``: the entry holding the weights (a file's shape is the first of
    ``Earlier.exports`` whose ``weights`` entry it has); ``prefix``: only the weights under it, prefix removed.
    ``config``: the entry holding what rebuilds the module ("" the file's top level), whose ``fields`` (today's
    name -> earlier name, checked with the loader's ``required``) make today's ``config.json`` (``keep_config``: the
    entry's other keys too). The run record (``run.json``): ``record`` today's key -> an earlier entry that is a
    mapping (``drop``: keys left out, e.g. retired run options); ``facts`` today's key (a tuple: a nested key) -> a key
    of the entry ``facts_from`` ("" the top level; a missing entry or key is left out)."""

    files: tuple[str, ...]
    weights: str
    prefix: str = ""
    config: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    keep_config: bool = False
    record: dict[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    facts_from: str = ""
    facts: dict[Any, str] = field(default_factory=dict)
    what: str = "an export"


@dataclass(frozen=True)
class Earlier:
    """What a front-end's earlier versions left on disk (data; read only by this module).

    ``checkpoints``: globs, in the run folder, of checkpoints in the engine's format under an earlier name (resumed
    when the folder holds none of today's); ``folders``: run folders of earlier namings (:class:`OldFolder`), whose
    checkpoints are resumed too; ``removed_when_built``: the earlier checkpoints in the run folder are removed once
    the run has finished (its model is the result). ``entries``: a checkpoint entry's earlier name (today's ->
    earlier). ``files``: a file's (or folder's) earlier place in a run folder or export (today's -> earlier, relative;
    used when the earlier one exists). ``exports``: the shapes of an earlier export file (:class:`OldExport`)."""

    checkpoints: tuple[str, ...] = ()
    folders: tuple[OldFolder, ...] = ()
    removed_when_built: bool = False
    entries: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    exports: tuple[OldExport, ...] = ()


@dataclass
class Export:
    """An export as today's layout holds it: ``config`` (``config.json``), ``weights`` (``model.safetensors``),
    ``record`` (``run.json``: task, loss, config, metrics, run id), ``path`` where it was read, and ``earlier``
    whether it was converted from an earlier layout."""

    config: dict[str, Any]
    weights: dict[str, Tensor]
    record: dict[str, Any]
    path: Path
    earlier: bool = False


@dataclass
class Found:
    """What :func:`earlier_layout` found: resumable ``checkpoints`` (oldest first), the ``files`` of today's names
    that sit at their earlier place (today's name -> the path), and the ``export`` converted to today's (or None)."""

    checkpoints: list[Path] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    export: Export | None = None


def earlier_layout(earlier: Earlier, where: str | Path, *, cfg: Any = None, stem: str = "",
                   required: dict[str, Field] | None = None) -> Found:
    """The hook: what the earlier layouts ``earlier`` declares left at ``where`` (a run folder, an export folder or
    an export file). With ``cfg`` and ``stem`` (a run's) the earlier run folders are looked up too; ``required``
    (today's config fields and their checks) checks a converted export's config."""
    p = Path(where)
    found = Found()
    if p.is_dir():
        found.files = {now: p / old for now, old in earlier.files.items() if (p / old).exists()}
        folders = [p]
        if cfg is not None:
            folders += [Path(f.root) / f"{stem}-{_folder_hash(cfg, f.hash)}" for f in earlier.folders]
        found.checkpoints = [c for d in folders if d.is_dir() for g in earlier.checkpoints for c in sorted(d.glob(g))]
    if earlier.exports and cfg is None:
        found.export = _export(earlier.exports, p, required or {})
    return found


def upgrade_entries(earlier: Earlier, state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's entries under today's names (an entry of an earlier name renamed)."""
    out = dict(state)
    for now, old in earlier.entries.items():
        if now not in out and old in out:
            out[now] = out.pop(old)
    return out


def remove_when_built(earlier: Earlier, folder: Path) -> None:
    """Remove the earlier checkpoints of a finished run's folder (when ``earlier`` says its model is the result)."""
    if earlier.removed_when_built:
        for g in earlier.checkpoints:
            for c in folder.glob(g):
                c.unlink(missing_ok=True)


def _folder_hash(cfg: Any, rule: OldHash | None) -> str:
    from suite.config import experiment_hash, to_dict
    from suite.registry import config_hash

    if rule is None:
        return experiment_hash(cfg)
    d = {k: v for k, v in to_dict(cfg).items() if k not in rule.drop}
    return config_hash({**d, **rule.constants, **{old: getattr(cfg, now) for old, now in rule.renamed.items()}})[
        : rule.length]


def _locate(shapes: tuple[OldExport, ...], p: Path) -> Path | None:
    from suite.train.checkpoint import latest_checkpoint

    if p.is_file():
        return p
    if not p.is_dir():
        return None
    for name in (n for s in shapes for n in s.files):
        hit = latest_checkpoint(p / Path(name).parent, Path(name).name) if any(c in name for c in "*?[") else (
            p / name if (p / name).is_file() else None)
        if hit is not None:
            return hit
    return None


def _export(shapes: tuple[OldExport, ...], where: Path, required: dict[str, Field]) -> Export | None:
    """An earlier export file at ``where`` converted to today's :class:`Export`, or None when there is none."""
    from suite.train.checkpoint import load_checkpoint

    p = _locate(shapes, where)
    if p is None:
        return None
    state = load_checkpoint(p)
    shape = next((s for s in shapes if s.weights in state), None)
    if shape is None:
        raise ValueError(f"{p} is not {shapes[0].what} (no {' or '.join(repr(s.weights) for s in shapes)} entry)")
    names = ", ".join(shape.fields.values())
    if shape.config and shape.config not in state:
        raise ValueError(f"{p}: {shape.what} ({shape.weights!r} entry) with no {shape.config!r} entry, so the module "
                         f"cannot be rebuilt ({names})")
    src = state[shape.config] if shape.config else state
    if not isinstance(src, dict):
        raise ValueError(f"{p}: {shape.config!r} must be a mapping ({names}), got {type(src).__name__}")
    missing = sorted({*shape.fields.values(), *shape.record.values()} - set(src if shape.config else state))
    if missing and not shape.config:
        raise ValueError(f"{p} is not {shape.what} (missing {missing})")
    lacking = sorted(set(shape.fields.values()) - set(src))
    if lacking:
        raise ValueError(f"{p}: the {shape.config} lacks {lacking}")
    config = {**(src if shape.keep_config else {}), **{now: src[old] for now, old in shape.fields.items()}}
    for now, (what, ok) in required.items():
        if now in config and not ok(config[now]):
            at = f"{shape.config} " if shape.config else ""
            raise ValueError(f"{p}: {at}{shape.fields.get(now, now)} must be {what}, got {config[now]!r}")
    record: dict[str, Any] = {}
    for now, old in shape.record.items():
        if old not in state:
            raise ValueError(f"{p} is not {shape.what} (missing [{old!r}])")
        if not isinstance(state[old], dict):
            raise ValueError(f"{p}: {old} must be a mapping, got {type(state[old]).__name__}")
        record[now] = {k: v for k, v in state[old].items() if k not in shape.drop}
    facts = state.get(shape.facts_from, {}) if shape.facts_from else state
    if not isinstance(facts, dict):
        raise ValueError(f"{p}: {shape.facts_from} must be a mapping, got {type(facts).__name__}")
    for now, old in shape.facts.items():
        if old in facts:
            *outer, last = now if isinstance(now, tuple) else (now,)
            into = record
            for k in outer:
                into = into.setdefault(k, {})
            into[last] = facts[old]
    weights = state[shape.weights]
    if not isinstance(weights, dict):
        raise ValueError(f"{p}: the weights must be a mapping of tensors, got {type(weights).__name__}")
    if shape.prefix:
        weights = {k[len(shape.prefix):]: v for k, v in weights.items()
                   if isinstance(k, str) and k.startswith(shape.prefix)}
    return Export(config, weights, record, p, earlier=True)


__all__ = ["Earlier", "Export", "Found", "OldExport", "OldFolder", "OldHash", "earlier_layout", "remove_when_built",
           "upgrade_entries"]
