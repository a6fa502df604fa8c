"""Augmentation: shapes, dtypes, ranges, distinct views, seeded determinism, crop IoU."""
from __future__ import annotations

import pytest
import torch

from vision.transforms import RECIPES, EvalTransform, ViewAugment, box_iou, get_recipe, sample_crop_boxes


def _images(n: int = 6, size: int = 32) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=g)


@pytest.mark.parametrize("views", [2, 5])
def test_shapes_dtype_range(views: int) -> None:
    r = get_recipe("cifar")
    out = ViewAugment(r, views=views, return_iou=True)(_images())
    assert out.views.shape == (views, 6, 3, 32, 32) and out.views.dtype == torch.float32
    assert torch.isfinite(out.views).all()
    mean, std = torch.tensor(r.mean).view(3, 1, 1), torch.tensor(r.std).view(3, 1, 1)
    lo, hi = (0 - mean) / std, (1 - mean) / std
    assert (out.views >= lo - 1e-5).all() and (out.views <= hi + 1e-5).all()
    assert out.iou is not None and out.iou.shape == (6,) and ((out.iou >= 0) & (out.iou <= 1)).all()
    assert out.boxes.shape == (views, 6, 4)


def test_views_differ_and_seeded() -> None:
    aug = ViewAugment(get_recipe("cifar"), views=3)
    x = _images()
    torch.manual_seed(1)
    a = aug(x).views
    torch.manual_seed(1)
    b = aug(x).views
    assert torch.equal(a, b)
    assert not torch.allclose(a[0], a[1]) and not torch.allclose(a[1], a[2])
    torch.manual_seed(2)
    assert not torch.allclose(aug(x).views, a)


def test_views_are_float32_under_a_training_steps_autocast() -> None:
    """A bf16 step runs the augmentation inside the encoder's autocast: the views are still computed in float32 (in
    bf16 the crops' sampling grid moved them by 0.055 on average), the same values as outside autocast."""
    aug = ViewAugment(get_recipe("cifar"), views=2)
    x = _images(16)
    torch.manual_seed(3)
    ref = aug(x).views
    torch.manual_seed(3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = aug(x).views
        assert torch.is_autocast_enabled("cpu")  # the caller's autocast is back on after the call
    assert out.dtype == torch.float32 and torch.equal(out, ref)


def test_other_recipes_and_grayscale_input() -> None:
    for name in RECIPES:
        r = get_recipe(name, size=16)
        out = ViewAugment(r, views=2)(_images(3, 24))
        assert out.views.shape == (2, 3, 3, 16, 16)
    one = torch.randint(0, 256, (4, 1, 8, 8), dtype=torch.uint8)
    assert ViewAugment(get_recipe("digits"), 2)(one).views.shape == (2, 4, 3, 8, 8)
    assert EvalTransform(get_recipe("cifar", 16))(_images()).shape == (6, 3, 16, 16)


def test_crop_boxes_and_iou() -> None:
    torch.manual_seed(0)
    b = sample_crop_boxes(500, 32, 40, (0.2, 1.0), (3 / 4, 4 / 3))
    assert (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all() and (b[:, 2] <= 40).all() and (b[:, 3] <= 32).all()
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) / (32 * 40)
    assert area.min() >= 0.15 and area.max() <= 1.0
    a = torch.tensor([[0.0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 4, 4]])
    c = torch.tensor([[0.0, 0, 10, 10], [5, 0, 15, 10], [10, 10, 12, 12]])
    assert torch.allclose(box_iou(a, c), torch.tensor([1.0, 50 / 150, 0.0]))


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="uint8"):
        ViewAugment(get_recipe("cifar"))(torch.rand(2, 3, 32, 32))
    with pytest.raises(ValueError, match="recipe"):
        get_recipe("nope")
