"""One folder per pretrained module: ``model.safetensors`` (weights, data not code) + ``config.json``
(what rebuilds the module) [+ ``README.md``, the model card of :mod:`suite.model_card`].

Front-ends give their modules ``save_pretrained(path)`` / ``from_pretrained(path)`` on top of
:func:`save_pretrained`, :func:`load_pretrained` and :func:`load_state`; nothing here is modality specific.
Every way a folder can be wrong (missing, another model type, a config without a required field or with a field of
the wrong type, weights that are not safetensors, weights that do not match the config) is a ``ValueError`` naming
the path and what is wrong. Writing is atomic per file: a full disk leaves the previous model loadable.

Example:
    >>> save_pretrained(enc, "runs/gin", "graphcl_gin", {"in_dim": 7, "hidden": 32, "layers": 3})
    >>> config, state = load_pretrained("runs/gin", "graphcl_gin", {"in_dim": POSITIVE_INT})
    >>> load_state(GINEncoder(**...), state, "runs/gin")
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, Callable

from torch import Tensor, nn

from suite.inputs import read_record

CONFIG = "config.json"
WEIGHTS = "model.safetensors"

Field = tuple[str, Callable[[Any], bool]]  # (what the value must be, its check)
POSITIVE_INT: Field = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
FRACTION: Field = ("a number in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1)
MAPPING: Field = ("a JSON object", lambda v: isinstance(v, dict))
NAME_OR_MAPPING: Field = ("a name or a JSON object", lambda v: isinstance(v, (str, dict)))


def save_pretrained(module: nn.Module, path: str | Path, model_type: str, config: dict[str, Any]) -> Path:
    """Write ``module.state_dict()`` as safetensors and ``{"model_type", **config}`` as JSON, each through a temporary
    file renamed when complete (a failed write raises ``OSError``; the files before stay). Which code wrote them is
    the run record's to say (``run.json``, :func:`suite.train.run.run`), not these files': the same weights and config
    are the same files whichever commit wrote them, so the jobs that read them are not run again
    (:func:`suite.inputs.files_digest`)."""
    from safetensors.torch import save_file

    from suite.safeio import write_atomic

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    tmp = out / f".{WEIGHTS}.{os.getpid()}.tmp"
    try:
        save_file(state, str(tmp), metadata={"model_type": model_type})
        os.replace(tmp, out / WEIGHTS)
    except Exception as exc:  # a full disk: safetensors raises its own error type
        tmp.unlink(missing_ok=True)
        raise OSError(getattr(exc, "errno", None) or errno.EIO,
                      f"could not write {out / WEIGHTS}: {exc}; the previous model (if any) is kept") from None
    meta = {"model_type": model_type, **config}
    write_atomic(out / CONFIG, json.dumps(meta, indent=1, sort_keys=True) + "\n", what="model config")
    return out


def load_pretrained(path: str | Path, model_type: str,
                    required: dict[str, Field] | None = None) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``(config, state_dict)`` of a folder written by :func:`save_pretrained` for ``model_type``.

    ``required`` names the config fields the module needs and what each must be (e.g. ``{"in_dim": POSITIVE_INT}``).
    A missing folder or file, unreadable JSON, another model type, a missing or ill-typed field, or weights that are
    not a readable safetensors file raise ``ValueError`` naming the path."""
    from safetensors.torch import load_file

    from suite.safeio import _reason

    p = Path(path)
    if not p.exists():
        raise ValueError(f"pretrained {model_type} folder {p} not found")
    if not p.is_dir():
        raise ValueError(f"{p} is a file, not a folder: a pretrained {model_type} folder holds {CONFIG} and {WEIGHTS}")
    cfg_path, w_path = p / CONFIG, p / WEIGHTS
    for f in (cfg_path, w_path):
        if not f.is_file():
            raise ValueError(f"{p} is not a pretrained {model_type} folder: {f.name} missing")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{cfg_path}: not valid JSON ({exc})") from exc
    if not isinstance(config, dict) or config.get("model_type") != model_type:
        got = config.get("model_type") if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"{cfg_path}: model_type is {got!r}, expected {model_type!r}")
    for name, (what, ok) in (required or {}).items():
        if name not in config:
            raise ValueError(f"{cfg_path}: required field {name!r} missing (a {model_type} config needs "
                             f"{sorted(required or {})})")
        if not ok(config[name]):
            raise ValueError(f"{cfg_path}: {name} must be {what}, got {config[name]!r}")
    try:
        state = load_file(str(w_path))
    except Exception as exc:  # not safetensors (a pickle, random bytes), truncated
        raise ValueError(f"{w_path} is not a safetensors file or is unreadable ({type(exc).__name__}: "
                         f"{_reason(exc)})") from exc
    return config, state


def load_export(path: str | Path, model_type: str, required: dict[str, Field] | None = None,
                earlier: Any = None) -> Any:
    """A module's export as :class:`suite.train.legacy.Export` (config, weights, run record): a folder written by
    :func:`save_pretrained` (or a run folder: its ``export/``) with the run owner's ``run.json`` (``{}`` without
    one), else, when ``earlier`` (a :class:`suite.train.legacy.Earlier`) declares an earlier export file there, that
    file converted by :func:`suite.train.legacy.earlier_layout`; else the ``ValueError`` of :func:`load_pretrained`."""
    from suite.train.legacy import Export, earlier_layout

    p = Path(path)
    folder = p / "export" if (p / "export" / CONFIG).is_file() else p
    if earlier is not None and not (folder.is_dir() and (folder / CONFIG).is_file()):
        found = earlier_layout(earlier, p, required=required).export
        if found is not None:
            return found
    config, state = load_pretrained(folder, model_type, required)
    return Export(config, state, read_record(folder) or {}, folder)


def load_weights(folder: str | Path, name: str, earlier: Any = None, what: str = "weights") -> dict[str, Tensor] | None:
    """The tensors of the safetensors file ``name`` in ``folder``; where it is absent and ``earlier`` (a
    :class:`suite.train.legacy.Earlier`) declares its earlier place, that torch file read as data
    (:func:`suite.safeio.load_tensors`); None when neither exists. An unreadable file is a ``ValueError`` naming it."""
    from safetensors.torch import load_file

    p = Path(folder)
    if (p / name).exists():
        try:
            return load_file(str(p / name))
        except Exception as exc:  # not safetensors (a pickle, random bytes), truncated
            raise ValueError(f"{p / name} is not a safetensors file or is unreadable ({type(exc).__name__})") from None
    if earlier is None:
        return None
    from suite.safeio import load_tensors
    from suite.train.legacy import earlier_layout

    old = earlier_layout(earlier, p).files.get(name)
    return None if old is None else load_tensors(old, what=what)


def load_state(module: nn.Module, state: dict[str, Tensor], path: str | Path) -> nn.Module:
    """``module.load_state_dict(state)`` after checking that the weights of the folder ``path`` are the module's:
    the same tensor names and, tensor by tensor, the shapes the config builds. A mismatch is a ``ValueError`` naming
    the folder, the first tensor that differs and both shapes (not torch's list of every tensor)."""
    own = module.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing:
        raise ValueError(f"{path}: {WEIGHTS} lacks {len(missing)} tensor(s) of the model: missing {missing[:3]}")
    if unexpected:
        raise ValueError(f"{path}: {WEIGHTS} holds {len(unexpected)} tensor(s) the model does not have: unexpected "
                         f"{unexpected[:3]}")
    for k, v in own.items():
        if tuple(state[k].shape) != tuple(v.shape):
            raise ValueError(f"{path}: tensor {k!r} has shape {tuple(state[k].shape)} in the weights but "
                             f"{tuple(v.shape)} in the model {CONFIG} describes; the config does not match the weights")
    module.load_state_dict(state)
    return module
