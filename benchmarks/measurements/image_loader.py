"""The streamed image loader measured (issue 65), every figure a registry row (task ``image-loader``).

- ``--loader`` (CPU): images per second of the suite's loader (:class:`vision.stream.Crops`: decode, two random
  resized crops at decode time, to a uint8 batch) against the plain loop torchvision's ``ImageFolder`` +
  ``RandomResizedCrop`` + ``RandomHorizontalFlip`` amount to (Pillow decoding, crop-resize and flip per sample and
  view in the ``Dataset``, the default collate), on the same ``DataLoader`` workers, the same batches and the same
  generated folder of photo-like JPEGs of ImageNet's size and weight (:func:`imagenet_jpeg`: 500 x 375, one in four
  portrait, about 110 kB at quality 90; ImageNet's training JPEGs average about 110 kB at about 400 x 350);
  interleaved rounds, the one ratio of the benches (the median of one side's rates over the median of the
  other's, the per-round range beside it). One row per worker count (``--workers``, default 1, 2 and all the
  CPUs); the row names the JPEG decoder the suite's path used (:func:`vision.decode.jpeg_decoder`). ``--draft X``
  adds the named DCT-domain option (:mod:`vision.decode`) as a third side and the mean / max absolute difference of
  its crops from the reference's (``draft_crop_mad``, ``draft_crop_max``, the same boxes).
- ``--memory``: the peak resident memory of a short pretraining run (``suite vision pretrain``, a few steps and the
  default evaluation: kNN and the feature probe over the whole training set as the bank, a test split a tenth of
  it) over generated folders of at least three sizes, with 2,048-d features; the least-squares slope is the memory
  a bank image costs (``peak_rss_kb_per_image``; its features alone are 4 kB in fp16). The child runs with
  ``MALLOC_MMAP_THRESHOLD_`` fixed, so large blocks are mapped and returned and the peak follows what is held.
- ``--gpu``: ResNet-50 SimCLR at 224, batch 256, bf16, fed from JPEG files by the streamed loader against the same
  step fed from tensors already on the device: whether decoding keeps the GPU busy (``gpu_step_images_per_s``, the
  rate the dry run's GPU-hours use). Without a GPU it says so and exits 0.

The folders are generated once into the cache (``$SUITE_CACHE/vision/bench-folders``) and reused.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

TASK = "image-loader"


def generated_folder(n_train: int, n_test: int = 200, classes: int = 10, seed: int = 0) -> Path:
    """A cached ImageNet-style folder of ``n_train`` + ``n_test`` JPEGs of random sizes (120 to 400 pixels a side)."""
    from PIL import Image

    from suite.paths import cache_dir

    root = cache_dir("vision", "bench-folders") / f"f{n_train}-{n_test}-{classes}-{seed}"
    done = root / ".complete"
    if done.exists():
        return root
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("val", n_test)):
        for i in range(n):
            c = i % classes
            d = root / split / f"c{c:03d}"
            d.mkdir(parents=True, exist_ok=True)
            h, w = (int(v) for v in rng.integers(120, 401, 2))
            small = rng.integers(0, 255, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)  # smooth, photo-like content
            Image.fromarray(small).resize((w, h), Image.BILINEAR).save(d / f"{i:06d}.JPEG", quality=90)
    done.write_text("")
    return root


IMAGENET_SIZE = (500, 375)  # the commonest ImageNet training size (width, height); one in four is portrait
IMAGENET_JPEG_KB = 110  # ImageNet-1k's training JPEGs: about 140 GB over 1.28 M files
IMAGENET_QUALITY = 90


def imagenet_jpeg(rng: np.random.Generator, size: tuple[int, int] = IMAGENET_SIZE) -> bytes:
    """One photo-like JPEG of ImageNet's size and weight: smooth random colour fields at three scales (64, 16 and
    4 pixels) plus luminance grain (sigma 22), at quality 90: about 110 kB at 500 x 375 (what a JPEG decoder's
    entropy decoding, IDCT and upsampling see in a photo; a flat or smooth image would be a few kB and decode
    faster than any photo)."""
    import io

    from PIL import Image

    w, h = size
    out = np.zeros((h, w, 3), np.float32)
    for cell, amp in ((64, 1.0), (16, 0.5), (4, 0.25)):
        small = rng.integers(0, 256, (h // cell + 2, w // cell + 2, 3), dtype=np.uint8)
        out += amp * np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), np.float32)
    out /= 1.75
    out += rng.normal(0.0, 22.0, (h, w, 1)).astype(np.float32)
    buf = io.BytesIO()
    Image.fromarray(np.clip(out, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=IMAGENET_QUALITY)
    return buf.getvalue()


def imagenet_folder(n_train: int, classes: int = 10, seed: int = 0) -> Path:
    """A cached ImageNet-style folder (``train/cXXX/*.JPEG``) of ``n_train`` :func:`imagenet_jpeg` files."""
    from suite.paths import cache_dir

    root = cache_dir("vision", "bench-folders") / f"imagenet-{n_train}-{classes}-{seed}"
    done = root / ".complete"
    if done.exists():
        return root
    rng = np.random.default_rng(seed)
    for i in range(n_train):
        d = root / "train" / f"c{i % classes:03d}"
        d.mkdir(parents=True, exist_ok=True)
        size = IMAGENET_SIZE if i % 4 else IMAGENET_SIZE[::-1]
        (d / f"{i:06d}.JPEG").write_bytes(imagenet_jpeg(rng, size))
    done.write_text("")
    return root


class PlainFolder(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """torchvision's ``ImageFolder`` with SimCLR's two-crop transform, written out (torchvision cannot be installed
    beside the pinned torch): per sample, Pillow decodes, and per view ``RandomResizedCrop(size)`` (the same
    get_params, Pillow crop and bilinear resize) and ``RandomHorizontalFlip``, then ``PILToTensor``."""

    def __init__(self, root: Path, size: int, views: int = 2) -> None:
        from vision.sources import IMAGE_EXTS

        self.items = [(str(p), c) for c, d in enumerate(sorted((root / "train").iterdir()))
                      for p in sorted(d.iterdir()) if p.suffix.lower() in IMAGE_EXTS]
        self.size, self.views = size, views

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        from vision.stream import crop_params, resized_crop

        path, label = self.items[i]
        with open(path, "rb") as fh:
            im = Image.open(fh).convert("RGB")
        rng = np.random.default_rng()  # a worker's own stream, as torchvision's transforms draw from
        views = []
        for _ in range(self.views):
            arr = resized_crop(im, crop_params(rng, im.height, im.width, (0.2, 1.0), (3 / 4, 4 / 3)), self.size)
            if rng.random() < 0.5:
                arr = arr[:, ::-1]
            views.append(torch.from_numpy(np.array(arr)).permute(2, 0, 1))  # a copy, as PILToTensor makes
        return torch.stack(views), label


def _rate(loader: Any, batches: int, batch: int) -> float:
    it = iter(loader)
    next(it)  # the workers started and warm
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch / (time.perf_counter() - t0)


def measure_loader(n: int, size: int, batch: int, workers: int, rounds: int, batches: int,
                   draft: float | None = None) -> dict[str, float]:
    """Both loaders' images per second over ``rounds`` interleaved rounds on :func:`imagenet_folder` ``(n)``; the
    ratio suite / plain and its range. ``draft``: the suite's loader with the DCT-domain option as a third side
    (``draft_images_per_s``, ``draft_ratio`` over the plain loop) and its crops' difference from the reference's."""
    from suite.measure import median_ratio
    from suite.train.engine import Prefetch
    from vision.sources import folder_source
    from vision.stream import Crops, EpochBatch

    root = imagenet_folder(n)
    src = folder_source(root, "train")
    sides = {"suite": Crops(src, size, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=0)}
    if draft:
        sides["draft"] = Crops(src, size, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=0, draft=draft)  # type: ignore[call-arg]
    plain = PlainFolder(root, size)
    order = torch.randperm(len(src), generator=torch.Generator().manual_seed(0))
    need = (batches + 1) * batch
    if need > len(src):
        raise ValueError(f"--images {n}: {batches} timed batches of {batch} and a warm one need {need} images")
    ours_b = [EpochBatch(0, b) for b in order[:need].split(batch)]
    rates: dict[str, list[float]] = {k: [] for k in (*sides, "plain")}
    for _ in range(rounds):
        for name, crops in sides.items():
            pf = Prefetch(crops, workers=workers)
            rates[name].append(_rate(pf(ours_b), batches, batch))
            pf.close()
        loader = torch.utils.data.DataLoader(plain, batch_size=batch, sampler=order[:need].tolist(),
                                             num_workers=workers, prefetch_factor=4 if workers else None,
                                             persistent_workers=False)
        rates["plain"].append(_rate(loader, batches, batch))
    out = {"suite_images_per_s": statistics.median(rates["suite"]),
           "plain_images_per_s": statistics.median(rates["plain"]), **median_ratio(rates["suite"], rates["plain"])}
    if draft:
        r = median_ratio(rates["draft"], rates["plain"])
        out.update(draft_images_per_s=statistics.median(rates["draft"]), draft_ratio=r["ratio"],
                   **crop_difference(src, size, draft, min(len(src), 200)))
    return out


def crop_difference(src: Any, size: int, draft: float, n: int) -> dict[str, float]:
    """The named ``draft`` option's crops against the reference path's (Pillow decode, crop, bilinear resize), the
    same boxes (SimCLR's two random resized crops at ``size``) of the first ``n`` samples: the mean and max absolute
    difference over every pixel and channel (0-255; a sample the option leaves in full counts as its zeros; and
    ``draft_crop_mad_reduced`` over the reduced ones alone), and the share of the samples the option reduced."""
    from suite.train.seeding import sample_rng
    from vision.decode import draft_scale, fast_crops
    from vision.stream import crop_params, decode, resized_crop

    def plan(i: int) -> Any:
        def boxes(h: int, w: int) -> list[tuple[int, int, int, int]]:
            rng = sample_rng(0, 0, i)
            return [crop_params(rng, h, w, (0.2, 1.0), (3 / 4, 4 / 3)) for _ in range(2)]
        return boxes

    diffs: list[float] = []
    only: list[float] = []
    worst, reduced = 0, 0
    for i in range(n):
        data = src.read(i)
        im = decode(data, src.where(i))
        boxes = plan(i)(im.height, im.width)
        got = fast_crops(data, plan(i), size, draft)
        crops = [resized_crop(im, b, size) for b in boxes] if got is None else got[0]
        drafted = draft_scale(im.width, im.height, boxes, size, draft) > 1
        reduced += drafted
        for box, crop in zip(boxes, crops):
            dd = np.abs(resized_crop(im, box, size).astype(np.int16) - crop.astype(np.int16))
            diffs.append(float(dd.mean()))
            worst = max(worst, int(dd.max()))
            if drafted:
                only.append(diffs[-1])
    return {"draft_crop_mad": float(np.mean(diffs)), "draft_crop_max": float(worst),
            "draft_crop_mad_reduced": float(np.mean(only)) if only else 0.0,
            "draft_reduced_share": reduced / max(1, n)}


def worker_counts(spec: str) -> list[int]:
    """``--workers``: a comma list of counts, ``all`` the CPUs this process may use; duplicates dropped, in order."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    out: list[int] = []
    for part in str(spec).split(","):
        k = cpus if part.strip() == "all" else int(part)
        if k < 0:
            raise ValueError(f"--workers: a count >= 0 or 'all', got {part!r}")
        if k not in out:
            out.append(k)
    return out


MEMORY_ENV = {"OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072", "SUITE_NO_PROGRESS": "1"}
MEMORY_RUN = ("--encoder", "alexnet", "--width", "0.5", "--image-size", "32")  # 2,048-d features, cheap at 32 px
MEMORY_FEATURE_DIM = 2048
TEST_FRACTION = 10  # the test split: a tenth of the training images, growing with them


def peak_rss_mb(n: int, steps: int = 5, n_test: int | None = None) -> float:
    """Peak resident memory (MB) of ``suite vision pretrain`` for a few steps and the default evaluation (kNN and the
    feature probe, the whole training set as the bank) on a generated folder of ``n`` training images and ``n_test``
    test images (default ``n // TEST_FRACTION``): an AlexNet of 2,048-d features at 32 pixels, no workers, one
    thread, ``MALLOC_MMAP_THRESHOLD_`` fixed (:data:`MEMORY_ENV`)."""
    n_test = max(64, n // TEST_FRACTION) if n_test is None else n_test
    root = generated_folder(n, n_test)
    cmd = [sys.executable, "-m", "suite", "vision", "pretrain", "--dataset", f"folder:{root}", *MEMORY_RUN,
           "--epochs", "1", "--max-steps-per-epoch", str(steps), "--batch-size", "32", "--geometry-batches", "0",
           "--no-registry", "--workers", "0", "--out", str(root.parent / f"run-{n}-{time.time_ns()}")]
    env = {**os.environ, **MEMORY_ENV}
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)  # this child's own peak (ru_maxrss, kB)
    if status != 0:
        raise RuntimeError(f"the pretraining run for the memory figure failed: {p.stderr.read().decode()[-800:]}")
    return usage.ru_maxrss / 1024


def memory_slope(peaks: dict[int, float]) -> dict[str, float]:
    """Least squares of peak MB on training images: ``peak_rss_kb_per_image`` (the slope, kB = 1,000 bytes a bank
    image with its tenth of a test image), ``peak_rss_mb_at_0`` (the intercept) and ``fit_r2``; needs three sizes."""
    if len(peaks) < 3:
        raise ValueError(f"--memory-sizes: a slope needs at least three sizes, got {sorted(peaks)}")
    n = np.array(sorted(peaks), dtype=np.float64)
    mb = np.array([peaks[int(k)] for k in n])
    slope, intercept = np.polyfit(n, mb, 1)
    resid = mb - (slope * n + intercept)
    r2 = 1.0 - float((resid ** 2).sum()) / max(1e-12, float(((mb - mb.mean()) ** 2).sum()))
    return {"peak_rss_kb_per_image": float(slope) * 1024 * 1024 / 1000, "peak_rss_mb_at_0": float(intercept),
            "fit_r2": r2}


def measure_gpu(batch: int, steps: int, workers: int, n: int) -> dict[str, float] | None:
    """ResNet-50 SimCLR steps at 224 (bf16) fed by the streamed loader from JPEG files, and the same steps fed from
    uint8 tensors already on the device; None without a GPU."""
    if not torch.cuda.is_available():
        return None
    from suite.losses import build
    from suite.train.engine import Prefetch
    from vision.methods import SimCLR
    from vision.models import build_encoder
    from vision.sources import folder_source
    from vision.stream import Crops, EpochBatch
    from vision.transforms import RECIPES, ViewAugment

    dev = torch.device("cuda")
    r = RECIPES["imagenet"]
    model = SimCLR(build_encoder("resnet50", 0, 224, 128), build("infonce")).to(dev)
    model.encoder.channels_last()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    aug = ViewAugment(r, 2).to(dev)
    torch.backends.cudnn.benchmark = True

    def step(x: torch.Tensor) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(aug.from_crops(x).views)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    src = folder_source(generated_folder(n), "train")
    crops = Crops(src, 224, 2, r.scale, r.ratio, seed=0)
    order = torch.randperm(len(src)).repeat((steps + 2) * batch // len(src) + 1)[: (steps + 2) * batch]
    pf = Prefetch(crops, workers=workers, pin=True)
    it = iter(pf([EpochBatch(0, b) for b in order.split(batch)]))
    for _ in range(2):
        step(next(it).images.to(dev, non_blocking=True))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(next(it).images.to(dev, non_blocking=True))
    torch.cuda.synchronize()
    files = steps * batch / (time.perf_counter() - t0)
    pf.close()
    x = torch.randint(0, 255, (2, batch, 3, 224, 224), dtype=torch.uint8, device=dev)
    for _ in range(2):
        step(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(x)
    torch.cuda.synchronize()
    tensors = steps * batch / (time.perf_counter() - t0)
    return {"gpu_step_images_per_s": files, "gpu_step_images_per_s_tensors": tensors, "fed_ratio": files / tensors}


def _record(registry: Any, dataset: str, config: dict[str, Any], metrics: dict[str, float], primary: str) -> None:
    from benchmarks.measurements.measured import Measurement, record

    record(registry, Measurement(TASK, dataset, "none", config, metrics, primary))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.measurements.image_loader",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--loader", action="store_true", help="the loaders' images/s on the CPU")
    ap.add_argument("--memory", action="store_true", help="peak memory a bank image costs: the slope over sizes")
    ap.add_argument("--gpu", action="store_true", help="ResNet-50 fed from files against from tensors, on a GPU")
    ap.add_argument("--images", type=int, default=4000, help="--loader: training images of the folder")
    ap.add_argument("--size", type=int, default=224, help="--loader: crop size")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", default="1,2,all",
                    help="--loader: DataLoader workers, a comma list ('all': the CPUs); one row each")
    ap.add_argument("--draft", type=float, default=None,
                    help="--loader: also the DCT-domain draft option (vision.decode), each crop kept >= X x size")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=8, help="--loader: timed batches per round")
    ap.add_argument("--memory-sizes", default="2000,4000,8000,16000", help="--memory: training images, three or more")
    ap.add_argument("--registry", default=None, help="where the rows go (default: $SUITE_REGISTRY)")
    args = ap.parse_args(argv)
    from suite.machine import environment
    from suite.registry import Registry

    reg = Registry(args.registry) if args.registry else Registry()
    if args.loader:
        from vision.decode import jpeg_decoder

        for workers in worker_counts(args.workers):
            m = measure_loader(args.images, args.size, args.batch, workers, args.rounds, args.batches, args.draft)
            cfg = {"images": args.images, "size": args.size, "batch": args.batch, "workers": workers,
                   "rounds": args.rounds, "views": 2, "jpeg": f"{IMAGENET_SIZE[0]}x{IMAGENET_SIZE[1]} q{IMAGENET_QUALITY}",
                   "decoder": jpeg_decoder()[0], **({"draft": args.draft} if args.draft else {}),
                   **environment(torch.device("cpu")), "threads": str(torch.get_num_threads())}
            _record(reg, "generated-imagenet-jpegs", {"measure": "loader", **cfg}, m, "ratio")
            extra = (f"; draft {args.draft:g}: {m['draft_images_per_s']:.0f} images/s, ratio {m['draft_ratio']:.2f}, "
                     f"crops' mean abs difference {m['draft_crop_mad']:.2f} (max {m['draft_crop_max']:.0f})"
                     if args.draft else "")
            print(f"loader: suite {m['suite_images_per_s']:.0f} images/s ({cfg['decoder']}), plain "
                  f"{m['plain_images_per_s']:.0f} images/s, ratio {m['ratio']:.2f} ({m['ratio_min']:.2f}-"
                  f"{m['ratio_max']:.2f}), {workers} workers{extra}")
    if args.memory:
        sizes = sorted({int(s) for s in args.memory_sizes.split(",")})
        if len(sizes) < 3:
            ap.error(f"--memory-sizes: a slope needs at least three sizes, got {args.memory_sizes}")
        peaks = {n: peak_rss_mb(n) for n in sizes}
        metrics = {f"peak_rss_mb_{n}": v for n, v in peaks.items()}
        metrics.update(memory_slope(peaks))
        cfg = {"measure": "memory", "images": sizes, "test_fraction": 1 / TEST_FRACTION, "run": " ".join(MEMORY_RUN),
               "feature_dim": MEMORY_FEATURE_DIM, "evaluation": "knn+probe (default)",
               **{k: v for k, v in MEMORY_ENV.items() if k != "SUITE_NO_PROGRESS"}, **environment(torch.device("cpu"))}
        _record(reg, "generated-folder", cfg, metrics, "peak_rss_kb_per_image")
        print("memory: " + ", ".join(f"{n:,} images {v:.0f} MB" for n, v in peaks.items())
              + f"; {metrics['peak_rss_kb_per_image']:.1f} kB a bank image (r2 {metrics['fit_r2']:.3f}, "
              f"{MEMORY_FEATURE_DIM}-d features)")
    if args.gpu:
        m = measure_gpu(256, 20, 8, 4000)  # type: ignore[assignment]
        if m is None:
            print("gpu: no CUDA device here; the ResNet-50 fed-from-files figure is to be measured on a GPU")
        else:
            cfg = {"measure": "gpu", "encoder": "resnet50", "image_size": 224, "batch": 256, "precision": "bf16",
                   "workers": 8, **environment(torch.device("cuda"))}
            _record(reg, "generated-folder", cfg, m, "gpu_step_images_per_s")
            print(f"gpu: from JPEG files {m['gpu_step_images_per_s']:.0f} images/s, from device tensors "
                  f"{m['gpu_step_images_per_s_tensors']:.0f} images/s ({m['fed_ratio']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
