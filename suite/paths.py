"""Where data sets, caches and the results registry live.

One data root for every front-end: ``$SUITE_DATA`` if set, otherwise ``../shared/datasets``
(relative to the working directory, then to the repository) when it exists, otherwise
``~/.cache/suite`` (loaders that support it download there).
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_REPO = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    env = os.environ.get("SUITE_DATA")
    if env:
        root = Path(env).expanduser()
        if root.exists() and not root.is_dir():
            raise ValueError(f"SUITE_DATA={env} is a file, not a folder: point it at the data root (see MANIFEST.md)")
        return root
    for cand in (Path.cwd() / ".." / "shared" / "datasets", _REPO / ".." / "shared" / "datasets"):
        if cand.is_dir():
            return cand.resolve()
    return Path("~/.cache/suite").expanduser()


def missing_root_note() -> str:
    """``"SUITE_DATA=<path> does not exist"`` when ``$SUITE_DATA`` names a folder that is not there (a typo), else
    ``""``: loaders add it to their "not found" errors, which then say why every data set is missing."""
    env = os.environ.get("SUITE_DATA")
    if env and not Path(env).expanduser().exists():
        return f"SUITE_DATA={env} does not exist"
    return ""


def data_path(*parts: str) -> Path:
    """``data_root() / parts``; the caller checks existence and raises a clear error."""
    return data_root().joinpath(*parts)


def cache_dir(*parts: str) -> Path:
    """Writable cache for derived artefacts (decoded images, featurised molecules, embeddings).

    ``$SUITE_CACHE`` if set, else ``~/.cache/suite/derived``. Never inside the (read-only) data root.
    """
    base = Path(os.environ.get("SUITE_CACHE", "~/.cache/suite/derived")).expanduser()
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on ``path`` (created if needed) for the ``with`` block: serialises
    processes that build or update the same cache file (DDP ranks, parallel benchmark workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def registry_url() -> str:
    """``$SUITE_REGISTRY`` (a path or an SQLAlchemy URL), default ``./results/registry.sqlite``."""
    return os.environ.get("SUITE_REGISTRY", str(Path("results") / "registry.sqlite"))


def models_dir() -> Path:
    """Where built models that are not committed live (e.g. the MLM start model): ``$SUITE_MODELS``, else
    ``~/.cache/suite/models``; a later session on the same machine finds them there."""
    return Path(os.environ.get("SUITE_MODELS", "~/.cache/suite/models")).expanduser()


def resolve_model_path(spec: str | Path) -> Path:
    """``models:NAME`` -> ``models_dir() / NAME``; any other path with ``~`` expanded."""
    s = str(spec)
    if s.startswith("models:"):
        name = s[len("models:"):]
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"model name {s!r}: expected models:NAME with a plain folder name")
        return models_dir() / name
    return Path(s).expanduser()
