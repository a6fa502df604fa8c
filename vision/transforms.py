"""Batch augmentations on uint8 image tensors with kornia: V views per image, optional crop IoU.

Recipes (the papers' appendices):

- ``cifar`` (SimCLR / CACR / Wang & Isola CIFAR): RandomResizedCrop(32, scale (0.2, 1)),
  horizontal flip p = 0.5, ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, normalise;
- ``stl10`` (Wang & Isola / CACR STL-10): RandomResizedCrop(64, scale (0.08, 1)), flip,
  ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, normalise;
- ``imagenet`` (MoCo-v2, used by CACR / MACL on ImageNet): RandomResizedCrop(224, scale (0.2, 1)),
  ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, Gaussian blur sigma (0.1, 2) p = 0.5,
  flip, normalise;
- ``digits`` (built-in 8x8 smoke data): crop scale (0.5, 1), no flip, brightness/contrast jitter.

Crop boxes are sampled here (vectorised RandomResizedCrop: 10 tries per crop, whole image as
fallback) so that the intersection-over-union of a positive pair's crops is known (t-SimCLR
Sec. 4.1 weights); the crops are then resized with ``kornia.geometry.transform.crop_and_resize``.
All randomness comes from torch's global RNG, so ``torch.manual_seed`` makes views reproducible.

Shapes: images (N, C, H, W) uint8 -> views (V, N, C, S, S) float32, iou (N,) for views 0 and 1. The views are
float32 under autocast too: a bf16 training step's autocast is the encoder's, and in bf16 the crops' sampling
grid (a batched matrix product) moved the views by 0.055 on average (normalised units, CIFAR recipe).
Example: >>> aug = ViewAugment(RECIPES["cifar"], views=2); out = aug(torch.zeros(4, 3, 32, 32, dtype=torch.uint8))
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import NamedTuple

import kornia.augmentation as K
import torch
import torch.nn.functional as F
from kornia.geometry.transform import crop_and_resize
from torch import Tensor, nn

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Recipe:
    """One augmentation recipe (all probabilities per image and view)."""

    size: int
    scale: tuple[float, float] = (0.2, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip_p: float = 0.5
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1)
    jitter_p: float = 0.8
    gray_p: float = 0.2
    blur_p: float = 0.0
    blur_sigma: tuple[float, float] = (0.1, 2.0)
    mean: tuple[float, float, float] = CIFAR_MEAN
    std: tuple[float, float, float] = CIFAR_STD


RECIPES: dict[str, Recipe] = {
    "cifar": Recipe(size=32),
    "stl10": Recipe(size=64, scale=(0.08, 1.0), mean=(0.4467, 0.4398, 0.4066), std=(0.2603, 0.2566, 0.2713)),
    "imagenet": Recipe(size=224, blur_p=0.5, mean=IMAGENET_MEAN, std=IMAGENET_STD),
    "digits": Recipe(size=8, scale=(0.5, 1.0), flip_p=0.0, jitter=(0.4, 0.4, 0.0, 0.0), gray_p=0.0,
                     mean=(0.3, 0.3, 0.3), std=(0.4, 0.4, 0.4)),
}


def get_recipe(name: str, size: int = 0) -> Recipe:
    """Named recipe, optionally with another output size."""
    if name not in RECIPES:
        raise ValueError(f"unknown augmentation recipe {name!r}; choose from {sorted(RECIPES)}")
    r = RECIPES[name]
    if size and size != r.size:
        r = Recipe(**{**r.__dict__, "size": int(size)})
    return r


class Views(NamedTuple):
    views: Tensor  # (V, N, C, S, S) float32
    boxes: Tensor  # (V, N, 4) crop boxes x0, y0, x1, y1 (pixels, exclusive end)
    iou: Tensor | None  # (N,) IoU of the crops of views 0 and 1


def sample_crop_boxes(n: int, height: int, width: int, scale: tuple[float, float], ratio: tuple[float, float],
                      tries: int = 10, device: torch.device | None = None) -> Tensor:
    """RandomResizedCrop boxes for n crops, vectorised: (n, 4) as x0, y0, x1, y1 (exclusive ends).

    Like torchvision's sampler: area ~ U(scale) * H * W, log-aspect ~ U(log ratio); the first of
    ``tries`` candidates that fits is used, else the whole image."""
    area = height * width
    a = torch.empty(n, tries, device=device).uniform_(*scale) * area
    logr = torch.empty(n, tries, device=device).uniform_(math.log(ratio[0]), math.log(ratio[1]))
    r = logr.exp()
    w = torch.sqrt(a * r).round()
    h = torch.sqrt(a / r).round()
    ok = (w >= 1) & (h >= 1) & (w <= width) & (h <= height)  # (n, tries)
    first = torch.where(ok.any(1), ok.float().argmax(1), torch.full((n,), -1, device=device))
    has = first >= 0
    idx = first.clamp_min(0)[:, None]
    w = torch.where(has, w.gather(1, idx)[:, 0], torch.full((n,), float(width), device=device))
    h = torch.where(has, h.gather(1, idx)[:, 0], torch.full((n,), float(height), device=device))
    x0 = torch.floor(torch.rand(n, device=device) * (width - w + 1))
    y0 = torch.floor(torch.rand(n, device=device) * (height - h + 1))
    return torch.stack([x0, y0, x0 + w, y0 + h], dim=1)


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """IoU of paired boxes (n, 4) x0, y0, x1, y1 -> (n,)."""
    iw = (torch.minimum(a[:, 2], b[:, 2]) - torch.maximum(a[:, 0], b[:, 0])).clamp_min(0)
    ih = (torch.minimum(a[:, 3], b[:, 3]) - torch.maximum(a[:, 1], b[:, 1])).clamp_min(0)
    inter = iw * ih
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def _corners(boxes: Tensor) -> Tensor:
    """(n, 4) x0, y0, x1, y1 -> kornia's (n, 4, 2) corners (inclusive pixel coordinates)."""
    x0, y0, x1, y1 = boxes[:, 0], boxes[:, 1], boxes[:, 2] - 1, boxes[:, 3] - 1
    return torch.stack([torch.stack([x0, y0], 1), torch.stack([x1, y0], 1), torch.stack([x1, y1], 1),
                        torch.stack([x0, y1], 1)], dim=1)


class ViewAugment(nn.Module):
    """``V`` independently augmented views of a uint8 batch (see module docstring)."""

    def __init__(self, recipe: Recipe, views: int = 2, return_iou: bool = False) -> None:
        super().__init__()
        if views < 1:
            raise ValueError(f"views must be >= 1, got {views}")
        self.recipe, self.num_views, self.return_iou = recipe, int(views), bool(return_iou)
        b, c, s, h = recipe.jitter
        self.jitter = K.ColorJitter(b, c, s, h, p=recipe.jitter_p) if recipe.jitter_p > 0 and any(recipe.jitter) else None
        self.gray = K.RandomGrayscale(p=recipe.gray_p) if recipe.gray_p > 0 else None
        k = max(3, int(0.1 * recipe.size) // 2 * 2 + 1)  # kernel 10% of the image side, odd
        self.blur = K.RandomGaussianBlur((k, k), recipe.blur_sigma, p=recipe.blur_p) if recipe.blur_p > 0 else None
        self.register_buffer("mean", torch.tensor(recipe.mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(recipe.std).view(1, 3, 1, 1), persistent=False)

    @torch.no_grad()
    def forward(self, images: Tensor) -> Views:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(f"images must be a uint8 (N, C, H, W) batch; got {images.dtype} {tuple(images.shape)}")
        dev = images.device.type
        if torch.is_autocast_enabled(dev):  # a training step runs under the encoder's autocast: the views are float32
            with torch.autocast(dev, enabled=False):
                return self._views(images)
        return self._views(images)

    def _views(self, images: Tensor) -> Views:
        if images.shape[1] not in (1, 3):
            raise ValueError(f"images must have 1 or 3 channels, got {images.shape[1]}")
        r, v = self.recipe, self.num_views
        n, _, height, width = images.shape
        x = images.float().div_(255.0)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        boxes = sample_crop_boxes(v * n, height, width, r.scale, r.ratio, device=x.device)  # (V*N, 4)
        xv = x.unsqueeze(0).expand(v, -1, -1, -1, -1).reshape(v * n, 3, height, width)
        out = self._after_crop(crop_and_resize(xv, _corners(boxes), (r.size, r.size)), v, n)  # (V, N, 3, S, S)
        boxes = boxes.view(v, n, 4)
        iou = box_iou(boxes[0], boxes[1]) if (self.return_iou and v >= 2) else None
        return Views(out, boxes, iou)

    @torch.no_grad()
    def from_crops(self, crops: Tensor, iou: Tensor | None = None) -> Views:
        """The views of crops already taken at the training size (a streaming loader's, :mod:`vision.stream`:
        (V, N, C, S, S) uint8): flip, colour jitter, grayscale, blur and normalisation as :meth:`forward` applies them
        after its crop. ``boxes`` is empty (the crops' boxes stay with the loader, which gives ``iou``)."""
        if crops.dtype != torch.uint8 or crops.dim() != 5 or crops.shape[-1] != self.recipe.size:
            raise ValueError(f"crops must be uint8 (V, N, C, {self.recipe.size}, {self.recipe.size}); got {crops.dtype} "
                             f"{tuple(crops.shape)}")
        v, n = crops.shape[:2]
        dev = crops.device.type
        with torch.autocast(dev, enabled=False) if torch.is_autocast_enabled(dev) else contextlib.nullcontext():
            x = crops.flatten(0, 1).float().div_(255.0)
            if x.shape[1] == 1:
                x = x.expand(-1, 3, -1, -1)
            out = self._after_crop(x, v, n)
        return Views(out, crops.new_zeros((v, n, 0), dtype=torch.float32), iou if self.return_iou else None)

    def _after_crop(self, out: Tensor, v: int, n: int) -> Tensor:
        """(V*N, 3, S, S) crops in [0, 1] -> (V, N, 3, S, S) views: flip, jitter, grayscale, blur, normalise."""
        r = self.recipe
        if r.flip_p > 0:
            flip = torch.rand(v * n, device=out.device) < r.flip_p
            out = torch.where(flip[:, None, None, None], out.flip(-1), out)
        if self.jitter is not None:
            out = self.jitter(out)
        if self.gray is not None:
            out = self.gray(out)
        if self.blur is not None:
            out = self.blur(out)
        return ((out.clamp(0, 1) - self.mean) / self.std).reshape(v, n, 3, r.size, r.size)


class EvalTransform(nn.Module):
    """Deterministic transform for evaluation: scale to [0, 1], resize to the recipe size, normalise.
    (N, C, H, W) uint8 -> (N, 3, S, S) float32."""

    def __init__(self, recipe: Recipe) -> None:
        super().__init__()
        self.size = recipe.size
        self.register_buffer("mean", torch.tensor(recipe.mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(recipe.std).view(1, 3, 1, 1), persistent=False)

    @torch.no_grad()
    def forward(self, images: Tensor) -> Tensor:
        x = images.float().div_(255.0)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if x.shape[-1] != self.size or x.shape[-2] != self.size:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False, antialias=True)
        return (x - self.mean) / self.std
