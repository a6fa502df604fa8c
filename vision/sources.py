"""Where streamed images come from: the file index of an ImageNet-style folder (``folder:PATH``) or of WebDataset
``.tar`` shards (``wds:PATTERN``), each a :class:`Source` that reads one sample's encoded bytes, its label and its
caption. Arrays only: the names are one packed byte buffer (:class:`Names`), so forked ``DataLoader`` workers share
the index without copies and a subset is one index operation. :mod:`vision.stream` decodes and crops what a source
reads.

Layouts:
- folder: ``PATH/train/<class>/*`` and ``PATH/val/<class>/*`` or ``PATH/test/<class>/*`` (classes sorted by name, or
  in the order of ``PATH/classes.txt``); images of any size and mode. ImageNet's official validation set may stay one
  flat folder (``PATH/val/ILSVRC2012_val_00000001.JPEG`` ...) labelled by Kaggle's ``LOC_val_solution.csv`` or by the
  devkit's ``ILSVRC2012_validation_ground_truth.txt`` with its synset mapping (:func:`flat_val_labels`);
- shards: ``wds:/data/cc3m/{00000..00331}.tar`` (brace ranges as webdataset writes them); a sample is the tar members
  that share a key: the image (``jpg``, ``jpeg``, ``png``, ``webp``), its caption (``txt``, or ``json`` with a
  ``caption`` field) and an optional class (``cls``). Each shard's member offsets are indexed once (cached by the
  shard's path, size and modification time), so a sample is read by one seek.

A file is opened without blocking and read only if it is a regular file; an error of the mount (ETIMEDOUT, EIO,
ESTALE) or a file that is not an image file is an :class:`UnreadableImage` of one line naming it. Names of images
that are not files are left out of the index, named and counted (``info["not_files"]``), and so are files that are
not images (``.DS_Store``, ``Thumbs.db``, macOS's ``._*`` forks: ``info["not_images"]``); a class folder's
sub-folders are walked, as torchvision's ``ImageFolder`` walks them. A name that is not UTF-8 keeps its bytes and is
shown with ``\\xNN`` in messages, a newline in a name as ``\\n`` (:func:`shown`). A read that never
returns (a hard-mounted share gone) stops the run after :data:`suite.train.batches.STALL_S` seconds with one line
naming the file it waits on.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tarfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from torch import Tensor

from suite.train.batches import reading
from vision.imagenet_val import (GROUND_TRUTH, META_MAT, SYNSET_MAPPING, VAL_SOLUTION, _find, _label_places,
                                 flat_val_labels)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
SHARD_IMAGE_KEYS = ("jpg", "jpeg", "png", "webp")
STREAM_PREFIXES = ("folder:", "wds:")


def is_streamed(dataset: str) -> bool:
    """Whether ``dataset`` names streamed data (a folder or shards) rather than an in-memory set."""
    return dataset.lower().startswith(STREAM_PREFIXES)


_CONTROL = {c: f"\\x{c:02x}" for c in range(32)} | {10: "\\n", 13: "\\r", 9: "\\t", 127: "\\x7f"}


def shown(text: str) -> str:
    """``text`` as a message shows it on one line: control characters in a file's name (a newline) escaped, bytes of a
    name that are not UTF-8 (surrogate-escaped by the file system) as ``\\xNN``."""
    if text.isprintable():
        return text
    return os.fsencode(text).decode("utf-8", "backslashreplace").translate(_CONTROL)


class UnreadableImage(ValueError):
    """An image that cannot be read or decoded; its message names the file, on one line (:func:`shown`)."""

    def __init__(self, message: str) -> None:
        super().__init__(shown(message))


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for messages."""
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def read_file(path: str, what: str, offset: int = 0, size: int = -1) -> bytes:
    """``size`` bytes (all: -1) of the regular file ``path`` from ``offset``; anything else is an
    :class:`UnreadableImage` of one line starting with ``what``. The file is opened without blocking, so one replaced
    by a named pipe (or a device) fails at once instead of waiting for a writer that never comes; an error of the
    mount (a network share timing out: ETIMEDOUT, EIO, ESTALE) is the same one line. In a data worker the read is
    declared (:func:`suite.train.batches.reading`), so a read that never returns is named when the run stops."""
    with reading(what):
        return _read(path, what, offset, size)


def _read(path: str, what: str, offset: int, size: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise UnreadableImage(f"{what} cannot be read (it is {_kind(mode)}, not an image file)")
            if _NONBLOCK:
                os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as fh:
                if offset:
                    fh.seek(offset)
                return fh.read(size)
        finally:
            os.close(fd)
    except OSError as exc:
        raise UnreadableImage(f"{what} cannot be read ({type(exc).__name__}: {exc.strerror or exc})") from None


@dataclass
class Source:
    """One split's samples: how to read sample ``i``'s encoded bytes, its label and caption. Arrays only (shared by
    forked workers without copies)."""

    name: str
    classes: list[str]
    labels: np.ndarray  # (N,) int64; -1 where the sample has no class
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def read(self, i: int) -> bytes:
        raise NotImplementedError

    def where(self, i: int) -> str:
        """The sample's file, for messages."""
        raise NotImplementedError

    def caption(self, i: int) -> str | None:
        return None

    def take(self, idx: np.ndarray | Tensor) -> "Source":
        """The samples ``idx`` (in that order) as a source of their own."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """A digest of what the split holds, a cache key: its file names and labels (shards: also each shard's size
        and modification time and every sample's offsets)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Names:
    """Strings packed into one uint8 buffer with (M + 1,) offsets, and the rows of it a source holds: arrays only, so
    forked workers share them, and a subset (:meth:`take`) is one index operation, not a string per sample."""

    buf: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, strings: Sequence[str]) -> "Names":
        enc = [os.fsencode(s) for s in strings]  # a name that is not UTF-8 (surrogate-escaped) keeps its bytes
        offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(e) for e in enc])
        return cls(np.frombuffer(b"".join(enc), dtype=np.uint8).copy(), offsets, np.arange(len(enc), dtype=np.int64))

    def __getitem__(self, i: int) -> str:
        r = self.rows[i]
        return os.fsdecode(bytes(self.buf[self.offsets[r]:self.offsets[r + 1]]))

    def take(self, idx: np.ndarray) -> "Names":
        return Names(self.buf, self.offsets, self.rows[idx])

    def digest(self, h: Any) -> None:
        """Feed the names held, in order, to the hash ``h``."""
        for a in (self.buf, self.offsets, self.rows):
            h.update(a.tobytes())


@dataclass
class FolderSource(Source):
    """``<split_dir>/<class>/<file>`` images."""

    root: str = ""
    names: Names = field(default_factory=lambda: Names.of([]))

    def read(self, i: int) -> bytes:
        path = self.where(i)
        return read_file(path, f"image {path}")

    def where(self, i: int) -> str:
        return os.path.join(self.root, self.names[i])

    def take(self, idx: np.ndarray | Tensor) -> "FolderSource":
        idx = np.asarray(idx, dtype=np.int64)
        return FolderSource(self.name, self.classes, self.labels[idx], dict(self.info), self.root, self.names.take(idx))

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.root}\n{self.classes}".encode())
        self.names.digest(h)
        h.update(self.labels.tobytes())
        return h.hexdigest()[:16]


APPLE_DOUBLE = "._"  # macOS's resource forks beside each copied file (``._0001.JPEG``): never an image


def _scan(d: Path) -> tuple[list[str], list[str], list[str]]:
    """(images, names of images that are not files, other files) of a class folder ``d``, at any depth below it (as
    torchvision's ``ImageFolder`` walks it: folders and links to folders followed, each real folder once, so a link
    that loops ends), as paths relative to ``d``. Other files: names that are not images (``.DS_Store``,
    ``Thumbs.db``, ``notes.txt``) and macOS's ``._*`` resource forks."""
    images: list[str] = []
    odd: list[str] = []
    other: list[str] = []
    seen: set[tuple[int, int]] = set()
    todo = [(d, "")]
    while todo:
        folder, rel = todo.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = list(os.scandir(folder))
        except OSError:
            odd.append(str(folder))
            continue
        for e in entries:
            name = rel + e.name
            if e.name.lower().endswith(IMAGE_EXTS) and not e.name.startswith(APPLE_DOUBLE):
                if e.is_file():
                    images.append(name)
                else:  # a named pipe, a broken link, a folder named like an image (named; what it holds is read)
                    odd.append(e.path)
                    if e.is_dir():
                        todo.append((Path(e.path), name + "/"))
            elif e.is_dir():
                todo.append((Path(e.path), name + "/"))
            else:
                other.append(e.path)
    return sorted(images), odd, other


def _classes(split_dir: Path, root: Path) -> list[str]:
    listed = root / "classes.txt"
    if listed.exists():
        return listed.read_text().split()
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir())


# ----------------------------------------------------------------------------- ImageNet's flat validation folder
# the label files and how they are read: vision/imagenet_val.py

def flat_val_files(root: str | Path) -> list[Path]:
    """The label files a folder's flat val/ (or test/) is read with (:func:`flat_val_labels`) that lie outside the
    folder (Kaggle's root), found without reading them: part of a run's data identity beside the folder; [] for a
    split of class folders, a missing one or labels inside the folder."""
    root = Path(root)
    split_dir = next((root / n for n in ("val", "test") if (root / n).is_dir()), None)
    if split_dir is None or not _is_flat(split_dir):
        return []
    places = _label_places(split_dir, root)
    found = _find(VAL_SOLUTION, places)
    files = [found] if found else [f for f in (_find(GROUND_TRUTH, places), _find(SYNSET_MAPPING, places)
                                               or _find(META_MAT, places)) if f is not None]
    return [f for f in files if not f.resolve().is_relative_to(root.resolve())]


def _is_flat(split_dir: Path) -> bool:
    """Images directly in ``split_dir`` and no folder beside them (ImageNet's official validation layout)."""
    flat = False
    for e in os.scandir(split_dir):
        if e.is_dir():
            return False
        flat = flat or e.name.lower().endswith(IMAGE_EXTS)
    return flat


def _flat_source(root: Path, split_dir: Path, classes: list[str] | None) -> FolderSource:
    """A flat validation folder labelled by :func:`flat_val_labels`; the classes (``classes``, else ``classes.txt``,
    else the train/ folder's, else the label file's wnids, sorted) set the label order. Images without a label, or of
    a class outside ``classes``, are named in one line each kind and counted (``info["unlabelled"]``,
    ``info["other_classes"]``)."""
    by_stem, where = flat_val_labels(split_dir, root)
    if classes is None:
        train = root / "train"
        classes = (_classes(train, root) if train.is_dir() or (root / "classes.txt").exists()
                   else sorted(set(by_stem.values())))
    index = {c: i for i, c in enumerate(classes)}
    entries = [e for e in os.scandir(split_dir) if e.name.lower().endswith(IMAGE_EXTS)]
    odd = sorted(e.path for e in entries if not e.is_file())
    files: list[str] = []
    labels: list[int] = []
    unlabelled: list[str] = []
    other: list[str] = []
    for name in sorted(e.name for e in entries if e.is_file()):
        wnid = by_stem.get(name.rsplit(".", 1)[0])
        if wnid is None:
            unlabelled.append(name)
        elif wnid not in index:
            other.append(f"{name} ({wnid})")
        else:
            files.append(f"{split_dir.name}/{name}")
            labels.append(index[wnid])
    if unlabelled:
        warnings.warn(f"{split_dir}: {len(unlabelled)} image(s) have no label in {where}, left out; first: "
                      f"{unlabelled[0]}", stacklevel=3)
    if other:
        warnings.warn(f"{split_dir}: {len(other)} image(s) of classes outside the {len(classes)} trained on, left "
                      f"out; first: {other[0]}", stacklevel=3)
    if odd:
        warnings.warn(f"{split_dir}: {len(odd)} name(s) of images that are not files (a named pipe, a folder or a "
                      f"broken link) left out; first: {shown(odd[0])}", stacklevel=3)
    if not files:
        raise ValueError(f"{split_dir}: none of its images has a class among the {len(classes)} of the data "
                         f"(labels from {where})")
    return FolderSource(root.name, list(classes), np.asarray(labels, dtype=np.int64),
                        {"source": str(root), "layout": "image-folder, flat validation", "split": split_dir.name,
                         "labels_from": where, "unlabelled": len(unlabelled), "other_classes": len(other),
                         "empty_classes": 0, "not_files": len(odd)}, str(root), Names.of(files))


def folder_source(root: str | Path, split: str, classes: list[str] | None = None) -> FolderSource:
    """The ``split`` ("train", or "val" / "test": the first present) of an ImageNet-style folder, scanned once (no
    image is opened). A class folder with no image is named in one line and counted (``info["empty_classes"]``);
    a split with no image at all, or a missing split, is a ``ValueError`` naming the folder and the layout. A flat
    val/ or test/ (ImageNet's official validation folder) is labelled by its label files (:func:`flat_val_labels`),
    its classes in ``classes``' order."""
    root = Path(root)
    names = (split,) if split == "train" else ("val", "test")
    split_dir = next((root / n for n in names if (root / n).is_dir()), None)
    if split_dir is None:
        raise ValueError(f"image folder {root}: no {' or '.join(n + '/' for n in names)} split; the layout is "
                         f"{root}/train/<class>/*.JPEG and {root}/val/<class>/*.JPEG (or test/, or ImageNet's flat "
                         f"val/ with {VAL_SOLUTION})")
    if split != "train" and _is_flat(split_dir):
        return _flat_source(root, split_dir, classes)
    classes = classes if classes is not None else _classes(split_dir, root)
    files: list[str] = []
    labels: list[int] = []
    empty: list[str] = []
    odd: list[str] = []  # named like images but not files: a named pipe, a folder, a broken link
    other: list[str] = []  # files that are not images: .DS_Store, Thumbs.db, notes, macOS's ._* forks
    for c, name in enumerate(classes):
        d = split_dir / name
        if not d.is_dir():
            empty.append(str(d))
            continue
        found, odd_here, other_here = _scan(d)
        odd += odd_here
        other += other_here
        if not found:
            empty.append(str(d))
        files += [f"{split_dir.name}/{name}/{f}" for f in found]
        labels += [c] * len(found)
    for d in empty:
        warnings.warn(f"{d}: no image ({', '.join(IMAGE_EXTS)}); its class has no {split_dir.name} sample",
                      stacklevel=2)
    if odd:
        warnings.warn(f"{split_dir}: {len(odd)} name(s) of images that are not files (a named pipe, a folder or a "
                      f"broken link) left out; first: {shown(sorted(odd)[0])}", stacklevel=2)
    if other:
        warnings.warn(f"{split_dir}: {len(other)} file(s) that are not images ({', '.join(IMAGE_EXTS)}: e.g. "
                      f".DS_Store, Thumbs.db, macOS's ._* forks) left out; first: {shown(sorted(other)[0])}",
                      stacklevel=2)
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_EXTS)}) under {split_dir}/<class>/")
    return FolderSource(root.name, list(classes), np.asarray(labels, dtype=np.int64),
                        {"source": str(root), "layout": "image-folder", "split": split_dir.name,
                         "empty_classes": len(empty), "not_files": len(odd), "not_images": len(other)}, str(root),
                        Names.of(files))


# ----------------------------------------------------------------------------- WebDataset shards

def expand_shards(pattern: str) -> list[str]:
    """``/d/{00000..00002}.tar`` -> the three paths (webdataset's brace expansion, ``::`` between patterns)."""
    import braceexpand

    out = [p for part in pattern.split("::") for p in braceexpand.braceexpand(part)]
    missing = [p for p in out if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"shards {pattern}: {len(missing)} of {len(out)} not found (first: {missing[0]}); the layout "
                         "is WebDataset .tar shards, e.g. wds:/data/cc3m/{00000..00331}.tar, each sample a key's "
                         ".jpg and .txt (or .json with a caption)")
    return out


def _index_shard(path: str) -> tuple[list[tuple[str, int, int, int, int, str | None, int]], list[str]]:
    """[(key, image offset, image size, caption offset, caption size, caption kind, class)] of one shard, and the
    problems found (a cut-off shard: its readable samples are kept and the cut named)."""
    members: dict[str, dict[str, tuple[int, int]]] = {}
    order: list[str] = []
    problems: list[str] = []
    cls: dict[str, int] = {}
    try:
        with tarfile.open(path, "r:") as tar:
            for m in iter(tar.next, None):  # headers only: the data is skipped by a seek
                if not m.isfile():
                    continue
                base = os.path.basename(m.name)
                key, _, ext = base.partition(".")
                key = os.path.join(os.path.dirname(m.name), key)
                if key not in members:
                    members[key] = {}
                    order.append(key)
                members[key][ext.lower()] = (m.offset_data, m.size)
    except (tarfile.TarError, OSError, EOFError) as exc:
        problems.append(f"{path}: cut off or not a tar file after {len(order)} sample(s) ({type(exc).__name__}: {exc})")
    end = os.path.getsize(path)
    cut: set[str] = set()
    for key in order:  # a member whose data runs past the end (a cut-off shard): left out, named with its sample
        for ext, (off, size) in list(members[key].items()):
            if off + size > end:
                del members[key][ext]
                cut.add(key)
                problems.append(f"{path}: sample {key}: its .{ext} is cut off ({max(0, end - off)} of {size} bytes)")
    for key in order:  # every sample's class, read after the headers (a cut in the headers keeps the classes read)
        if "cls" not in members[key]:
            continue
        off, size = members[key]["cls"]
        try:
            with open(path, "rb") as fh:
                fh.seek(off)
                text = fh.read(size).decode().strip()
            cls[key] = int(text)
            if cls[key] < 0:
                raise ValueError(text)
        except (ValueError, OSError):  # UnicodeDecodeError is a ValueError
            problems.append(f"{path}: sample {key}: class is not an integer >= 0")
            cls[key] = -1
    rows = []
    for key in order:
        m = members[key]
        img = next((k for k in SHARD_IMAGE_KEYS if k in m), None)
        if img is None:
            if key not in cut:
                problems.append(f"{path}: sample {key} has no image ({', '.join(SHARD_IMAGE_KEYS)})")
            continue
        cap_kind = "txt" if "txt" in m else ("json" if "json" in m else None)
        cap = m[cap_kind] if cap_kind else (0, 0)
        rows.append((key, *m[img], *cap, cap_kind, cls.get(key, -1)))
    return rows, problems


INDEX_VERSION = 2  # a shard index cached by an older rule is read again (1: a cut shard's classes were -2)


@dataclass
class ShardSource(Source):
    """Samples of WebDataset shards, read by offset."""

    shards: list[str] = field(default_factory=list)
    shard: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # (N,) shard of each sample
    spans: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))  # image off/size, caption off/size
    cap_json: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    keys: Names = field(default_factory=lambda: Names.of([]))

    def _bytes(self, i: int, off: int, size: int) -> bytes:
        path = self.shards[int(self.shard[i])]
        data = read_file(path, f"shard {path} (sample {self.keys[i]})", int(off), int(size))
        if len(data) != size:
            raise UnreadableImage(f"{self.where(i)}: cut off ({len(data)} of {size} bytes)")
        return data

    def read(self, i: int) -> bytes:
        return self._bytes(i, self.spans[i, 0], self.spans[i, 1])

    def where(self, i: int) -> str:
        return f"{self.shards[int(self.shard[i])]}:{self.keys[i]}"

    def caption(self, i: int) -> str | None:
        if self.spans[i, 3] == 0 and self.spans[i, 2] == 0:
            return None
        text = self._bytes(i, self.spans[i, 2], self.spans[i, 3]).decode(errors="replace")
        if self.cap_json[i]:
            try:
                return str(json.loads(text).get("caption", ""))
            except (ValueError, AttributeError):
                return ""
        return text.strip()

    def take(self, idx: np.ndarray | Tensor) -> "ShardSource":
        idx = np.asarray(idx, dtype=np.int64)
        return ShardSource(self.name, self.classes, self.labels[idx], dict(self.info), self.shards, self.shard[idx],
                           self.spans[idx], self.cap_json[idx], self.keys.take(idx))

    def fingerprint(self) -> str:
        stats = [os.stat(p) for p in self.shards]
        h = hashlib.sha256("\n".join(f"{p}:{st.st_size}:{st.st_mtime_ns}"
                                      for p, st in zip(self.shards, stats)).encode())
        for a in (self.shard, self.spans, self.labels):
            h.update(a.tobytes())
        self.keys.digest(h)
        return h.hexdigest()[:16]


def shard_source(pattern: str, cache: bool = True) -> ShardSource:
    """The samples of the shards ``pattern`` names, each shard's index read from the cache when its path, size and
    modification time are unchanged. A cut-off shard keeps the samples before the cut; an empty one has none; each
    is named in one line and counted (``info["shard_problems"]``)."""
    from suite.paths import cache_dir

    pattern = pattern[4:] if pattern.lower().startswith("wds:") else pattern
    paths = expand_shards(pattern)
    rows_all: list[list[Any]] = []
    problems_all: list[str] = []
    for s_id, p in enumerate(paths):
        st = os.stat(p)
        key = hashlib.sha256(f"{INDEX_VERSION}:{os.path.realpath(p)}:{st.st_size}:{st.st_mtime_ns}".encode()
                             ).hexdigest()[:20]
        cached = cache_dir("vision", "shard-index") / f"{key}.json"
        rows = problems = None
        if cache and cached.exists():
            try:
                blob = json.loads(cached.read_text())
                rows, problems = blob["rows"], blob["problems"]
            except (ValueError, KeyError, OSError):
                rows = None
        if rows is None:
            rows, problems = _index_shard(p)
            if cache:
                tmp = cached.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"rows": rows, "problems": problems}))
                os.replace(tmp, cached)  # two processes indexing at once: one file, whole
        if not rows:
            problems = [*problems, f"{p}: no sample (an empty shard)"]
        rows_all.append([s_id, rows])
        problems_all += problems
    for line in problems_all:
        warnings.warn(line, stacklevel=2)
    shard_ids, keys, spans, cap_json, labels = [], [], [], [], []
    for s, rows in rows_all:
        for key, ioff, isize, coff, csize, kind, cls in rows:
            shard_ids.append(s)
            keys.append(key)
            spans.append((ioff, isize, coff, csize))
            cap_json.append(kind == "json")
            labels.append(cls)
    if not keys:
        raise ValueError(f"shards {pattern}: no readable sample in {len(paths)} shard(s)")
    labels_a = np.asarray(labels, dtype=np.int64)
    n_cls = int(labels_a.max()) + 1 if (labels_a >= 0).any() else 0
    return ShardSource(Path(paths[0]).parent.name or "shards", [str(c) for c in range(n_cls)], labels_a,
                       {"source": pattern, "layout": "webdataset", "shards": len(paths),
                        "shard_problems": len(problems_all)}, paths, np.asarray(shard_ids, dtype=np.int32),
                       np.asarray(spans, dtype=np.int64).reshape(-1, 4), np.asarray(cap_json, dtype=bool),
                       Names.of(keys))


def open_source(dataset: str, split: str, classes: list[str] | None = None) -> Source:
    """``folder:PATH`` or ``wds:PATTERN`` (``split`` "train" or "test": a folder's val/ or test/; shards have one
    split, the pattern's)."""
    kind, _, where = dataset.partition(":")
    if kind.lower() == "folder":
        return folder_source(where, split, classes)
    if kind.lower() == "wds":
        return shard_source(where)
    raise ValueError(f"not streamed data: {dataset!r} (folder:PATH or wds:PATTERN)")


def check_pattern(dataset: str) -> None:
    """A cheap check of a streamed data set's name before anything is read (a ``ValueError`` naming it)."""
    kind, _, where = dataset.partition(":")
    if not where:
        raise ValueError(f"--dataset {dataset}: give a path ({kind}:PATH)")
    if kind.lower() == "folder" and not Path(where).is_dir():
        raise ValueError(f"--dataset {dataset}: no folder {where}; the layout is {where}/train/<class>/*.JPEG and "
                         f"{where}/val/<class>/*.JPEG (or test/)")
    if kind.lower() == "wds" and not re.search(r"\.tar\b|\{", where):
        raise ValueError(f"--dataset {dataset}: not a shard pattern (e.g. wds:/data/cc3m/{{00000..00331}}.tar)")
