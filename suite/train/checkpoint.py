"""Atomic checkpoints that carry the RNG states, so a resumed run continues bit-for-bit."""
from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.safeio import load_tensors


def rng_state() -> dict[str, Any]:
    """Every RNG state as plain data (tuples/lists of ints, tensors): loadable with ``weights_only=True``."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {"python": random.getstate(),
                             "numpy": {"kind": str(kind), "keys": [int(k) for k in keys], "pos": int(pos),
                                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    n = state["numpy"]
    if isinstance(n, dict):
        np.random.set_state((n["kind"], np.asarray(n["keys"], dtype=np.uint32), n["pos"], n["has_gauss"],
                             n["cached_gaussian"]))
    else:  # (kind, keys, pos, has_gauss, cached) as np.random.get_state() gives it
        np.random.set_state(tuple(n))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` atomically (temp file + fsync + rename): a crash never leaves a half checkpoint.
    ``state`` holds tensors and plain data only (it is read back with ``weights_only=True``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as raw:
            f = _Recording(raw)
            try:
                torch.save(state, f)
            except RuntimeError:  # torch's writer turns a failed write into "inline_container.cc ... unexpected pos"
                if f.error is not None:
                    raise f.error from None
                raise
            raw.flush()
            os.fsync(raw.fileno())  # the bytes are on disk before the rename makes them the checkpoint
        tmp.replace(path)
    except OSError as e:  # disk full, quota, read-only folder: the previous checkpoint stays as it was
        tmp.unlink(missing_ok=True)
        reason = (os.strerror(e.errno) if e.errno else None) or e.strerror or str(e)
        raise OSError(e.errno, f"could not write checkpoint {path}: {reason[:1].lower()}{reason[1:]}; the previous "
                               "checkpoint (if any) is kept") from None
    except BaseException:  # anything else (an interruption, a bad state): no half-written temporary file is left
        tmp.unlink(missing_ok=True)
        raise
    try:  # the rename itself is durable once the folder is synced (not possible on every OS)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


class _Recording:
    """A binary file for ``torch.save`` that keeps the first ``OSError`` of its writes (a full disk: ENOSPC), which
    torch's writer would otherwise report as an unrelated ``RuntimeError``."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.error = raw, None

    def write(self, data: Any) -> int:
        try:
            return self.raw.write(data)
        except OSError as exc:
            if self.error is None:
                self.error = exc
            raise

    def flush(self) -> None:
        self.raw.flush()


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`, read as data only (``weights_only=True``:
    tensors and plain containers; a file that would run code on loading is refused with
    :class:`suite.safeio.UnsafeFileError`)."""
    path = Path(path)
    state = load_tensors(path, map_location=map_location, what="checkpoint")
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {path} holds a {type(state).__name__}, not a dict")
    return state


class ConfigMismatchError(ValueError):
    """A checkpoint belongs to another experiment than the one asked for."""


_MISSING = "<absent>"


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flatten(v, key) if isinstance(v, dict) and v else {key: v})
    return out


def config_diff(old: dict[str, Any], new: dict[str, Any], ignore: tuple[str, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """Keys (nested ones dotted, ``loss_hparams.alpha``) whose values differ: ``{key: (old, new)}``.
    Top-level keys in ``ignore`` (run options) are left out on both sides."""
    a = _flatten(json.loads(json.dumps({k: v for k, v in old.items() if k not in ignore}, default=str)))
    b = _flatten(json.loads(json.dumps({k: v for k, v in new.items() if k not in ignore}, default=str)))
    return {k: (a.get(k, _MISSING), b.get(k, _MISSING)) for k in sorted(set(a) | set(b))
            if a.get(k, _MISSING) != b.get(k, _MISSING)}


def check_resume_config(path: str | Path, saved: Any, current: dict[str, Any], ignore: tuple[str, ...] = ()) -> None:
    """Refuse to resume the checkpoint at ``path`` unless the experiment config it records
    (``saved``) equals ``current``; the error names every differing key as ``key: old -> new``.

    The one rule every front-end that resumes uses (``ignore``: run options an older checkpoint may
    still hold)."""
    if not isinstance(saved, dict):
        raise ConfigMismatchError(
            f"refusing to resume {path}: it records no experiment config, so it cannot be shown to belong to this "
            f"run; use another output folder or turn resume off")
    diff = config_diff(saved, current, ignore)
    if diff:
        keys = ", ".join(f"{k}: {o!r} -> {n!r}" for k, (o, n) in diff.items())
        raise ConfigMismatchError(
            f"refusing to resume {path}: it belongs to another experiment ({keys}); use another output folder "
            f"or turn resume off")


def load_for_resume(path: str | Path, config: dict[str, Any], map_location: str | torch.device = "cpu",
                    ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """:func:`load_checkpoint`, then :func:`check_resume_config` against its ``"config"`` entry."""
    state = load_checkpoint(path, map_location=map_location)
    check_resume_config(path, state.get("config"), config, ignore)
    return state


_EPOCH = re.compile(r"epoch[_-]?(\d+)")


def latest_checkpoint(directory: str | Path, pattern: str = "*.pt") -> Path | None:
    """The checkpoint with the highest ``epoch<N>`` in its name (or the newest file)."""
    d = Path(directory)
    if not d.is_dir():
        return None
    files = [p for p in d.glob(pattern) if not p.name.endswith(".tmp")]
    if not files:
        return None

    def key(p: Path) -> tuple[int, float]:
        m = _EPOCH.search(p.stem)
        return (int(m.group(1)) if m else -1, p.stat().st_mtime)

    return max(files, key=key)
