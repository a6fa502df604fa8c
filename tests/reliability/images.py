"""A tiny image-folder data set (train/test x classes a, b) for the image-loader probes."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def image_folder(root: Path, size: int = 8, per_class: int = 2, ext: str = "png", odd: int = 0) -> Path:
    """``per_class`` random ``size`` x ``size`` RGB images per class and split (``jpg`` saved at quality 90),
    plus ``odd`` training images of another size (10 x 12) in class b."""
    from PIL import Image

    rng = np.random.default_rng(0)
    save = {"quality": 90} if ext == "jpg" else {}
    for split in ("train", "test"):
        for c in ("a", "b"):
            d = root / split / c
            d.mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(d / f"{i}.{ext}", **save)
    for i in range(odd):
        Image.fromarray(rng.integers(0, 255, (10, 12, 3), dtype=np.uint8)).save(root / "train" / "b" / f"odd{i}.png")
    return root
