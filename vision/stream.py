"""Streaming image data at the papers' scale: ImageNet-style folders (``folder:PATH``) and WebDataset ``.tar`` shards
(``wds:PATTERN``, the format img2dataset writes for CC3M / CC12M), decoded one sample at a time in ``DataLoader``
workers, the random resized crop taken at decode time at the training size. Nothing is stacked: memory holds the file
index (one packed byte array, not a Python object per file, so forked workers share it) and the batches in flight,
whatever the data's size.

Layouts:
- folder: ``PATH/train/<class>/*`` and ``PATH/val/<class>/*`` or ``PATH/test/<class>/*`` (classes sorted by name, or
  in the order of ``PATH/classes.txt``); images of any size and mode (converted to RGB);
- shards: ``wds:/data/cc3m/{00000..00331}.tar`` (brace ranges as webdataset writes them); a sample is the tar members
  that share a key: the image (``jpg``, ``jpeg``, ``png``, ``webp``), its caption (``txt``, or ``json`` with a
  ``caption`` field) and an optional class (``cls``). Each shard's member offsets are indexed once (cached by the
  shard's path, size and modification time), so a sample is read by one seek.

Order and randomness: the epoch's order is the engine's (:func:`suite.train.engine.epoch_batches`, a function of the
seed and the epoch, sharded over ranks) and each crop's randomness comes from a generator seeded by (seed, epoch,
sample), never from a worker's stream: any number of workers, and a run resumed in the middle of an epoch, see the same
crops of the same samples.

The crops follow torchvision's definitions (its ``RandomResizedCrop.get_params``, crop then bilinear resize with
Pillow; for evaluation ``Resize(round(S * 256 / 224))`` then ``CenterCrop(S)``); the rest of the augmentation (flip,
colour jitter, grayscale, blur) runs batched on the device (:class:`vision.transforms.ViewAugment`).

A file that cannot be read or decoded (cut off, not an image, deleted during the epoch, replaced by a named pipe, on
a network mount that times out) is named in one line, counted and replaced by the next readable sample, so batches
keep their size; :data:`MAX_REPLACEMENTS` in a row (a shard or a mount gone) stop the run with one line naming where,
its last checkpoint kept. A class folder with no image is named and counted, and so are names of images that are not
files (left out of the index).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import tarfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from suite.train.seeding import sample_rng

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
SHARD_IMAGE_KEYS = ("jpg", "jpeg", "png", "webp")
STREAM_PREFIXES = ("folder:", "wds:")
EVAL_RESIZE = 256 / 224  # ImageNet's evaluation: resize the short side to 256, take the centre 224
MAX_REPLACEMENTS = 16  # unreadable samples in a row before a batch gives up (the data is not readable at all)


def is_streamed(dataset: str) -> bool:
    """Whether ``dataset`` names streamed data (a folder or shards) rather than an in-memory set."""
    return dataset.lower().startswith(STREAM_PREFIXES)


class UnreadableImage(ValueError):
    """An image that cannot be read or decoded; its message names the file."""


# ----------------------------------------------------------------------------- sources

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
    mount (a network share timing out: ETIMEDOUT, EIO, ESTALE) is the same one line."""
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
        enc = [s.encode() for s in strings]
        offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(e) for e in enc])
        return cls(np.frombuffer(b"".join(enc), dtype=np.uint8).copy(), offsets, np.arange(len(enc), dtype=np.int64))

    def __getitem__(self, i: int) -> str:
        r = self.rows[i]
        return bytes(self.buf[self.offsets[r]:self.offsets[r + 1]]).decode()

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


def _classes(split_dir: Path, root: Path) -> list[str]:
    listed = root / "classes.txt"
    if listed.exists():
        return listed.read_text().split()
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir())


def folder_source(root: str | Path, split: str, classes: list[str] | None = None) -> FolderSource:
    """The ``split`` ("train", or "val" / "test": the first present) of an ImageNet-style folder, scanned once (no
    image is opened). A class folder with no image is named in one line and counted (``info["empty_classes"]``);
    a split with no image at all, or a missing split, is a ``ValueError`` naming the folder and the layout."""
    root = Path(root)
    names = (split,) if split == "train" else ("val", "test")
    split_dir = next((root / n for n in names if (root / n).is_dir()), None)
    if split_dir is None:
        raise ValueError(f"image folder {root}: no {' or '.join(n + '/' for n in names)} split; the layout is "
                         f"{root}/train/<class>/*.JPEG and {root}/val/<class>/*.JPEG (or test/)")
    classes = classes if classes is not None else _classes(split_dir, root)
    files: list[str] = []
    labels: list[int] = []
    empty: list[str] = []
    odd: list[str] = []  # named like images but not files: a named pipe, a folder, a broken link
    for c, name in enumerate(classes):
        d = split_dir / name
        if not d.is_dir():
            empty.append(str(d))
            continue
        entries = [e for e in os.scandir(d) if e.name.lower().endswith(IMAGE_EXTS)]
        found = sorted(e.name for e in entries if e.is_file())
        odd += [e.path for e in entries if not e.is_file()]
        if not found:
            empty.append(str(d))
        files += [f"{split_dir.name}/{name}/{f}" for f in found]
        labels += [c] * len(found)
    for d in empty:
        warnings.warn(f"{d}: no image ({', '.join(IMAGE_EXTS)}); its class has no {split_dir.name} sample",
                      stacklevel=2)
    if odd:
        warnings.warn(f"{split_dir}: {len(odd)} name(s) of images that are not files (a named pipe, a folder or a "
                      f"broken link) left out; first: {sorted(odd)[0]}", stacklevel=2)
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_EXTS)}) under {split_dir}/<class>/")
    return FolderSource(root.name, list(classes), np.asarray(labels, dtype=np.int64),
                        {"source": str(root), "layout": "image-folder", "split": split_dir.name,
                         "empty_classes": len(empty), "not_files": len(odd)}, str(root), Names.of(files))


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
                if ext.lower() == "cls":
                    cls[key] = -2  # read below
            for key in [k for k, v in cls.items() if v == -2]:
                off, size = members[key]["cls"]
                tar.fileobj.seek(off)  # type: ignore[union-attr]
                try:
                    cls[key] = int(tar.fileobj.read(size).decode().strip())  # type: ignore[union-attr]
                except ValueError:
                    problems.append(f"{path}: sample {key}: class is not an integer")
                    cls[key] = -1
    except (tarfile.TarError, OSError, EOFError) as exc:
        problems.append(f"{path}: cut off or not a tar file after {len(order)} sample(s) ({type(exc).__name__}: {exc})")
    rows = []
    for key in order:
        m = members[key]
        img = next((k for k in SHARD_IMAGE_KEYS if k in m), None)
        if img is None:
            problems.append(f"{path}: sample {key} has no image ({', '.join(SHARD_IMAGE_KEYS)})")
            continue
        cap_kind = "txt" if "txt" in m else ("json" if "json" in m else None)
        cap = m[cap_kind] if cap_kind else (0, 0)
        rows.append((key, *m[img], *cap, cap_kind, cls.get(key, -1)))
    return rows, problems


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
        key = hashlib.sha256(f"{os.path.realpath(p)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:20]
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


# ----------------------------------------------------------------------------- decoding and crops

def decode(data: bytes, where: str) -> Any:
    """A PIL image in RGB; a file that is not a readable image is an :class:`UnreadableImage` naming it."""
    from PIL import Image, UnidentifiedImageError

    try:
        im = Image.open(io.BytesIO(data))
        im.load()
        return im.convert("RGB") if im.mode != "RGB" else im
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise UnreadableImage(f"image {where} cannot be decoded ({type(exc).__name__}: {exc})") from None


def crop_params(rng: np.random.Generator, height: int, width: int, scale: tuple[float, float],
                ratio: tuple[float, float]) -> tuple[int, int, int, int]:
    """(top, left, h, w) of a random resized crop, torchvision's ``RandomResizedCrop.get_params``: 10 tries of an area
    ~ U(scale) x H x W and a log-uniform aspect, else the centre crop with the aspect clamped to ``ratio``."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def resized_crop(im: Any, box: tuple[int, int, int, int], size: int) -> np.ndarray:
    """torchvision's ``F.resized_crop`` on a PIL image: crop (top, left, h, w), bilinear resize to size x size;
    (S, S, 3) uint8."""
    from PIL import Image

    top, left, h, w = box
    return np.asarray(im.crop((left, top, left + w, top + h)).resize((size, size), Image.BILINEAR), dtype=np.uint8)


def center_crop(im: Any, size: int, resize: int) -> np.ndarray:
    """torchvision's ``Resize(resize)`` (short side, bilinear) then ``CenterCrop(size)``; (S, S, 3) uint8."""
    from PIL import Image

    w, h = im.size
    short, long_ = (w, h) if w <= h else (h, w)
    new_short, new_long = resize, int(resize * long_ / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    if (nw, nh) != (w, h):
        im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    return np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8)


@dataclass
class EpochBatch:
    """A batch of sample indices of one epoch (what the engine hands the loader's workers)."""

    epoch: int
    index: Tensor

    def __len__(self) -> int:
        return int(self.index.numel())


@dataclass
class StreamBatch:
    """What a worker returns: ``images`` (V, N, 3, S, S) uint8 crops (V = 1 for evaluation), ``labels`` (N,), the
    crop IoU of views 0 and 1 (N,) or None, caption embeddings (N, D) or None, and the unreadable files replaced."""

    images: Tensor
    labels: Tensor
    iou: Tensor | None = None
    captions: Tensor | None = None
    skipped: list[str] = field(default_factory=list)

    def pin_memory(self) -> "StreamBatch":
        return StreamBatch(self.images.pin_memory(), self.labels.pin_memory(),
                           None if self.iou is None else self.iou.pin_memory(),
                           None if self.captions is None else self.captions.pin_memory(), self.skipped)


def _iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    (t0, l0, h0, w0), (t1, l1, h1, w1) = a, b
    ih = max(0, min(t0 + h0, t1 + h1) - max(t0, t1))
    iw = max(0, min(l0 + w0, l1 + w1) - max(l0, l1))
    inter = ih * iw
    return inter / (h0 * w0 + h1 * w1 - inter)


def readable(source: Source, i: int, take: Any, skipped: list[str]) -> tuple[int, Any]:
    """``(j, take(j))`` of the first sample from ``i`` on that can be read and decoded: an unreadable one is said in
    ``skipped`` and the next takes its place (a batch keeps its size); :data:`MAX_REPLACEMENTS` in a row is an
    :class:`UnreadableImage` naming where they began (the data is not readable at all)."""
    j = i
    for _ in range(MAX_REPLACEMENTS):
        try:
            return j, take(j)
        except UnreadableImage as exc:
            skipped.append(str(exc))
            j = (j + 1) % len(source)
    raise UnreadableImage(f"{MAX_REPLACEMENTS} unreadable images in a row from {source.where(i)} on: {skipped[-1]}")


class Crops:
    """The loader's part of a training step: ``EpochBatch`` -> :class:`StreamBatch` of ``views`` random resized crops
    per image at ``size`` (scale, ratio: the recipe's), decoded in the worker; ``captions``: a (N_source, D) array
    (memory-mapped) of per-sample caption embeddings, gathered for the batch."""

    def __init__(self, source: Source, size: int, views: int, scale: tuple[float, float],
                 ratio: tuple[float, float], seed: int, captions: np.ndarray | None = None, iou: bool = False) -> None:
        self.source, self.size, self.views, self.scale, self.ratio = source, int(size), int(views), scale, ratio
        self.seed, self.captions, self.iou = int(seed), captions, iou

    def _one(self, epoch: int, i: int) -> tuple[list[np.ndarray], list[tuple[int, int, int, int]]]:
        im = decode(self.source.read(i), self.source.where(i))
        rng = sample_rng(self.seed, epoch, i)
        boxes = [crop_params(rng, im.height, im.width, self.scale, self.ratio) for _ in range(self.views)]
        return [resized_crop(im, b, self.size) for b in boxes], boxes

    def __call__(self, batch: EpochBatch) -> StreamBatch:
        n, v, s = len(batch), self.views, self.size
        out = np.empty((v, n, s, s, 3), dtype=np.uint8)
        ious = np.zeros(n, dtype=np.float32)
        used = np.empty(n, dtype=np.int64)
        skipped: list[str] = []
        for k, i in enumerate(batch.index.tolist()):
            j, (crops, boxes) = readable(self.source, i, lambda j: self._one(batch.epoch, j), skipped)
            used[k] = j
            for view in range(v):
                out[view, k] = crops[view]
            if self.iou and v >= 2:
                ious[k] = _iou(boxes[0], boxes[1])
        images = torch.from_numpy(out).permute(0, 1, 4, 2, 3).contiguous()  # (V, N, 3, S, S)
        caps = None if self.captions is None else torch.from_numpy(np.asarray(self.captions[used], dtype=np.float32))
        return StreamBatch(images, torch.from_numpy(self.source.labels[used]), torch.from_numpy(ious) if self.iou
                           else None, caps, skipped)


class CenterCrops:
    """The evaluation loader's part: index batch -> :class:`StreamBatch` (V = 1) of ImageNet's evaluation crops
    (resize the short side to ``round(size * 256 / 224)``, centre ``size``); an unreadable file stays counted and
    its slot is the next readable image's (the features of every other image are unchanged)."""

    def __init__(self, source: Source, size: int) -> None:
        self.source, self.size = source, int(size)
        self.resize = int(round(size * EVAL_RESIZE))

    def _crop(self, j: int) -> np.ndarray:
        return center_crop(decode(self.source.read(j), self.source.where(j)), self.size, self.resize)

    def __call__(self, index: Tensor) -> StreamBatch:
        n, s = len(index), self.size
        out = np.empty((n, s, s, 3), dtype=np.uint8)
        labels = np.empty(n, dtype=np.int64)
        skipped: list[str] = []
        for k, i in enumerate(index.tolist()):
            j, out[k] = readable(self.source, i, self._crop, skipped)
            labels[k] = self.source.labels[j]
        return StreamBatch(torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()[None], torch.from_numpy(labels),
                           skipped=skipped)


class Skips:
    """The unreadable files met, each said once (one line naming it) and counted."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def add(self, lines: list[str]) -> None:
        for line in lines:
            if line not in self.seen:
                self.seen.add(line)
                print(f"skipped: {line}", flush=True)

    def __len__(self) -> int:
        return len(self.seen)


def eval_images(source: Source, size: int, batch_size: int, workers: int = 0,
                skips: Skips | None = None) -> Iterator[tuple[Tensor, Tensor]]:
    """(images (B, 3, S, S) uint8, labels) of every sample of ``source`` in order, ImageNet's evaluation crops,
    decoded in ``workers`` processes."""
    from suite.train.engine import Prefetch

    pf = Prefetch(CenterCrops(source, size), workers)
    try:
        for sb in pf(list(torch.arange(len(source)).split(batch_size))):
            if skips is not None:
                skips.add(sb.skipped)
            yield sb.images[0], sb.labels
    finally:
        pf.close()


def caption_embeddings(source: Source, model: str = "", batch_size: int = 256) -> np.ndarray:
    """(N, D) float16 caption embeddings of every sample, memory-mapped from a cache computed once per source (its
    fingerprint and the model): a sentence-transformers model (default: the packaged all-MiniLM-L6-v2). A sample
    without a caption embeds the empty string (and is counted in the source's info)."""
    from suite.paths import cache_dir
    from vision.graph import default_text_model

    path = model or default_text_model()
    key = hashlib.sha256(f"{source.fingerprint()}:{Path(path).resolve()}".encode()).hexdigest()[:20]
    file = cache_dir("vision", "caption-emb") / f"{key}.npy"
    if not file.exists():
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(path, device="cpu")
        dim = int((getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension)() or 0)
        tmp = file.with_suffix(f".{os.getpid()}.tmp.npy")
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(len(source), dim))
        missing = 0
        for start in range(0, len(source), batch_size):  # a shard's captions a batch at a time: memory flat
            caps = [source.caption(i) for i in range(start, min(len(source), start + batch_size))]
            missing += sum(c is None for c in caps)
            emb = st.encode([c or "" for c in caps], batch_size=batch_size, convert_to_numpy=True,
                            normalize_embeddings=True, show_progress_bar=False)
            out[start:start + len(caps)] = emb.astype(np.float16)
        out.flush()
        del out
        os.replace(tmp, file)  # whole or not at all
        source.info["captions_missing"] = missing
    return np.load(file, mmap_mode="r")


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
