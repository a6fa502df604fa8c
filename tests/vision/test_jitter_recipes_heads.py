"""Per-image colour-jitter order (torchvision's ColorJitter), the SimCLR ImageNet recipe and MoCo v2's projection head
(issue 75, item 3 and the MoCo head)."""
from __future__ import annotations

import colorsys
import itertools

import kornia.augmentation as K
import pytest
import torch

from vision.models import Encoder, build_encoder, load_init
from vision.models.head import ProjectionHead
from vision.transforms import RECIPES, ColorJitter, ViewAugment, get_recipe


def _ref_op(k: int, img: torch.Tensor, f: float) -> torch.Tensor:
    """torchvision's adjustments on one image (3, H, W), written naively: blends with clamp, luma 0.2989/0.587/0.114,
    hue through colorsys per pixel."""
    luma = 0.2989 * img[0] + 0.587 * img[1] + 0.114 * img[2]
    if k == 0:
        return (f * img).clamp(0, 1)
    if k == 1:
        return (f * img + (1 - f) * luma.mean()).clamp(0, 1)
    if k == 2:
        return (f * img + (1 - f) * luma).clamp(0, 1)
    out = torch.empty_like(img)
    for i in range(img.shape[1]):
        for j in range(img.shape[2]):
            h, s, v = colorsys.rgb_to_hsv(*img[:, i, j].tolist())
            out[:, i, j] = torch.tensor(colorsys.hsv_to_rgb((h + f) % 1.0, s, v), dtype=img.dtype)
    return out


def _reference(x, params):
    out = []
    for n in range(x.shape[0]):
        img = x[n]
        if params.applied[n]:
            for k in params.order[n].tolist():
                img = _ref_op(k, img, float(params.factors[n, k]))
        out.append(img)
    return torch.stack(out)


def test_jitter_equals_torchvisions_definition_per_image_in_its_own_order():
    torch.manual_seed(0)
    jit = ColorJitter(0.8, 0.8, 0.8, 0.2, p=0.8)
    x = torch.rand(12, 3, 5, 5, dtype=torch.float64)
    torch.manual_seed(1)
    params = jit.sample(12)
    torch.manual_seed(1)
    y = jit(x)  # forward draws exactly sample()'s parameters
    assert torch.allclose(y, _reference(x, params), atol=1e-9)
    assert torch.equal(jit.apply(x, params, subsets=False), jit.apply(x, params, subsets=True))  # GPU form = CPU form
    # two images of the batch with different orders: each image's output is its own order's, measurably not the other's
    orders = {tuple(o) for o, a in zip(params.order.tolist(), params.applied.tolist()) if a}
    assert len(orders) >= 2
    i, j = next((i, j) for i, j in itertools.combinations(range(12), 2)
                if params.applied[i] and params.applied[j] and not torch.equal(params.order[i], params.order[j]))
    swapped = params._replace(order=params.order.clone())
    swapped.order[i] = params.order[j]
    other = _reference(x[i:i + 1], type(params)(*(t[i:i + 1] for t in swapped)))
    assert (other - y[i:i + 1]).abs().max() > 1e-3


def test_jitter_order_is_drawn_per_image_kornias_per_batch():
    """The same image 64 times with the same factors: kornia's ColorJitter gives 64 equal outputs (one order per batch);
    ours gives several (an order per image)."""
    torch.manual_seed(0)
    x = torch.rand(1, 3, 6, 6).expand(64, -1, -1, -1).contiguous()
    jit = ColorJitter(0.4, 0.4, 0.4, 0.1)
    params = jit.sample(64)
    same = params._replace(factors=params.factors[:1].expand(64, -1))
    distinct = {tuple(torch.round(y * 1e4).flatten().tolist()) for y in jit.apply(x, same)}
    assert len(distinct) >= 5
    assert len({tuple(o) for o in params.order.tolist()}) >= 10
    kj = K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=1.0)
    kj(x)
    assert kj._params["order"].shape == (4,)  # kornia: one order for the whole batch


def test_jitter_marginals_match_torchvision():
    """Factors ~ U[max(0, 1 - s), 1 + s] (hue U[-h, h]), a uniform order over the 24 permutations, applied with
    probability p; a strength of 0 leaves its adjustment out."""
    torch.manual_seed(0)
    n = 48_000
    jit = ColorJitter(0.8, 0.4, 1.2, 0.2, p=0.8)
    pr = jit.sample(n)
    for k, (lo, hi) in enumerate([(0.2, 1.8), (0.6, 1.4), (0.0, 2.2), (-0.2, 0.2)]):
        f = pr.factors[:, k]
        assert lo <= float(f.min()) and float(f.max()) <= hi
        assert abs(float(f.mean()) - (lo + hi) / 2) < 4 * (hi - lo) / (12 * n) ** 0.5
        assert abs(float(f.var()) - (hi - lo) ** 2 / 12) < 0.02 * (hi - lo) ** 2 / 12
    assert torch.equal(pr.order.sort(1).values, torch.arange(4).expand(n, 4))  # each a permutation
    codes = (pr.order * torch.tensor([64, 16, 4, 1])).sum(1)
    counts = torch.bincount(codes, minlength=256)[torch.tensor(
        [sum(p * m for p, m in zip(perm, (64, 16, 4, 1))) for perm in itertools.permutations(range(4))])]
    assert int(counts.sum()) == n
    chi2 = float(((counts - n / 24) ** 2 / (n / 24)).sum())
    assert chi2 < 49.7  # chi-square, 23 degrees of freedom, p = 0.001
    assert abs(float(pr.applied.double().mean()) - 0.8) < 4 * (0.16 / n) ** 0.5
    # zero strength: that adjustment is skipped
    x = torch.rand(8, 3, 4, 4)
    only_b = ColorJitter(0.5, 0, 0, 0)
    p1 = only_b.sample(8)
    assert torch.allclose(only_b.apply(x, p1), (x * p1.factors[:, 0].view(-1, 1, 1, 1)).clamp(0, 1))


def test_simclr_imagenet_recipe_and_jitter_order_per_recipe():
    s, m = RECIPES["simclr-imagenet"], RECIPES["imagenet"]
    assert (s.size, s.scale, s.jitter, s.jitter_p, s.gray_p, s.blur_p, s.blur_sigma, s.flip_p) == (
        224, (0.08, 1.0), (0.8, 0.8, 0.8, 0.2), 0.8, 0.2, 0.5, (0.1, 2.0), 0.5)
    assert (m.size, m.scale, m.jitter, m.jitter_p, m.gray_p, m.blur_p) == (224, (0.2, 1.0), (0.4, 0.4, 0.4, 0.1),
                                                                            0.8, 0.2, 0.5)  # MoCo v2's, as before
    aug = ViewAugment(s)
    assert isinstance(aug.jitter, ColorJitter) and aug.jitter.strength == (0.8, 0.8, 0.8, 0.2)
    assert aug.blur is not None and aug.blur.flags["kernel_size"] == (23, 23)  # 10 % of 224, odd (SimCLR's 2*11+1)
    assert isinstance(ViewAugment(m).jitter, ColorJitter)
    for name in ("cifar", "stl10", "digits"):  # recorded runs' recipes keep kornia's batch order
        assert RECIPES[name].jitter_order == "batch" and isinstance(ViewAugment(RECIPES[name]).jitter, K.ColorJitter)
    torch.manual_seed(0)
    out = ViewAugment(get_recipe("simclr-imagenet", 32), views=2)(torch.randint(0, 256, (4, 3, 40, 40),
                                                                               dtype=torch.uint8))
    assert out.views.shape == (2, 4, 3, 32, 32) and torch.isfinite(out.views).all()


def test_mocov2_head_is_linear_relu_linear(tmp_path):
    h = ProjectionHead(512, out_dim=128, head="mocov2")
    kinds = [type(m).__name__ for m in h.net]
    assert kinds == ["Linear", "ReLU", "Linear"]
    assert (h.net[0].in_features, h.net[0].out_features, h.net[0].bias is not None) == (512, 512, True)
    assert (h.net[2].in_features, h.net[2].out_features) == (512, 128)
    assert [type(m).__name__ for m in ProjectionHead(512).net] == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
    with pytest.raises(ValueError, match="projection head"):
        ProjectionHead(8, head="byol")
    enc = build_encoder("convnet", 4, 8, proj_dim=6, proj_head="mocov2")
    assert enc.spec["proj_head"] == "mocov2" and "proj_head" not in build_encoder("convnet", 4, 8).spec
    enc.save_pretrained(tmp_path / "m")
    back = Encoder.from_pretrained(tmp_path / "m")
    assert back.head.kind == "mocov2"
    x = torch.randn(3, 3, 8, 8)
    assert torch.allclose(back(x), enc.eval()(x))
    with pytest.raises(ValueError, match="proj_head"):
        load_init(build_encoder("convnet", 4, 8, proj_dim=6), tmp_path / "m")


def test_moco_runs_take_mocov2s_head_by_default():
    from vision.config import PretrainConfig
    from vision.train import build_method

    r = get_recipe("digits")
    moco = build_method(PretrainConfig(dataset="digits", framework="moco", encoder="convnet", width=4), None, r)
    simclr = build_method(PretrainConfig(dataset="digits", framework="simclr", encoder="convnet", width=4), None, r)
    keep = build_method(PretrainConfig(dataset="digits", framework="moco", encoder="convnet", width=4,
                                       proj_head="simclr"), None, r)
    assert moco.encoder.head.kind == moco.key_encoder.head.kind == "mocov2" and moco.shuffle_ranks
    assert simclr.encoder.head.kind == keep.encoder.head.kind == "simclr"
    assert not build_method(PretrainConfig(dataset="digits", framework="moco", encoder="convnet", width=4,
                                           cross_rank_bn=False), None, r).shuffle_ranks
