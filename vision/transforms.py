"""Batch augmentations on uint8 image tensors with kornia: V views per image, optional crop IoU.

Recipes (the papers' appendices):

- ``cifar`` (SimCLR / CACR / Wang & Isola CIFAR): RandomResizedCrop(32, scale (0.2, 1)),
  horizontal flip p = 0.5, ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, normalise;
- ``stl10`` (Wang & Isola / CACR STL-10): RandomResizedCrop(64, scale (0.08, 1)), flip,
  ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, normalise;
- ``imagenet`` (MoCo v2's ``main_moco.py --aug-plus``, used by CACR / MACL / t-SimCLR on ImageNet):
  RandomResizedCrop(224, scale (0.2, 1)), ColorJitter(0.4, 0.4, 0.4, 0.1) p = 0.8, grayscale p = 0.2, Gaussian blur
  sigma (0.1, 2) p = 0.5, flip, normalise;
- ``simclr-imagenet`` (SimCLR, Chen et al. 2020, App. A; MACL App. B.1's SimCLR runs): RandomResizedCrop(224, scale
  (0.08, 1)), flip, ColorJitter(0.8, 0.8, 0.8, 0.2) p = 0.8 (colour distortion strength 1), grayscale p = 0.2,
  Gaussian blur sigma (0.1, 2) p = 0.5 with a kernel of 10 % of the image side, normalise;
- ``digits`` (built-in 8x8 smoke data): crop scale (0.5, 1), no flip, brightness/contrast jitter.

Colour jitter order (``Recipe.jitter_order``): torchvision's ColorJitter, which the papers' pipelines call on one
image at a time, applies brightness, contrast, saturation and hue in an order drawn per image; kornia's ColorJitter
draws one order per batch. ``"image"`` (:class:`ColorJitter` here: torchvision's definitions, factors and order per
image, vectorised over the batch) is the papers' and the ``imagenet`` / ``simclr-imagenet`` recipes' (a fix: no
recorded run used ``imagenet`` before it); ``"batch"`` (kornia's) stays the ``cifar`` / ``stl10`` / ``digits``
recipes', so their recorded runs keep their meaning.

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
    jitter_order: str = "batch"  # "image": order drawn per image (torchvision's); "batch": once per batch (kornia's)


RECIPES: dict[str, Recipe] = {
    "cifar": Recipe(size=32),
    "stl10": Recipe(size=64, scale=(0.08, 1.0), mean=(0.4467, 0.4398, 0.4066), std=(0.2603, 0.2566, 0.2713)),
    "imagenet": Recipe(size=224, blur_p=0.5, mean=IMAGENET_MEAN, std=IMAGENET_STD, jitter_order="image"),
    "simclr-imagenet": Recipe(size=224, scale=(0.08, 1.0), jitter=(0.8, 0.8, 0.8, 0.2), blur_p=0.5,
                              mean=IMAGENET_MEAN, std=IMAGENET_STD, jitter_order="image"),
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


JITTER_ORDERS = ("batch", "image")


def rgb_to_grayscale(x: Tensor) -> Tensor:
    """torchvision's luma (ITU-R 601-2): (..., 3, H, W) -> (..., 1, H, W)."""
    r, g, b = x.unbind(-3)
    return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)


def _blend(a: Tensor, b: Tensor, ratio: Tensor) -> Tensor:
    return (ratio * a + (1.0 - ratio) * b).clamp(0.0, 1.0)


def _rgb2hsv(x: Tensor) -> Tensor:
    """torchvision's ``_rgb2hsv`` (hue in [0, 1))."""
    r, g, b = x.unbind(-3)
    maxc, minc = x.max(-3).values, x.min(-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    div = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), -3)


def _hsv2rgb(x: Tensor) -> Tensor:
    """torchvision's ``_hsv2rgb`` in its closed form: channel c = v - v s clamp(min(k, 4 - k), 0, 1) with
    k = (n + 6 h) mod 6, n = 5, 3, 1 for red, green, blue (the same six sectors as torchvision's table, without its
    (6, H, W) mask and einsum: 4x faster on the CPU)."""
    h, s, v = x.unbind(-3)
    h6 = (h * 6.0).unsqueeze(-3)  # (..., 1, H, W)
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device, dtype=x.dtype).view(3, 1, 1)
    k = torch.remainder(n + h6, 6.0)  # (..., 3, H, W)
    return v.unsqueeze(-3) - (v * s).unsqueeze(-3) * torch.minimum(k, 4.0 - k).clamp(0.0, 1.0)


def adjust_brightness(x: Tensor, f: Tensor) -> Tensor:
    """torchvision's definitions with one factor per image: x (N, 3, H, W) in [0, 1], f (N,)."""
    return _blend(x, torch.zeros_like(x), f.view(-1, 1, 1, 1))


def adjust_contrast(x: Tensor, f: Tensor) -> Tensor:
    mean = rgb_to_grayscale(x).mean(dim=(-3, -2, -1), keepdim=True)  # (N, 1, 1, 1): the image's mean luma
    return _blend(x, mean, f.view(-1, 1, 1, 1))


def adjust_saturation(x: Tensor, f: Tensor) -> Tensor:
    return _blend(x, rgb_to_grayscale(x), f.view(-1, 1, 1, 1))


def adjust_hue(x: Tensor, f: Tensor) -> Tensor:
    h, s, v = _rgb2hsv(x).unbind(-3)
    return _hsv2rgb(torch.stack(((h + f.view(-1, 1, 1)) % 1.0, s, v), -3))


JITTER_OPS = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)


class JitterParams(NamedTuple):
    factors: Tensor  # (N, 4) brightness, contrast, saturation, hue factors
    order: Tensor  # (N, 4) the image's order: order[i, j] is the op (0..3) applied j-th
    applied: Tensor  # (N,) bool: jitter applied (probability p)


class ColorJitter(nn.Module):
    """torchvision's ``RandomApply([ColorJitter(b, c, s, h)], p)`` on a batch, each image drawn on its own: applied with
    probability ``p``; factors brightness, contrast, saturation ~ U[max(0, 1 - x), 1 + x], hue ~ U[-h, h]; the order of
    the four adjustments a uniform random permutation per image (torchvision's ``randperm(4)`` per call; kornia's
    ColorJitter draws one order per batch). An adjustment of strength 0 is skipped, as torchvision skips it.

    Vectorised: a loop over the 4 positions and the 4 adjustments, each adjustment applied to the whole batch and kept
    where it is the image's adjustment at that position (``torch.where``), never a loop over images.

    Shapes: (N, 3, H, W) float in [0, 1] -> (N, 3, H, W).
    Example: >>> ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8)(torch.rand(4, 3, 8, 8)).shape  # torch.Size([4, 3, 8, 8])
    """

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0, hue: float = 0.0,
                 p: float = 1.0) -> None:
        super().__init__()
        if min(brightness, contrast, saturation, hue) < 0 or hue > 0.5 or not 0.0 <= p <= 1.0:
            raise ValueError(f"ColorJitter needs strengths >= 0, hue <= 0.5 and p in [0, 1]; got "
                             f"{(brightness, contrast, saturation, hue, p)}")
        self.strength = (float(brightness), float(contrast), float(saturation), float(hue))
        self.p = float(p)
        self.ranges = [(max(0.0, 1.0 - x), 1.0 + x) for x in self.strength[:3]] + [(-self.strength[3], self.strength[3])]

    def sample(self, n: int, device: torch.device | None = None) -> JitterParams:
        u = torch.rand(n, 4, device=device)
        lo = torch.tensor([r[0] for r in self.ranges], device=device)
        hi = torch.tensor([r[1] for r in self.ranges], device=device)
        factors = lo + (hi - lo) * u  # (N, 4)
        order = torch.rand(n, 4, device=device).argsort(dim=1)  # (N, 4): a uniform permutation per image
        applied = torch.rand(n, device=device) < self.p
        return JitterParams(factors, order, applied)

    def apply(self, x: Tensor, params: JitterParams, subsets: bool | None = None) -> Tensor:
        """The adjustments of ``params`` (a :meth:`sample`'s) on x (N, 3, H, W). ``subsets`` (default: on the CPU)
        computes each adjustment on the images that take it at a position only (an index of the images: on a GPU a
        wait for the device, so there each adjustment runs on the whole batch and ``torch.where`` keeps it); the
        values are the same."""
        if subsets is None:
            subsets = x.device.type == "cpu"
        ops = [k for k in range(4) if self.strength[k] > 0]
        for pos in range(4):
            at = params.order[:, pos]  # (N,) the op each image takes at this position
            out = x.clone() if subsets else x
            for k in ops:
                use = (at == k) & params.applied  # (N,)
                if subsets:
                    idx = use.nonzero().squeeze(1)
                    if idx.numel():
                        out[idx] = JITTER_OPS[k](x[idx], params.factors[idx, k])
                else:
                    out = torch.where(use[:, None, None, None], JITTER_OPS[k](x, params.factors[:, k]), out)
            x = out
        return x

    def forward(self, x: Tensor) -> Tensor:
        return self.apply(x, self.sample(x.shape[0], x.device))


class ViewAugment(nn.Module):
    """``V`` independently augmented views of a uint8 batch (see module docstring)."""

    def __init__(self, recipe: Recipe, views: int = 2, return_iou: bool = False) -> None:
        super().__init__()
        if views < 1:
            raise ValueError(f"views must be >= 1, got {views}")
        self.recipe, self.num_views, self.return_iou = recipe, int(views), bool(return_iou)
        b, c, s, h = recipe.jitter
        if recipe.jitter_order not in JITTER_ORDERS:
            raise ValueError(f"jitter_order must be one of {JITTER_ORDERS}, got {recipe.jitter_order!r}")
        self.jitter: nn.Module | None = None
        if recipe.jitter_p > 0 and any(recipe.jitter):
            self.jitter = (ColorJitter(b, c, s, h, p=recipe.jitter_p) if recipe.jitter_order == "image"
                           else K.ColorJitter(b, c, s, h, p=recipe.jitter_p))
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
