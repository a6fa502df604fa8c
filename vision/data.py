"""Image data sets as uint8 tensors in memory: loaders for the layouts users download, a decoded
cache for image folders, the built-in 8x8 digits, and CACR's class-imbalanced subsets.

Every loader returns an :class:`ImageData` with ``(N, C, H, W)`` uint8 images and ``(N,)`` int64
labels for the train and test splits. Pillow is used only once, to decode an image folder into a
cached tensor file under ``suite.paths.cache_dir("vision")``; the hot path never touches PIL.

Layouts:
- CIFAR-10/100 python pickles: ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``,
  ``cifar-100-python/{train,test,meta}``;
- STL-10 binary: ``stl10_binary/{train_X.bin,train_y.bin,test_X.bin,test_y.bin,class_names.txt}``
  (column-major 96x96x3 bytes; labels 1..10); the unlabeled split is not loaded;
- image folder: ``<root>/{train,test}/<class>/*.{jpg,jpeg,png}`` (classes sorted by name, or in the
  order of a ``classes.txt`` when present).

Example: >>> data = load_dataset("digits"); data.train_x.shape  # (1437, 3, 8, 8)
"""
from __future__ import annotations

import functools
import hashlib
import math
import pickle
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from suite.paths import cache_dir, data_path, missing_root_note
from suite.safeio import cache_unreadable, load_arrays, save_arrays
from suite.train.seeding import fixed_generator

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp")
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
ImbalanceRule = Literal["none", "linear", "exponential"]


@dataclass
class ImageData:
    """Train/test images (N, C, H, W) uint8 and labels (N,) int64, with class names."""

    name: str
    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor
    classes: list[str]
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for split, x, y in (("train", self.train_x, self.train_y), ("test", self.test_x, self.test_y)):
            if x.dtype != torch.uint8 or x.dim() != 4:
                raise ValueError(f"{self.name} {split} images must be uint8 (N, C, H, W); got {x.dtype} {tuple(x.shape)}")
            if y.shape != (x.shape[0],):
                raise ValueError(f"{self.name} {split}: {x.shape[0]} images but labels of shape {tuple(y.shape)}")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_x.shape[1:])  # type: ignore[return-value]

    def subset_train(self, idx: Tensor, **info: Any) -> "ImageData":
        """The same data set with the training split restricted to ``idx`` (test split unchanged)."""
        return ImageData(self.name, self.train_x[idx], self.train_y[idx], self.test_x, self.test_y, self.classes,
                         {**self.info, **info})


# ----------------------------------------------------------------------------- CIFAR pickles

# the only globals a CIFAR batch refers to (numpy arrays); anything else is refused, never called
_CIFAR_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed (only numpy arrays)")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict[str, Any]:
    """A CIFAR python batch, read with an unpickler that builds numpy arrays and plain containers only."""
    if not path.exists():
        raise ValueError(f"CIFAR batch file not found: {path}")
    try:
        with open(path, "rb") as f:
            d = _ArrayUnpickler(f, encoding="bytes").load()
    except Exception as exc:
        raise ValueError(f"CIFAR batch {path} is refused or corrupt: {type(exc).__name__}: {exc}") from exc
    if not isinstance(d, dict):
        raise ValueError(f"CIFAR batch {path} holds a {type(d).__name__}, not a dict")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}


def _cifar_arrays(d: dict[str, Any], label_key: str, path: Path | str = "CIFAR batch") -> tuple[Tensor, Tensor]:
    """(N, 3, 32, 32) uint8 images and (N,) labels of one batch; a batch without ``data`` or labels, with data cut
    mid-image or with a label count that differs from the image count is a ``ValueError`` naming the file."""
    for key in ("data", label_key):
        if key not in d:
            raise ValueError(f"CIFAR batch {path} has no {key!r} entry (keys: {sorted(map(str, d))})")
    try:
        flat = np.asarray(d["data"], dtype=np.uint8)
        y = np.asarray(d[label_key], dtype=np.int64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"CIFAR batch {path}: data or {label_key} is not numeric ({exc})") from None
    if flat.size % 3072:
        raise ValueError(f"CIFAR batch {path}: {flat.size} values is not a whole number of 3072-value images "
                         "(the file is cut short or is not a CIFAR batch)")
    x = flat.reshape(-1, 3, 32, 32)  # rows are R(1024) G(1024) B(1024)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"CIFAR batch {path}: {x.shape[0]} images but {y.shape[0]} labels")
    return torch.from_numpy(x.copy()), torch.from_numpy(y)


def load_cifar_pickle(root: str | Path, variant: Literal["cifar10", "cifar100"] = "cifar10") -> ImageData:
    """CIFAR-10 (``cifar-10-batches-py``) or CIFAR-100 (``cifar-100-python``) python pickles.

    ``root`` is that folder itself or its parent."""
    root = Path(root)
    sub = "cifar-10-batches-py" if variant == "cifar10" else "cifar-100-python"
    if (root / sub).is_dir():
        root = root / sub
    if variant == "cifar10":
        parts = [_cifar_arrays(_unpickle(root / f"data_batch_{i}"), "labels", root / f"data_batch_{i}") for i in range(1, 6)]
        train_x, train_y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        test_x, test_y = _cifar_arrays(_unpickle(root / "test_batch"), "labels", root / "test_batch")
        meta = root / "batches.meta"
        names = [n.decode() if isinstance(n, bytes) else n for n in _unpickle(meta)["label_names"]] if meta.exists() else CIFAR10_CLASSES
    elif variant == "cifar100":
        train_x, train_y = _cifar_arrays(_unpickle(root / "train"), "fine_labels", root / "train")
        test_x, test_y = _cifar_arrays(_unpickle(root / "test"), "fine_labels", root / "test")
        meta = root / "meta"
        names = ([n.decode() if isinstance(n, bytes) else n for n in _unpickle(meta)["fine_label_names"]]
                 if meta.exists() else [str(i) for i in range(100)])
    else:
        raise ValueError(f"variant must be 'cifar10' or 'cifar100', got {variant!r}")
    return ImageData(variant, train_x, train_y, test_x, test_y, list(names), {"source": str(root), "layout": "pickle"})


# ----------------------------------------------------------------------------- STL-10 binary

_STL_IMAGE = 3 * 96 * 96  # bytes per STL-10 image


def _stl_images(path: Path) -> Tensor:
    if not path.exists():
        raise ValueError(f"STL-10 file not found: {path}")
    size = path.stat().st_size
    if size % _STL_IMAGE:
        raise ValueError(f"STL-10 file {path} has {size} bytes, not a whole number of {_STL_IMAGE}-byte images "
                         f"({size // _STL_IMAGE} images and {size % _STL_IMAGE} bytes): a download cut short?")
    raw = np.fromfile(path, dtype=np.uint8).reshape(-1, 3, 96, 96)  # column-major: (N, C, W, H)
    return torch.from_numpy(raw.transpose(0, 1, 3, 2).copy())


def load_stl10_binary(root: str | Path) -> ImageData:
    """STL-10 labelled train (5,000) and test (8,000) splits from ``stl10_binary``."""
    root = Path(root)
    if (root / "stl10_binary").is_dir():
        root = root / "stl10_binary"
    ys = []
    for split in ("train", "test"):
        p = root / f"{split}_y.bin"
        if not p.exists():
            raise ValueError(f"STL-10 file not found: {p}")
        ys.append(torch.from_numpy(np.fromfile(p, dtype=np.uint8).astype(np.int64) - 1))
    names_file = root / "class_names.txt"
    names = names_file.read_text().split() if names_file.exists() else [str(i) for i in range(10)]
    xs = [_stl_images(root / f"{split}_X.bin") for split in ("train", "test")]
    for split, x, y in zip(("train", "test"), xs, ys):
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"STL-10 {root / f'{split}_X.bin'} holds {x.shape[0]} images but "
                             f"{root / f'{split}_y.bin'} {y.shape[0]} labels")
    return ImageData("stl10", xs[0], ys[0], xs[1], ys[1], names, {"source": str(root), "layout": "binary"})


# ----------------------------------------------------------------------------- image folders

def _folder_classes(split_dir: Path, root: Path) -> list[str]:
    listed = root / "classes.txt"
    if listed.exists():
        return listed.read_text().split()
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir())


def _decode_folder(split_dir: Path, classes: list[str]) -> tuple[Tensor, Tensor, int]:
    """Decode every image of ``split_dir/<class>/``; images whose size differs from the first one are
    skipped, counted and warned about (with the first few paths); an image that cannot be decoded
    (truncated, not an image) raises ``ValueError`` naming it."""
    from PIL import Image, UnidentifiedImageError  # decoding only, once per cache

    files: list[tuple[Path, int]] = []
    for c, name in enumerate(classes):
        d = split_dir / name
        if not d.is_dir():
            raise ValueError(f"class folder missing: {d}")
        files += [(p, c) for p in sorted(d.iterdir()) if p.suffix.lower() in IMAGE_EXTS]
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_EXTS)}) under {split_dir}")
    arrays, labels, skipped = [], [], []
    size: tuple[int, int] | None = None
    for p, c in files:  # Pillow decodes one file at a time; done once, then cached
        try:
            with Image.open(p) as im:
                arr = np.asarray(im.convert("RGB"), dtype=np.uint8)  # (H, W, 3)
        except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:  # truncated / not an image
            raise ValueError(f"image {p} cannot be decoded ({type(exc).__name__}: {exc}); remove or replace it") from exc
        if size is None:
            size = arr.shape[:2]
        if arr.shape[:2] != size:
            skipped.append(f"{p} ({arr.shape[0]}x{arr.shape[1]})")  # cannot be stacked; counted and reported
            continue
        arrays.append(arr)
        labels.append(c)
    if skipped:
        assert size is not None
        warnings.warn(f"{split_dir}: skipped {len(skipped)} of {len(files)} images whose size differs from "
                      f"{size[0]}x{size[1]} (first: {'; '.join(skipped[:3])})", stacklevel=3)
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()  # (N, 3, H, W)
    return x, torch.tensor(labels, dtype=torch.int64), len(skipped)


_IMAGE_ARRAYS = ("train_x", "train_y", "test_x", "test_y")


def _read_image_cache(path: Path) -> dict[str, Any] | None:
    """The decoded images of an image-folder cache, or None (warning naming the file) if unreadable."""
    try:
        arrays, meta = load_arrays(path, "image cache")
        missing = set(_IMAGE_ARRAYS) - set(arrays)
        if missing or not isinstance(meta.get("classes"), list) or not isinstance(meta.get("skipped"), dict):
            raise ValueError(f"image cache {path} is unreadable: missing {sorted(missing) or 'classes/skipped'}")
        if arrays["train_x"].dtype != torch.uint8 or arrays["train_x"].shape[0] != arrays["train_y"].shape[0]:
            raise ValueError(f"image cache {path} is unreadable: images and labels do not match")
        return {**arrays, "classes": meta["classes"], "skipped": meta["skipped"]}
    except ValueError as exc:
        cache_unreadable(path, exc)
        return None


def load_image_folder(root: str | Path, name: str | None = None, cache: bool = True) -> ImageData:
    """``root/{train,test}/<class>/*.jpg`` (or ``val/`` for ``test/``, as ``folder:`` reads it) decoded once with Pillow into a cached uint8 tensor file.

    The cache key is the folder's content (:func:`suite.inputs.data_identity`: every file's bytes for a folder up to
    256 MiB; for a larger one its names, sizes, modification times and a sample's bytes), so an image replaced by
    another, even of the same size, is decoded again. Images whose size differs from the first image are skipped and
    counted in ``info["skipped"]``."""
    root = Path(root)
    if not (root / "train").is_dir():
        raise ValueError(f"image-folder layout needs {root / 'train'}/<class>/*.jpg; not found")
    held = next((root / n for n in ("test", "val") if (root / n).is_dir()), None)  # val/ as folder: takes it
    if held is None:
        raise ValueError(f"image-folder layout needs {root / 'test'}/<class>/*.jpg (or val/); not found")
    classes = _folder_classes(root / "train", root)
    from suite.inputs import data_identity

    ident = data_identity(root)
    key = hashlib.sha256("\n".join([ident["digest"], ident.get("stat", ""), *classes]).encode()).hexdigest()[:16]
    name = name or root.name
    path = cache_dir("vision") / f"{name}-{key}.npz"
    blob = _read_image_cache(path) if cache and path.exists() else None
    if blob is None:
        tr_x, tr_y, sk_tr = _decode_folder(root / "train", classes)
        te_x, te_y, sk_te = _decode_folder(held, classes)
        blob = {"train_x": tr_x, "train_y": tr_y, "test_x": te_x, "test_y": te_y, "classes": classes,
                "skipped": {"train": sk_tr, "test": sk_te}}
        if cache:
            save_arrays(path, {k: blob[k] for k in _IMAGE_ARRAYS},
                        {"classes": classes, "skipped": blob["skipped"]})
    return ImageData(name, blob["train_x"], blob["train_y"], blob["test_x"], blob["test_y"], list(blob["classes"]),
                     {"source": str(root), "layout": "image-folder", "cache": str(path) if cache else None,
                      "skipped": blob["skipped"]})


# ----------------------------------------------------------------------------- built-in digits

def load_digits(test_fraction: float = 0.2, seed: int = 0) -> ImageData:
    """scikit-learn's bundled 8x8 digits (1,797 images, 10 classes) as 3-channel uint8 images,
    split into train/test by a seeded stratified split."""
    from sklearn.datasets import load_digits as _sk_digits
    from sklearn.model_selection import train_test_split

    d = _sk_digits()
    x = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)  # (N, 8, 8) values 0..16 -> 0..255
    idx = np.arange(len(x))
    tr, te = train_test_split(idx, test_size=test_fraction, random_state=seed, stratify=d.target)
    xt = torch.from_numpy(x)[:, None].expand(-1, 3, -1, -1).contiguous()  # (N, 3, 8, 8)
    y = torch.from_numpy(d.target.astype(np.int64))
    tr_t, te_t = torch.from_numpy(np.sort(tr)), torch.from_numpy(np.sort(te))
    return ImageData("digits", xt[tr_t], y[tr_t], xt[te_t], y[te_t], [str(i) for i in range(10)],
                     {"source": "sklearn.datasets.load_digits", "layout": "builtin"})


# ----------------------------------------------------------------------------- dispatch

@functools.lru_cache(maxsize=4)
def load_dataset(name: str, root: str | Path | None = None) -> ImageData:
    """Memoised per process (the tensors are never modified in place; subsets are new objects).

    ``digits``, ``cifar10``, ``cifar100``, ``stl10`` or ``mem:<path>`` (an image folder decoded into memory; a
    ``folder:<path>`` streams, :mod:`vision.stream`).

    Without ``root`` the data root (``$SUITE_DATA``) is searched: for cifar10 the pickle folder
    ``cifar-10-batches-py`` first, then the image folder ``cifar10-jpg``."""
    key = name.lower()
    if key == "digits":
        return load_digits()
    if key.startswith("mem:"):  # a small folder of same-size images, decoded into memory (folder: streams)
        return load_image_folder(name.split(":", 1)[1])
    if key == "cifar10":
        base = Path(root) if root else data_path()
        if (base / "cifar-10-batches-py").is_dir() or (base / "data_batch_1").exists():
            return load_cifar_pickle(base, "cifar10")
        folder = base if (base / "train").is_dir() else base / "cifar10-jpg"
        if folder.is_dir():
            return load_image_folder(folder, name="cifar10")
        note = f"; {missing_root_note()}" if not root and missing_root_note() else ""
        raise ValueError(f"CIFAR-10 not found under {base} (looked for cifar-10-batches-py/ and cifar10-jpg/){note}")
    if key == "cifar100":
        return load_cifar_pickle(Path(root) if root else data_path(), "cifar100")
    if key == "stl10":
        return load_stl10_binary(Path(root) if root else data_path())
    raise ValueError(f"unknown dataset {name!r}; choose digits, cifar10, cifar100, stl10, mem:<path>, folder:<path> "
                     "or wds:<pattern>")


# ----------------------------------------------------------------------------- subsets

def imbalance_proportions(num_classes: int, rule: ImbalanceRule, min_ratio: float = 0.1) -> list[float]:
    """Fraction of each class kept (class l = 1..C in label order), following CACR Sec. 5.1
    (after Kim et al. 2020):

    - ``linear``: p_l = l / C (C = 10: 0.1, 0.2, ..., 1.0);
    - ``exponential``: p_l = min_ratio ** ((C - l) / (C - 1)), a geometric decay from 1 (class C)
      to ``min_ratio`` (class 1); the CACR text's formula is garbled in extraction, this is the
      standard exponential profile (LDAM/Kim et al.), reported with every run;
    - ``none``: 1 for every class.
    """
    c = num_classes
    if rule == "none":
        return [1.0] * c
    if rule == "linear":
        return [l / c for l in range(1, c + 1)]
    if rule == "exponential":
        if not 0 < min_ratio <= 1:
            raise ValueError(f"min_ratio must be in (0, 1], got {min_ratio}")
        return [min_ratio ** ((c - l) / max(c - 1, 1)) for l in range(1, c + 1)]
    raise ValueError(f"imbalance rule must be 'none', 'linear' or 'exponential', got {rule!r}")


def imbalanced_indices(labels: Tensor, rule: ImbalanceRule, seed: int = 0, min_ratio: float = 0.1,
                       num_classes: int | None = None) -> tuple[Tensor, list[int]]:
    """Indices (sorted) of a class-imbalanced subset and the per-class counts.

    Class l keeps floor(p_l * n_l) of its n_l samples (at least 1), chosen by a seeded permutation."""
    c = num_classes or int(labels.max()) + 1
    props = imbalance_proportions(c, rule, min_ratio)
    g = fixed_generator(seed)
    keep, counts = [], []
    for cls in range(c):  # a loop over classes, not samples
        idx = (labels == cls).nonzero().flatten()
        n = max(1, int(math.floor(props[cls] * idx.numel()))) if idx.numel() else 0
        keep.append(idx[torch.randperm(idx.numel(), generator=g)[:n]])
        counts.append(n)
    return torch.cat(keep).sort().values, counts


def class_subset_indices(labels: Tensor, per_class: int, seed: int = 0) -> Tensor:
    """A balanced subset: ``per_class`` samples of every class (all if fewer), seeded."""
    g = fixed_generator(seed)
    out = []
    for cls in labels.unique().tolist():
        idx = (labels == cls).nonzero().flatten()
        out.append(idx[torch.randperm(idx.numel(), generator=g)[:per_class]])
    return torch.cat(out).sort().values
