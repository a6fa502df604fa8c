"""SimCLR with -l2 similarity (t-SimCLR paper Sec. 3.1.4): the naive reference in float64 (values and
gradients), the tiled path, coincident points, float32 at large feature scales, and its limits."""
from __future__ import annotations

import math

import pytest
import torch

import suite.losses as L
from tests import reference as R

F64 = torch.float64


def _pair(n, d, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(n, d, generator=g, dtype=F64), scale * torch.randn(n, d, generator=g, dtype=F64)


def _grads(fn, leaves):
    xs = [x.clone().requires_grad_() for x in leaves]
    v = fn(*xs)
    return v, torch.autograd.grad(v, xs)


@pytest.mark.parametrize("negatives,symmetric,use_queue,use_weights", [
    ("all", True, False, False), ("all", False, True, False), ("cross", True, False, True),
    ("cross", False, True, False), ("none", False, True, False), ("none", True, True, True)])
@pytest.mark.parametrize("n,d", [(2, 2), (5, 3)])
def test_matches_reference(negatives, symmetric, use_queue, use_weights, n, d):
    za, zb = _pair(n, d, 1)
    queue = torch.randn(4, d, dtype=F64, generator=torch.Generator().manual_seed(7)) if use_queue else None
    weights = torch.rand(n, dtype=F64, generator=torch.Generator().manual_seed(8)) + 0.1 if use_weights else None
    hp = {"negatives": negatives, "symmetric": symmetric, "temperature": 0.7}
    ours, g1 = _grads(lambda a, b: L.build("simclr_l2", **hp)(a, b, queue=queue, weights=weights), [za, zb])
    ref, g2 = _grads(lambda a, b: R.simclr_l2(a, b, queue=queue, weights=weights, **hp), [za, zb])
    assert ours.item() == pytest.approx(float(ref), rel=1e-10, abs=1e-12)
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("chunk", [1, 3, 4, 100])
@pytest.mark.parametrize("negatives,symmetric,use_queue,use_weights", [
    ("all", True, True, False), ("all", False, False, True), ("cross", True, True, True), ("cross", False, True, False),
    ("none", True, True, False)])
def test_tiled_equals_dense(chunk, negatives, symmetric, use_queue, use_weights):
    za, zb = _pair(7, 3, 2)
    za[3] = zb[3]  # a coincident pair: the distance floor, in the product's tiles too
    queue = torch.randn(5, 3, dtype=F64) if use_queue else None
    weights = torch.rand(7, dtype=F64, generator=torch.Generator().manual_seed(3)) + 0.1 if use_weights else None
    kw = {"negatives": negatives, "symmetric": symmetric}
    dense, gd = _grads(lambda a, b: L.build("simclr_l2", chunk_size=None, **kw)(a, b, queue=queue, weights=weights),
                       [za, zb])
    tiled, gt = _grads(lambda a, b: L.build("simclr_l2", chunk_size=chunk, **kw)(a, b, queue=queue, weights=weights),
                       [za, zb])
    assert float(tiled) == pytest.approx(float(dense), rel=1e-12)
    for a, b in zip(gd, gt):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("negatives,symmetric", [("all", True), ("all", False), ("cross", True)])
@pytest.mark.parametrize("use_weights", [False, True])
def test_coincident_negatives_tiled_equals_dense(negatives, symmetric, use_weights):
    """Coincident negatives (za[5] = za[3] = zb[3]: za[3]'s negative za[5] in "all", za[5]'s negative zb[3] in
    "cross"), their squared distance from the product a rounding residue: tiled (the forward that forms the gradient
    without weights, the backward's tiles with them) as dense within sqrt(float64 eps), since sqrt of a residue of
    1e-17 is 3e-9 on either path; the gradients stay bounded."""
    za, zb = _pair(7, 3, 2)
    za[3] = za[5] = zb[3]
    weights = torch.rand(7, dtype=F64, generator=torch.Generator().manual_seed(3)) + 0.1 if use_weights else None
    kw = {"negatives": negatives, "symmetric": symmetric}
    dense, gd = _grads(lambda a, b: L.build("simclr_l2", chunk_size=None, **kw)(a, b, weights=weights), [za, zb])
    tiled, gt = _grads(lambda a, b: L.build("simclr_l2", chunk_size=3, **kw)(a, b, weights=weights), [za, zb])
    assert float(tiled) == pytest.approx(float(dense), rel=1e-7)
    for a, b in zip(gd, gt):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7) and float(a.abs().max()) < 1.0


def test_coincident_positives_have_finite_gradients():
    z = torch.randn(6, 2, dtype=F64)
    v, (ga, gb) = _grads(lambda a, b: L.build("simclr_l2")(a, b), [z, z])
    assert torch.isfinite(v) and torch.isfinite(ga).all() and torch.isfinite(gb).all()


def test_temperature_is_a_feature_scale_and_not_scale_invariant():
    za, zb = _pair(6, 2, 3)
    loss = L.build("simclr_l2", temperature=1.0)
    assert float(loss(3.0 * za, 3.0 * zb)) == pytest.approx(float(L.build("simclr_l2", temperature=1 / 3)(za, zb)))
    assert float(loss(3.0 * za, 3.0 * zb)) != pytest.approx(float(loss(za, zb)))  # unlike cosine SimCLR


def test_far_apart_clusters_reach_the_lower_bound():
    """Positives coincide and negatives go to infinity: the loss -> 0 (the positive's term alone); float32 too."""
    centres = torch.arange(4, dtype=F64)[:, None] * torch.tensor([[1e4, 0.0]], dtype=F64)
    for dtype in (F64, torch.float32):
        v = L.build("simclr_l2")(centres.to(dtype), centres.to(dtype))
        assert math.isfinite(float(v)) and float(v) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("offset,spread", [(0.0, 1e-3), (1e3, 1.0), (1e4, 10.0), (0.0, 1e3)])
def test_float32_matches_float64_far_from_the_origin(offset, spread):
    za, zb = _pair(64, 2, 5, scale=spread)
    zb = za + 0.1 * spread * (zb / spread)  # positives near their anchors
    za, zb = za + offset, zb + offset
    for chunk in (None, 16):
        loss = L.build("simclr_l2", chunk_size=chunk)
        ref = float(loss(za, zb))
        assert float(loss(za.float(), zb.float())) == pytest.approx(ref, rel=1e-4, abs=1e-4)
