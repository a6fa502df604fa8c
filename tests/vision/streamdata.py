"""Generated streamed image data for the tests (nothing real is read): an ImageNet-style folder of JPEGs and PNGs of
varied sizes and modes, and WebDataset shards written with webdataset's own writer."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

MODES = ("RGB", "L", "RGBA", "P", "CMYK")


def _image(rng: np.random.Generator, cls: int, h: int, w: int, mode: str):  # noqa: ANN202
    """A class-coloured image with noise (kNN can tell the classes apart), in ``mode``."""
    from PIL import Image

    base = np.array([(60 + 90 * cls) % 256, (200 - 70 * cls) % 256, (30 + 50 * cls) % 256], dtype=np.float64)
    arr = np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
    im = Image.fromarray(arr)
    return im.convert(mode) if mode != "RGB" else im


def image_folder(root: Path, classes: int = 3, train: int = 8, test: int = 4, sizes: tuple[int, int] = (40, 90),
                 split: str = "val", seed: int = 0) -> Path:
    """``root/train/cNN/*`` and ``root/<split>/cNN/*``: images of random sizes in ``sizes`` (width and height apart),
    JPEG mostly, every fifth a PNG, modes cycling through RGB, L, RGBA, P and CMYK (JPEG takes RGB, L, CMYK)."""
    rng = np.random.default_rng(seed)
    k = 0
    for sp, n in (("train", train), (split, test)):
        for c in range(classes):
            d = root / sp / f"c{c:02d}"
            d.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                h, w = (int(v) for v in rng.integers(sizes[0], sizes[1] + 1, 2))
                mode = MODES[k % len(MODES)]
                png = (k % 5 == 4 and mode != "CMYK") or mode in ("RGBA", "P")
                _image(rng, c, h, w, mode).save(d / f"{i:04d}.{'png' if png else 'JPEG'}", **({} if png else
                                                                                                {"quality": 85}))
                k += 1
    return root


def shards(root: Path, n: int = 24, per_shard: int = 10, classes: int = 3, captions: str = "txt", seed: int = 0,
           prefix: str = "train") -> str:
    """WebDataset shards of ``n`` samples (img2dataset's layout: ``jpg`` and ``txt`` or ``json`` per key, a ``cls``),
    written with ``webdataset.TarWriter``; the ``wds:`` pattern that names them."""
    import webdataset as wds

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    words = ("red", "green", "blue")
    count = (n + per_shard - 1) // per_shard
    for s in range(count):
        with wds.TarWriter(str(root / f"{prefix}-{s:05d}.tar")) as sink:
            for i in range(s * per_shard, min(n, (s + 1) * per_shard)):
                c = i % classes
                h, w = (int(v) for v in rng.integers(36, 80, 2))
                buf = io.BytesIO()
                _image(rng, c, h, w, "RGB").save(buf, format="JPEG", quality=85)
                text = f"a photo of something {words[c % 3]} number {i}"
                sample = {"__key__": f"{i:08d}", "jpg": buf.getvalue(), "cls": str(c).encode()}
                sample["txt" if captions == "txt" else "json"] = (
                    text.encode() if captions == "txt" else json.dumps({"caption": text}).encode())
                sink.write(sample)
    return f"wds:{root}/{prefix}-{{00000..{count - 1:05d}}}.tar"
