"""Streaming image data at the papers' scale: ImageNet-style folders (``folder:PATH``) and WebDataset ``.tar`` shards
(``wds:PATTERN``, the format img2dataset writes for CC3M / CC12M), decoded one sample at a time in ``DataLoader``
workers, the random resized crop taken at decode time at the training size. Nothing is stacked: memory holds the file
index (one packed byte array, not a Python object per file, so forked workers share it) and the batches in flight,
whatever the data's size.

The samples come from a :class:`vision.sources.Source` (a folder's or the shards' file index); this module decodes
and crops them into batches.

Order and randomness: the epoch's order is the engine's (:func:`suite.train.batches.epoch_batches`, a function of the
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
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch import Tensor

from suite.train.seeding import sample_rng
from vision.decode import draft_image, fast_crops, fast_decode
from vision.sources import Source, UnreadableImage

EVAL_RESIZE = 256 / 224  # ImageNet's evaluation: resize the short side to 256, take the centre 224
MAX_REPLACEMENTS = 16  # unreadable samples in a row before a batch gives up (the data is not readable at all)


# ----------------------------------------------------------------------------- decoding and crops

def decode(data: bytes, where: str) -> Any:
    """A PIL image in RGB; a file that is not a readable image is an :class:`UnreadableImage` naming it (the same
    words each time it is met, so it is counted once). Any mode is taken: CMYK, grayscale, palette (with
    transparency: through RGBA, as Pillow asks), 16-bit and 32-bit grayscale scaled to 8 bits (Pillow's own
    conversion clips them: a 16-bit PNG would be white)."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise UnreadableImage(f"image {where} cannot be decoded (an empty file)")
    fast = fast_decode(data)  # an RGB or grayscale JPEG by libjpeg-turbo directly (vision.decode): Pillow's pixels
    if fast is not None:
        return fast
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
        if im.mode == "RGB":
            return im
        if im.mode.startswith("I") or im.mode == "F":  # I;16, I;16B, I (16 or 32-bit integers), F: to 8 bits
            arr = np.asarray(im, dtype=np.float64)
            top = 65535.0 if im.mode.startswith("I;16") or arr.max(initial=0) > 255 else 255.0
            if im.mode == "F":
                top = 1.0 if arr.max(initial=0) <= 1.0 else 255.0
            im = Image.fromarray(np.clip(np.rint(arr * (255.0 / top)), 0, 255).astype(np.uint8))
        elif im.mode == "P" and "transparency" in im.info:
            im = im.convert("RGBA")
        return im.convert("RGB")
    except UnidentifiedImageError:
        raise UnreadableImage(f"image {where} cannot be decoded (not an image Pillow reads)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
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
                 ratio: tuple[float, float], seed: int, captions: np.ndarray | None = None, iou: bool = False,
                 draft: float | None = None) -> None:
        self.source, self.size, self.views, self.scale, self.ratio = source, int(size), int(views), scale, ratio
        self.seed, self.captions, self.iou, self.draft = int(seed), captions, iou, draft

    def _boxes(self, epoch: int, i: int, height: int, width: int) -> list[tuple[int, int, int, int]]:
        rng = sample_rng(self.seed, epoch, i)
        return [crop_params(rng, height, width, self.scale, self.ratio) for _ in range(self.views)]

    def _one(self, epoch: int, i: int) -> tuple[list[np.ndarray], list[tuple[int, int, int, int]]]:
        data = self.source.read(i)
        # an RGB or grayscale JPEG by the fast decoder (vision.decode: these crops' pixels exactly), or with the
        # named option ``draft`` decoded at 1/2 to 1/8 where the crops allow; None: Pillow, as before
        got = fast_crops(data, lambda h, w: self._boxes(epoch, i, h, w), self.size, self.draft)
        if got is not None:
            return got
        im = decode(data, self.source.where(i))
        boxes = self._boxes(epoch, i, im.height, im.width)
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

    def __init__(self, source: Source, size: int, draft: float | None = None) -> None:
        self.source, self.size, self.draft = source, int(size), draft
        self.resize = int(round(size * EVAL_RESIZE))

    def _crop(self, j: int) -> np.ndarray:
        data = self.source.read(j)
        im = draft_image(data, self.resize, self.draft) if self.draft else None  # the named option, off by default
        return center_crop(im if im is not None else decode(data, self.source.where(j)), self.size, self.resize)

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
    from suite.train.batches import Prefetch

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
