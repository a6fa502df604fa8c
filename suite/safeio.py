"""Files read back from disk are data, never code.

``load_tensors`` is the one ``torch.load`` of the project: ``weights_only=True`` (tensors and plain
containers), every failure a one-line ``ValueError`` naming the file. Caches are written with
``save_arrays`` (numpy ``.npz`` of plain arrays + a JSON header) and read with ``load_arrays``
(``allow_pickle=False``: nothing in the file can run code); a cache that cannot be read is reported
with ``cache_unreadable`` (a warning naming the file) and rebuilt.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: reading a text file (`suite results import`) does not load torch
    import numpy as np
    import torch

_REASON = re.compile(r"WeightsUnpickler error:\s*(.*?)(?:\s+Please use|\n\n|$)", re.S)


_UNSAFE = re.compile(r"global|reduce|unrecognized|not an allowed|unsupported class", re.I)


class UnsafeFileError(ValueError):
    """A file that would run code (or build arbitrary objects) when loaded."""


def _reason(exc: BaseException) -> str:
    """The informative part of a (often long, multi-line) library error, on one short line."""
    text = str(exc)
    m = _REASON.search(text)
    if m and m.group(1).strip():
        return " ".join(m.group(1).split())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(exc).__name__
    if len(first) > 120 and ". " in first:
        first = first[: first.index(". ") + 1]
    return first


def load_tensors(path: str | Path, map_location: str | torch.device = "cpu", what: str = "file") -> Any:
    """``torch.load(path, weights_only=True)``. Raises ``UnsafeFileError`` for a file that holds
    anything but tensors and plain data (nothing in it is executed) and ``ValueError`` for a
    missing, truncated or corrupt one; both name ``what`` and the path on one line."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {path} {'is a folder, not a file' if path.is_dir() else 'not found'}")
    try:
        with warnings.catch_warnings():  # torch's note on a non-default pickle protocol: the error below says it all
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if _UNSAFE.search(_reason(exc)):
            raise UnsafeFileError(f"{what} {path} is refused: it holds more than tensors and plain data "
                                  f"(weights_only=True: {_reason(exc)})") from exc
        raise ValueError(f"{what} {path} is corrupt or unreadable: {_reason(exc)}") from exc
    except Exception as exc:  # truncated zip, not a torch file, ...
        raise ValueError(f"{what} {path} is corrupt or unreadable: {type(exc).__name__}: {_reason(exc)}") from exc


def cache_unreadable(path: str | Path, exc: BaseException | str) -> None:
    """Warn that the cache file ``path`` cannot be used and is rebuilt (it is overwritten next)."""
    text = exc if isinstance(exc, str) else _reason(exc)
    msg = text if str(path) in text else f"cache {path} is unreadable ({text})"
    warnings.warn(f"{msg}; rebuilding it", stacklevel=3)


def decode_text(data: bytes, path: str | Path, encoding: str = "utf-8", what: str = "text file") -> str:
    """``data`` (the bytes of ``path``) as text. A binary file (a NUL byte) or bytes that are not
    ``encoding`` raise a one-line ``ValueError`` naming the file, the line and the offending byte."""
    nul = data.find(b"\x00")
    if nul >= 0 and not encoding.lower().startswith("utf-16"):
        line = data.count(b"\n", 0, nul) + 1
        raise ValueError(f"{path} is a binary file, not a {what} (NUL byte at line {line}, offset {nul})")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{path} is not {encoding} text: byte 0x{data[exc.start]:02x} at line {line} (offset "
                         f"{exc.start}); save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """The bytes of ``path``, decompressed when it starts with the gzip magic. A missing file, a folder, or a gzip
    file cut short or corrupt raise a one-line ``ValueError`` naming ``what`` and the path."""
    import gzip
    import zlib

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} {path} {'is a folder, not a file' if path.is_dir() else 'not found'}")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{what} {path} is not a complete gzip file ({exc}); fetch it again") from None
    return data


def read_text(path: str | Path, encoding: str = "utf-8", what: str = "text file") -> str:
    """The text of ``path`` (gzip-compressed or plain, :func:`read_bytes`) checked by :func:`decode_text`."""
    return decode_text(read_bytes(path, what), path, encoding, what)


def write_atomic(path: str | Path, data: str | bytes, what: str = "file") -> Path:
    """Write ``data`` to ``path`` through a temporary file of this process (fsync, then rename): a full disk or a
    kill mid-write leaves the previous file as it was and no temporary behind. A failed write raises ``OSError``
    naming ``what`` and the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    blob = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, f"could not write {what} {path}: {exc.strerror or exc}; the previous file (if any) "
                                 "is kept") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


_META = "__meta__"


def save_arrays(path: str | Path, arrays: dict[str, torch.Tensor | np.ndarray], meta: dict[str, Any] | None = None) -> Path:
    """Write tensors / arrays and a JSON-able ``meta`` dict to ``path`` (an uncompressed ``.npz``),
    atomically (temp file + rename)."""
    import numpy as np
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out: dict[str, np.ndarray] = {}
    for k, v in arrays.items():
        a = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)
        if a.dtype == object:
            raise TypeError(f"array {k!r} has dtype object; only plain numeric arrays are stored")
        out[k] = a
    out[_META] = np.frombuffer(json.dumps(meta or {}).encode(), dtype=np.uint8)
    # a temporary name of this process's own: two processes (e.g. two ranks featurising the same corpus) may write
    # the same cache at once; each renames its own complete file, the last rename wins, nothing is half-written
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:  # a file object: numpy does not append ".npz" to the name
            np.savez(f, **out)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_arrays(path: str | Path, what: str = "cache") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a :func:`save_arrays` file: ``({name: tensor}, meta)``. ``allow_pickle=False``, so a
    planted pickle is refused; any failure is a one-line ``ValueError`` naming the file."""
    import numpy as np
    import torch

    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files") or _META not in z.files:
                raise ValueError("not an array archive written by the suite")
            meta = json.loads(z[_META].tobytes().decode())
            arrays = {k: torch.from_numpy(np.array(z[k])) for k in z.files if k != _META}
    except Exception as exc:
        raise ValueError(f"{what} {path} is unreadable: {type(exc).__name__}: {_reason(exc)}") from exc
    if not isinstance(meta, dict):
        raise ValueError(f"{what} {path} is unreadable: its header is not a JSON object")
    return arrays, meta
