"""One folder per pretrained module: ``model.safetensors`` (weights, data not code) + ``config.json``
(what rebuilds the module) [+ ``README.md``, the model card of :mod:`suite.model_card`].

Front-ends give their modules ``save_pretrained(path)`` / ``from_pretrained(path)`` on top of
:func:`save_pretrained` and :func:`load_pretrained`; nothing here is modality specific.

Example:
    >>> save_pretrained(enc, "runs/gin", "graphcl_gin", {"in_dim": 7, "hidden": 32, "layers": 3})
    >>> config, state = load_pretrained("runs/gin", "graphcl_gin")
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor, nn

CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def save_pretrained(module: nn.Module, path: str | Path, model_type: str, config: dict[str, Any]) -> Path:
    """Write ``module.state_dict()`` as safetensors and ``{"model_type", **config, "code_version"}`` as JSON."""
    from safetensors.torch import save_file

    from suite.registry import code_version

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(out / WEIGHTS), metadata={"model_type": model_type})
    meta = {"model_type": model_type, **config, "code_version": code_version()}
    (out / CONFIG).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out


def load_pretrained(path: str | Path, model_type: str) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``(config, state_dict)`` of a folder written by :func:`save_pretrained` for ``model_type``.

    A missing folder or file, unreadable JSON or another model type raise ``ValueError`` naming the path."""
    from safetensors.torch import load_file

    p = Path(path)
    cfg_path, w_path = p / CONFIG, p / WEIGHTS
    for f in (cfg_path, w_path):
        if not f.is_file():
            raise ValueError(f"{p} is not a pretrained {model_type} folder: {f.name} missing")
    try:
        config = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{cfg_path}: not valid JSON ({exc})") from exc
    if not isinstance(config, dict) or config.get("model_type") != model_type:
        got = config.get("model_type") if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"{cfg_path}: model_type is {got!r}, expected {model_type!r}")
    return config, load_file(str(w_path))
