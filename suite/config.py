"""Typed dataclass configs with one override layer: YAML file, then CLI flags.

    cfg = load_config(TUConfig, "graph/configs/tu.yaml", overrides={"epochs": 5})
    parser = argparse.ArgumentParser(); add_config_args(parser, TUConfig)
    cfg = config_from_args(TUConfig, parser.parse_args())

The resolved config is recorded with every run (``dataclasses.asdict``) together with its hash.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from suite.registry import config_hash

C = TypeVar("C")


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader that refuses a key given twice in one mapping (PyYAML keeps the last one silently): a
    ``ConstructorError`` naming the key and its line. JSON is YAML, so a JSON file read with it is checked too.
    A merge key's (``<<: *base``) entries may be overridden, as YAML means them to be."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """``text`` parsed as YAML (or JSON) by :class:`UniqueKeyLoader`: a key given twice is a ``yaml.YAMLError``."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a safe loader


def _fields(cls: type) -> dict[str, dataclasses.Field]:  # type: ignore[type-arg]
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    return {f.name: f for f in dataclasses.fields(cls)}


def load_config(cls: type[C], path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                flags: bool = False) -> C:
    """Build ``cls`` from a YAML file (optional) and overrides; unknown keys and values of the wrong type (checked
    against the field's annotation: bool, int, float, str, Literal, list, dict, Optional) raise ``ValueError``
    naming the file or override (``flags``: the overrides are command-line flags, named as the user typed them,
    ``--batch-size``), the key and the value."""
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ValueError(f"config file not found: {p}")
        try:
            loaded = load_yaml(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise ValueError(f"config file {p}: not valid YAML{at} ({getattr(exc, 'problem', None) or exc})") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"config file {p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {p} must hold a mapping, got {type(loaded).__name__}")
        values.update(loaded)
        source.update({k: f"config file {p}" for k in loaded})
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(given)
    source.update({k: f"--{k.replace('_', '-')}" if flags else f"{cls.__name__} override" for k in given})
    known = _fields(cls)
    _rename(cls, values, source)
    unknown = sorted(set(values) - set(known), key=str)
    if unknown:
        hint = ("; a run takes one `seed` (a benchmark suite's `seeds:` list loops over seeds)"
                if "seeds" in unknown and "seed" in known else "")
        where = "; ".join(sorted({source[k] for k in unknown}))  # the config file the keys came from, or the overrides
        raise ValueError(f"{where}: unknown config key(s) {unknown} for {cls.__name__}; valid: {sorted(known)}{hint}")
    hints = typing.get_type_hints(cls)
    values = {k: _typed(k, v, hints[k], source[k]) for k, v in values.items()}
    for k, v in values.items():
        check_value(cls, k, v, f"{source[k]}: ")
    return cls(**values)


# Options that must be > 0 wherever a config has them (issue 69): temperatures, k, learning rates, epochs, batch sizes,
# intervals, sizes. 0 is taken only where it means something (ZERO_MEANS), or where it is the config's own default (a
# sentinel its help explains: lr 0 is the recipe's, limit 0 all); a value below 0 never.
POSITIVE = frozenset({
    "epochs", "batch_size", "eval_batch_size", "lr", "knn_k", "knn_t", "iou_tau", "steps", "max_steps",
    "max_steps_per_epoch", "max_length", "hidden", "layers", "heads", "emb_dim", "num_layers", "proj_dim",
    "proj_hidden", "queue_size", "views", "n_views", "bn_splits", "geometry_batches", "n_eval", "sigma", "dz",
    "intermediate", "vocab_size", "kfold", "inner_kfold", "svm_folds", "svm_inner_folds", "eval_every",
    "checkpoint_every", "image_size", "grad_cache_chunk", "limit", "points", "warmup_epochs", "heldout",
    "class_similarity", "train_per_class", "val_per_class", "eval_train_per_class", "eval_test_per_class"})
ZERO_MEANS = {"checkpoint_every": "at the end only", "eval_every": "at the end only",
              "geometry_batches": "no geometry measured"}  # a config class adds its own (its ZERO_MEANS ClassVar)


def check_value(cls: type, name: str, value: Any, where: str = "") -> None:
    """``value`` of the field ``name`` of the config class ``cls`` in its range: no NaN or infinity in a number (nor
    in a list's or a mapping's), and a :data:`POSITIVE` option > 0 (0 where :data:`ZERO_MEANS` or the field's
    default says what 0 means); a ``ValueError`` of one line naming ``where``, the option, its range and the value."""
    bad = _not_finite(value)
    if bad is not None:
        raise ValueError(f"{where}{name} must be a finite number, got {bad!r}")
    if name not in POSITIVE or not is_number(value):
        return
    default = _fields(cls)[name].default if name in _fields(cls) else None
    zero = (getattr(cls, "ZERO_MEANS", {}).get(name) or ZERO_MEANS.get(name)
            or ("its default" if default == 0 and not isinstance(default, bool) else None))
    if value < 0 or (value == 0 and zero is None):
        allowed = f"> 0 (or 0: {zero})" if zero else "> 0"
        raise ValueError(f"{where}{name} must be {allowed}, in (0, inf), got {value!r}")


def check_ranges(cfg: Any, where: str = "") -> None:
    """:func:`check_value` of every field of the dataclass ``cfg`` (a config built in code as well as one read)."""
    for f in dataclasses.fields(cfg):
        check_value(type(cfg), f.name, getattr(cfg, f.name), where)


def _not_finite(value: Any) -> float | None:
    """The first NaN or infinity in ``value`` (a number, a list, a mapping's values), else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return next((b for b in map(_not_finite, items) if b is not None), None)


def renamed_fields(cls: type) -> dict[str, str]:
    """The earlier names of fields a config class renamed: its ``RENAMED_FIELDS: ClassVar[dict[str, str]]``
    (earlier name -> field). A file, an override or a flag of the earlier name still sets the field."""
    return dict(getattr(cls, "RENAMED_FIELDS", {}))


def _rename(cls: type, values: dict[str, Any], source: dict[str, str]) -> None:
    """Move values given under an earlier name (:func:`renamed_fields`) to their field; a bool given for an int field
    (a switch that became a count, e.g. ``keep_checkpoint: false`` for ``keep_checkpoints``) counts 0 or 1."""
    hints = typing.get_type_hints(cls)
    for old, new in renamed_fields(cls).items():
        if old not in values:
            continue
        where = source.pop(old)
        if new in values:
            raise ValueError(f"{where}: {old} is the earlier name of {new}; give one of them")
        v = values.pop(old)
        values[new], source[new] = (int(v) if isinstance(v, bool) and _unwrap_optional(hints[new]) is int else v), where


def _typed(name: str, value: Any, tp: Any, where: str) -> Any:
    """``value`` for the field ``name`` of type ``tp`` (ints accepted for floats), or a ValueError
    naming where it came from, the field, the type and the value: a config YAML's ``epochs: ten`` or ``mode:
    supervised`` is refused when the file is read, not deep inside a run."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _typed(name, value, inner[0], where) if len(inner) == 1 else value
    if value is None:
        raise ValueError(f"{where}: {name} must be {_describe(tp)}, got null")
    ok = True
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:  # an int is a float's value as written (kept as is: recorded configs and hashes unchanged)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    elif origin is typing.Literal:
        ok = value in args
    elif origin in (list, tuple):
        ok = isinstance(value, (list, tuple))
        if ok and args and args[0] in (int, float, str):
            value = [_typed(f"{name}[{i}]", x, args[0], where) for i, x in enumerate(value)]
            value = tuple(value) if origin is tuple else value
    elif origin is dict or tp is dict:
        ok = isinstance(value, dict)
    if not ok:
        raise ValueError(f"{where}: {name} must be {_describe(tp)}, got {value!r}")
    return value


def is_int(value: Any) -> bool:
    """An integer, not a bool (YAML's ``true`` is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_ints(cfg: Any, bounds: dict[str, int], where: str = "") -> None:
    """Each field (or key of a mapping) named in ``bounds`` an integer >= its bound: the range check of a config's
    counts, besides :func:`load_config`'s type check, for configs built in code too (``ValueError`` naming
    ``where``, the field and the value)."""
    for name, low in bounds.items():
        v = cfg[name] if isinstance(cfg, dict) else getattr(cfg, name)
        if not is_int(v) or v < low:
            raise ValueError(f"{where}{name} must be an integer >= {low}, got {v!r}")


def check_numbers(cfg: Any, bounds: dict[str, float | None]) -> None:
    """Each field named in ``bounds`` a finite number >= its bound (None: any finite number)."""
    for name, low in bounds.items():
        v = getattr(cfg, name)
        if not is_number(v) or (low is not None and v < low):
            raise ValueError(f"{name} must be a finite number{'' if low is None else f' >= {low:g}'}, got {v!r}")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin is dict or tp is dict:
        return "a mapping (key: value)"
    return {bool: "a bool (true / false)", int: "an int", float: "a float (a number)", str: "a string"}.get(
        tp, str(tp))


def to_dict(cfg: Any) -> dict[str, Any]:
    """``dataclasses.asdict``, less the fields marked ``metadata={"omit_default": True}`` that hold their
    default: an option added later (e.g. ``grad_cache_chunk``) leaves the configs, hashes and output folders
    of the runs that do not use it as they were, so their checkpoints still resume and their settings match."""
    d = dataclasses.asdict(cfg)
    for f in dataclasses.fields(cfg):
        if f.metadata.get("omit_default") and f.default is not dataclasses.MISSING and d.get(f.name) == f.default:
            d.pop(f.name)
    return d


def hash_config(cfg: Any, exclude: tuple[str, ...] = ()) -> str:
    d = {k: v for k, v in to_dict(cfg).items() if k not in exclude}
    return config_hash(d)


# ----------------------------------------------------------------------------- run options

RUN_OPTION = "run_option"  # a field's metadata key: the field says where and how a run goes, never what it is
COMPILE_HELP = ("run the model through torch.compile (a run option: the same experiment, equal to eager within "
                "tolerance)")
LOG_TO_HELP = ("send the step curves to trackers too, comma-separated: tensorboard (event files in the run folder), "
               "mlflow (a store in the run folder, or --mlflow-uri), wandb (offline, in the run folder); a run option")
MLFLOW_URI_HELP = ("the MLflow tracking URI --log-to mlflow sends to (http://host:port, sqlite:///file.db); empty: "
                   "<run folder>/mlflow/mlflow.db; a run option")


def _option(default: Any, help: str = "") -> Any:  # noqa: A002 (the field's --help)
    return dataclasses.field(default=default, metadata={RUN_OPTION: True, **({"help": help} if help else {})})


class _Derived:
    """``RUN_OPTIONS`` of a :class:`RunOptions` config: the names of its fields marked :data:`RUN_OPTION`, in field
    order (derived from the fields, never typed in)."""

    def __get__(self, obj: Any, owner: type) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(owner) if f.metadata.get(RUN_OPTION))


@dataclasses.dataclass
class RunOptions:
    """Where and how a run goes, never what it is (habit 16): the options the run owner (:func:`suite.train.run.run`)
    reads, declared once. Every front-end config inherits them; none is part of the experiment config, its hash or its
    folder (:func:`experiment_config`), so changing one resumes the same run.

    A front-end's own default or help of one of them is class data, read when the class is made:
    ``RUN_DEFAULTS: ClassVar[dict[str, Any]]`` and ``RUN_HELP: ClassVar[dict[str, str]]`` (option -> value). A run
    option of its own (vision's ``eval_every``) is a field with ``metadata={"run_option": True}``. ``RUN_OPTIONS``
    is derived from the fields (:class:`_Derived`). Example, a whole front-end config::

        @dataclass
        class ToyConfig(RunOptions):
            RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"keep_checkpoints": 0}
            lr: float = 0.1
            seed: int = 0
    """

    RUN_OPTIONS = _Derived()
    out: str = _option("", "run folder: checkpoints, the export (export/) (default: "
                           "runs/<task>/<stem>-<experiment hash>)")
    device: str = _option("auto")
    resume: bool = _option(True)
    checkpoint_every: int = _option(1, "checkpoint every N epochs (0: at the end only)")
    keep_checkpoints: int = _option(2, "newest checkpoints kept (0: none once finished)")
    registry: bool = _option(True)
    compile: bool = _option(False, COMPILE_HELP)
    log_to: str = _option("", LOG_TO_HELP)
    mlflow_uri: str = _option("", MLFLOW_URI_HELP)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass's ``RUN_DEFAULTS`` / ``RUN_HELP`` become its fields' defaults and help (each option keeps its
        place among the fields); a name that is no option of :class:`RunOptions` is a ``TypeError``."""
        super().__init_subclass__(**kwargs)
        base = {f.name: f for f in dataclasses.fields(RunOptions)}
        defaults, helps = cls.__dict__.get("RUN_DEFAULTS", {}), cls.__dict__.get("RUN_HELP", {})
        unknown = sorted((set(defaults) | set(helps)) - set(base))
        if unknown:
            raise TypeError(f"{cls.__name__}: RUN_DEFAULTS / RUN_HELP name {unknown}, which are no options of "
                            f"RunOptions ({', '.join(base)})")
        types_ = typing.get_type_hints(RunOptions)
        for name in (n for n in base if n in defaults or n in helps):
            f = base[name]
            meta = {**f.metadata, **({"help": helps[name]} if name in helps else {})}
            cls.__annotations__[name] = types_[name]
            setattr(cls, name, dataclasses.field(default=defaults.get(name, f.default), metadata=meta))


RUN_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(RunOptions))


def run_options(cfg: Any) -> tuple[str, ...]:
    """The fields of ``cfg`` that say where and how it runs (device, output folder, resume, ...), not what is run:
    a :class:`RunOptions` config's derived ``RUN_OPTIONS``; another config class lists them in
    ``RUN_OPTIONS: ClassVar[tuple[str, ...]]``."""
    return tuple(getattr(type(cfg), "RUN_OPTIONS", ()))


def experiment_config(cfg: Any) -> dict[str, Any]:
    """The resolved experiment as plain JSON data (``dataclasses.asdict`` with the run options
    removed, and a user's loss's origin added): what a checkpoint records and what a resume must match."""
    skip = set(run_options(cfg))
    d = {k: v for k, v in to_dict(cfg).items() if k not in skip}
    origin = _loss_origin(d.get("loss"))
    if origin is not None:
        d["loss_origin"] = origin
    return json.loads(json.dumps(d, sort_keys=True, default=str))


LOSS_SHA_ENV = "SUITE_LOSS_SHA256"  # set by the benchmark runner: the user's loss source a job's hash was made with


def _loss_origin(loss: Any) -> dict[str, Any] | None:
    """A user's loss (``cfg.loss`` naming ``module:Class``, ``file.py:Class`` or an installed package's loss) is
    part of the experiment by its origin (import path, package version, source sha256): changing its source makes a
    new setting, and two classes of one name never share a run. None (nothing added) for a loss of the core."""
    if not isinstance(loss, str) or not loss.strip():
        return None
    from suite.presets import loss_origin

    origin = loss_origin(loss)
    expected = os.environ.get(LOSS_SHA_ENV)
    if origin is not None and expected and origin.get("sha256") != expected:
        raise ValueError(f"loss {loss!r}: its source changed after the benchmark grid was loaded (sha256 "
                         f"{expected[:12]} when the grid's jobs were made, {origin['sha256'][:12]} now); this job would "
                         "record the new source under the old setting: run the grid again, which makes the changed loss "
                         "a new setting")
    return origin


def run_option_values(cfg: Any) -> dict[str, Any]:
    """The run options of ``cfg`` as plain JSON data (recorded with a run, never part of its setting)."""
    d = to_dict(cfg)
    return json.loads(json.dumps({k: d[k] for k in run_options(cfg) if k in d}, sort_keys=True, default=str))


def experiment_hash(cfg: Any, length: int = 8) -> str:
    """Short hash of :func:`experiment_config` (names default output folders)."""
    return config_hash(experiment_config(cfg))[:length]


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


# A help text that states its field's default in its own words ("(default: the preset's)", "default: $SUITE_DATA"):
# add_config_args then appends nothing, so every option states its default once (tests/docs/test_cli_help.py).
DEFAULT_STATEMENT = re.compile(r"\(default\b|\bdefault:|\bdefaults? to\b", re.IGNORECASE)


def _shown(default: Any) -> str:
    """A default as the help prints it: ``''`` for the empty string, lists space-separated, else ``str``."""
    if isinstance(default, str):
        return default if default else "''"
    if isinstance(default, (list, tuple)):
        return " ".join(map(str, default)) if default else "[]"
    return str(default)


def option_help(f: dataclasses.Field, default: Any, suffix: str = "") -> str:  # type: ignore[type-arg]
    """The ``--help`` text of the config field ``f``: its ``metadata["help"]``, then ``suffix`` (a value format),
    then ``(default: X)`` unless the help already states its default (the field's own words win: a sentinel such as
    None or '' is better described than printed)."""
    text = (f.metadata.get("help", "") if f.metadata else "").strip()
    text = f"{text} {suffix}".strip()
    if DEFAULT_STATEMENT.search(text):
        return text
    return f"{text} (default: {_shown(default)})".strip()


def add_config_args(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per dataclass field (default None = keep the config/file value); the help states the field's
    default once (:func:`option_help`)."""
    hints = typing.get_type_hints(cls)
    fields = _fields(cls)
    last = RUN_OPTION_NAMES if isinstance(cls, type) and issubclass(cls, RunOptions) else ()
    for name in [*(n for n in fields if n not in last), *last]:  # the options every front-end has, last
        f = fields[name]
        if name in skip:
            continue
        tp = _unwrap_optional(hints[name])
        flag = "--" + name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        origin = typing.get_origin(tp)
        help_ = option_help(f, default, "(key=value,...)" if origin is dict else "")
        if tp is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_)
        elif origin in (list, tuple):
            (elem, *_) = typing.get_args(tp) or (str,)
            parser.add_argument(flag, dest=name, nargs="+", type=elem, default=None, help=help_)
        elif origin is dict:
            parser.add_argument(flag, dest=name, type=_kv_pairs, default=None, help=help_)
        elif typing.get_origin(tp) is typing.Literal:
            choices = typing.get_args(tp)
            parser.add_argument(flag, dest=name, choices=choices, default=None, help=help_)
        else:
            parser.add_argument(flag, dest=name, type=tp if tp in (int, float, str) else str, default=None, help=help_)
    for old, new in renamed_fields(cls).items():  # an earlier flag still works (a recorded command line), unlisted
        if new in skip:
            continue
        new_tp = _unwrap_optional(hints[new])
        kind: dict[str, Any] = ({"action": argparse.BooleanOptionalAction} if new_tp in (bool, int)
                                else {"type": new_tp if new_tp in (float, str) else str})
        parser.add_argument("--" + old.replace("_", "-"), dest=old, default=None, help=argparse.SUPPRESS, **kind)


def _kv_pairs(text: str) -> dict[str, Any]:
    """``a=1,b=x`` as a mapping (each value read as YAML); a key given twice is refused, naming it."""
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"expected key=value, got {part!r}")
        k, v = part.split("=", 1)
        if k.strip() in out:
            raise argparse.ArgumentTypeError(f"key {k.strip()!r} is given twice in {text!r}; give it once")
        try:
            out[k.strip()] = load_yaml(v)
        except yaml.YAMLError as exc:
            raise argparse.ArgumentTypeError(f"{part!r}: {getattr(exc, 'problem', None) or exc}") from None
    return out


def config_from_args(cls: type[C], args: argparse.Namespace, path: str | Path | None = None) -> C:
    names = [*_fields(cls), *renamed_fields(cls)]
    overrides = {k: getattr(args, k) for k in names if hasattr(args, k)}
    return load_config(cls, path, overrides, flags=True)
