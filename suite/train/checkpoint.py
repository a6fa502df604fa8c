"""Atomic checkpoints that carry the RNG states, so a resumed run continues bit-for-bit."""
from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` atomically (temp file + rename): a crash never leaves a half checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # corrupt / truncated file
        raise ValueError(f"checkpoint {path} is corrupt or unreadable: {exc}") from exc


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
