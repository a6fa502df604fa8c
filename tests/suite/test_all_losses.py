"""Registry-driven checks over every loss in ``suite.losses.available()``: finite scalar, gradient
for every input, dtypes, invariances, clear errors on bad input, and a toy problem that SGD solves."""
from __future__ import annotations

import math

import pytest
import torch

import suite.losses as L
from suite.losses.examples import example_extra

NAMES = L.available()
F64 = torch.float64


def _extras(loss, n: int, gen: torch.Generator, dtype=torch.float32) -> dict:
    """The keyword inputs the loss requires (labels of 3 classes, X-CLR's class graph): the loss core's own recipe."""
    return example_extra(loss, n, classes=3, generator=gen, dtype=dtype)


def _call(loss, za, zb, views=None, **extra):
    if loss.multi_view and views is not None:
        return loss(views, **extra)
    return loss(za, zb, **extra)


def test_registry_lists_every_paper_loss():
    for name in ["infonce", "dcl", "macl", "cacr", "uaur", "cmc", "xclr", "tsimclr", "supcon", "align_uniform",
                 "hard_negative"]:
        assert name in NAMES
    assert isinstance(L.build("cct"), L.CACR)  # earlier paper's name
    assert L.build("uaur").t_pos == 0.0 and L.build("uaur").t_neg == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_finite_scalar_and_gradients(name):
    gen = torch.Generator().manual_seed(0)
    loss = L.build(name)
    za = torch.randn(6, 8, generator=gen, requires_grad=True)
    zb = torch.randn(6, 8, generator=gen, requires_grad=True)
    out = loss(za, zb, **_extras(loss, 6, gen))
    assert out.dim() == 0 and torch.isfinite(out)
    out.backward()
    for t in (za, zb):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0
    if loss.multi_view:
        views = torch.randn(4, 6, 8, generator=gen, requires_grad=True)
        v = loss(views)
        v.backward()
        assert torch.isfinite(v) and views.grad.abs().sum() > 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dtypes(name, dtype):
    gen = torch.Generator().manual_seed(1)
    loss = L.build(name)
    za64, zb64 = torch.randn(8, 16, generator=gen, dtype=F64), torch.randn(8, 16, generator=gen, dtype=F64)
    extra = _extras(loss, 8, gen, F64)
    ref = float(loss(za64, zb64, **extra))
    za = za64.to(dtype).requires_grad_()
    out = loss(za, zb64.to(dtype), **{k: (v.to(dtype) if v.is_floating_point() else v) for k, v in extra.items()})
    out.backward()
    assert torch.isfinite(out) and za.grad.dtype == dtype
    tol = 1e-5 if dtype != torch.bfloat16 else 5e-2
    assert float(out) == pytest.approx(ref, rel=tol, abs=tol)


@pytest.mark.parametrize("name", NAMES)
def test_permutation_invariance(name):
    gen = torch.Generator().manual_seed(2)
    loss = L.build(name)
    n = 7
    za, zb = torch.randn(n, 5, generator=gen, dtype=F64), torch.randn(n, 5, generator=gen, dtype=F64)
    extra = _extras(loss, n, gen, F64)
    perm = torch.randperm(n, generator=gen)
    pextra = dict(extra)
    if "labels" in extra:
        pextra["labels"] = extra["labels"][perm]
    if "similarity" in extra:
        pextra["similarity"] = extra["similarity"][perm][:, perm]
    a = loss(za, zb, **extra)
    b = loss(za[perm], zb[perm], **pextra)
    assert float(a) == pytest.approx(float(b), abs=1e-10)
    if loss.multi_view:
        views = torch.randn(4, n, 5, generator=gen, dtype=F64)
        assert float(loss(views)) == pytest.approx(float(loss(views[:, perm])), abs=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_scale_invariance_on_hypersphere(name):
    gen = torch.Generator().manual_seed(3)
    loss = L.build(name)
    za, zb = torch.randn(6, 5, generator=gen, dtype=F64), torch.randn(6, 5, generator=gen, dtype=F64)
    extra = _extras(loss, 6, gen, F64)
    a, b = float(loss(za, zb, **extra)), float(loss(3.7 * za, 0.2 * zb, **extra))
    if loss.hypersphere:
        assert a == pytest.approx(b, abs=1e-10)
    else:  # t-SimCLR works in Euclidean space: scale matters
        assert abs(a - b) > 1e-3


@pytest.mark.parametrize("name", NAMES)
def test_bad_inputs_raise_clear_errors(name):
    loss = L.build(name)
    gen = torch.Generator().manual_seed(4)
    za, zb = torch.randn(5, 4, generator=gen), torch.randn(5, 4, generator=gen)
    extra = _extras(loss, 5, gen)
    with pytest.raises(ValueError, match="same shape"):
        loss(za, zb[:4], **extra)
    with pytest.raises(ValueError, match="same shape"):
        loss(za, zb[:1], **extra)  # would broadcast: must not
    with pytest.raises(ValueError, match="N >= 2"):
        loss(za[:1], zb[:1], **_extras(loss, 1, gen))
    with pytest.raises(ValueError, match="2-D"):
        loss(za[0], zb[0], **extra)
    bad = za.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="non-finite.*NaN"):
        loss(bad, zb, **extra)
    bad[2, 1] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        loss(bad, zb, **extra)
    with pytest.raises(ValueError, match="floating-point"):
        loss(za.long(), zb.long(), **extra)
    if loss.has_negatives:
        with pytest.raises(ValueError, match="queue must have shape"):
            loss(za, zb, queue=torch.randn(3, 7), **extra)
    if loss.multi_view:
        with pytest.raises(ValueError, match="V >= 2"):
            loss(torch.randn(1, 5, 4))
        with pytest.raises(ValueError, match="3-D"):
            loss(torch.randn(5, 4))
    if "labels" in loss.requires:
        with pytest.raises(ValueError, match=r"labels must have shape \(5,\)"):
            loss(za, zb, labels=torch.arange(4))
    if "similarity" in loss.requires:
        with pytest.raises(ValueError, match=r"similarity graph must have shape \(5, 5\)"):
            loss(za, zb, similarity=torch.eye(4))


def test_unknown_names_and_hparams():
    with pytest.raises(ValueError, match="unknown loss 'infonc'.*did you mean infonce"):
        L.build("infonc")
    with pytest.raises(ValueError, match="no hyper-parameter"):
        L.build("infonce", tau=0.1)
    with pytest.raises(ValueError, match="negatives must be one of"):
        L.build("dcl", negatives="some")
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        L.build("infonce", temperature=0.0)
    with pytest.raises(ValueError, match='negatives="none" needs a queue'):
        L.build("infonce", negatives="none")(torch.randn(4, 3), torch.randn(4, 3))
    with pytest.raises(ValueError, match="fixes"):
        L.build("uaur", t_pos=1.0)


@pytest.mark.parametrize("name", NAMES)
def test_sgd_solves_a_toy_problem(name):
    """Embeddings of 8 clusters seen through two noisy views: a few Adam steps reduce the loss."""
    gen = torch.Generator().manual_seed(5)
    n, din = 16, 10
    x = torch.randn(n, din, generator=gen)
    net = torch.nn.Linear(din, 6)
    torch.manual_seed(0)
    loss = L.build(name)
    extra = _extras(loss, n, gen)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    noise = [0.3 * torch.randn(n, din, generator=gen) for _ in range(2)]

    def value():
        return loss(net(x + noise[0]), net(x + noise[1]), **extra)

    first = float(value())
    for _ in range(30):
        opt.zero_grad()
        value().backward()
        opt.step()
    assert float(value()) < first - 1e-3


# ----------------------------------------------------------------------------- limits and closed forms

def _p(n=6, d=5, seed=6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=F64), torch.randn(n, d, generator=g, dtype=F64)


def test_identical_embeddings_closed_forms():
    n = 5
    z = torch.ones(n, 4, dtype=F64)
    assert float(L.build("infonce")(z, z)) == pytest.approx(math.log(2 * n - 1))
    assert float(L.build("dcl")(z, z)) == pytest.approx(math.log(2 * n - 2))
    assert float(L.build("infonce", negatives="cross")(z, z)) == pytest.approx(math.log(n))
    assert float(L.build("tsimclr")(z, z)) == pytest.approx(math.log(2 * n * (2 * n - 1)))
    # MACL with all P_i = 1/(2N-1): V = (2N-1)/(2N-2), loss = V log(2N-1)
    assert float(L.build("macl")(z, z)) == pytest.approx((2 * n - 1) / (2 * n - 2) * math.log(2 * n - 1))


def test_macl_alpha0_no_reweight_is_infonce():
    za, zb = _p()
    for neg, sym in [("all", True), ("cross", False)]:
        m = L.build("macl", tau0=0.2, alpha=0.0, reweight=False, negatives=neg, symmetric=sym)
        i = L.build("infonce", temperature=0.2, negatives=neg, symmetric=sym)
        assert float(m(za, zb)) == pytest.approx(float(i(za, zb)), abs=1e-12)


def test_xclr_identity_graph_is_infonce():
    za, zb = _p()
    x = L.build("xclr", temperature=0.1, target_temperature=1e-4)
    assert float(x(za, zb, torch.eye(6, dtype=F64))) == pytest.approx(float(L.build("infonce")(za, zb)), abs=1e-9)


def test_xclr_label_graph_approaches_supcon():
    za, zb = _p(8)
    y = torch.tensor([0, 0, 1, 1, 1, 2, 2, 0])
    g = (y[:, None] == y[None]).to(F64)
    sup = float(L.build("supcon", temperature=0.1)(za, zb, y))
    gaps = [abs(float(L.build("xclr", target_temperature=ts)(za, zb, g)) - sup) for ts in (1.0, 0.3, 0.1, 0.01)]
    assert all(a > b for a, b in zip(gaps, gaps[1:]))  # monotone approach
    assert gaps[-1] < 1e-6


def test_cacr_two_views_single_positive_weight_one():
    za, zb = _p()
    ua, ub = torch.nn.functional.normalize(za, dim=1), torch.nn.functional.normalize(zb, dim=1)
    sq = ((ua - ub) ** 2).sum(1).mean()
    vals = []
    for t_pos in (0.5, 1.0, 5.0):
        c = L.build("cacr", t_pos=t_pos)
        vals.append(float(c(za, zb)))
        d = c.diagnostics()
        assert d["attraction"] == pytest.approx(float(sq))  # weight 1 on the single positive
        assert d["pos_weight_entropy"] == pytest.approx(0.0, abs=1e-12)
    assert vals[0] == pytest.approx(vals[1]) == pytest.approx(vals[2])


def test_uaur_is_cacr_with_zero_temperatures():
    views = torch.randn(4, 5, 3, generator=torch.Generator().manual_seed(7), dtype=F64)
    assert float(L.build("uaur")(views)) == pytest.approx(float(L.build("cacr", t_pos=0.0, t_neg=0.0)(views)), abs=1e-12)


def test_cmc_two_views_is_twice_symmetric_cross_infonce():
    za, zb = _p()
    cmc = float(L.build("cmc", temperature=0.2)(za, zb))
    inf = float(L.build("infonce", temperature=0.2, negatives="cross", symmetric=True)(za, zb))
    assert cmc == pytest.approx(2 * inf, abs=1e-12)


def test_hard_negative_beta0_is_infonce():
    za, zb = _p()
    hn = float(L.build("hard_negative", temperature=0.3, beta=0.0)(za, zb))
    assert hn == pytest.approx(float(L.build("infonce", temperature=0.3)(za, zb)), abs=1e-12)


def test_tsimclr_uniform_weights_equal_unweighted():
    za, zb = _p()
    t = L.build("tsimclr")
    assert float(t(za, zb, weights=torch.full((6,), 0.3, dtype=F64))) == pytest.approx(float(t(za, zb)), abs=1e-12)
    iou = torch.rand(6, dtype=F64)
    w = L.iou_weights(iou, tau_prime=1.0)
    assert float(w.mean()) == pytest.approx(1.0)
    assert torch.argmax(w) == torch.argmax(iou)


def test_symmetric_losses_are_invariant_to_swapping_views():
    za, zb = _p()
    for name in ("infonce", "dcl", "macl", "hard_negative", "align_uniform", "tsimclr", "cmc"):
        loss = L.build(name)
        assert float(loss(za, zb)) == pytest.approx(float(loss(zb, za)), abs=1e-10), name


def test_queue_gets_no_gradient_and_moco_form():
    za, zb = _p()
    za.requires_grad_()
    queue = torch.randn(10, 5, dtype=F64, requires_grad=True)
    moco = L.build("infonce", negatives="none", symmetric=False)
    moco(za, zb, queue=queue).backward()
    assert queue.grad is None and za.grad is not None
    # MoCo v2: -log(e^{q.k+/t} / (e^{q.k+/t} + sum_Q e^{q.Q/t}))
    qa, kb, qq = (torch.nn.functional.normalize(t.detach(), dim=1) for t in (za, zb, queue))
    pos = (qa * kb).sum(1) / 0.1
    manual = (torch.logaddexp(pos, torch.logsumexp(qa @ qq.T / 0.1, 1)) - pos).mean()
    assert float(moco(za, zb, queue=queue)) == pytest.approx(float(manual), abs=1e-12)


def _macl_rearranged_f64(za, zb, tau):
    """MACL (alpha = 0, reweight) in float64 with 1 - P_i formed as neg / (pos + neg), never as 1 - P,
    and -log P_i as log1p(neg / pos)."""
    za, zb = torch.nn.functional.normalize(za.double(), dim=1), torch.nn.functional.normalize(zb.double(), dim=1)
    e = torch.cat([za, zb])
    n = za.shape[0]
    s = e @ e.T / tau
    losses = []
    for i in range(2 * n):
        p = (i + n) % (2 * n)
        m = s[i].max()
        num = torch.exp(s[i, p] - m)
        neg = sum(torch.exp(s[i, k] - m) for k in range(2 * n) if k not in (i, p))
        v = (1.0 + num / neg).detach()  # 1 / (1 - P_i) = (num + neg) / neg
        losses.append(v * torch.log1p(neg / num))  # -log P_i = log((num + neg) / num)
    return torch.stack(losses).mean()


@pytest.mark.parametrize("tau", [0.05, 0.03, 0.02])
def test_macl_float32_exact_at_small_temperature(tau):
    """Near-identical positive pairs (P_i -> 1) at tau_a down to 0.02: float32 stays finite and matches the
    float64 value and gradient (the old 1/(1 - P) form gave about -1e31 at 0.05 and NaN gradients below 0.03);
    the per-anchor reweighted loss tends to 1 there."""
    g = torch.Generator().manual_seed(5)
    za = torch.randn(16, 32, generator=g)
    zb = za + 1e-4 * torch.randn(16, 32, generator=g)
    x32 = [za.clone().requires_grad_(), zb.clone().requires_grad_()]
    x64 = [za.double().requires_grad_(), zb.double().requires_grad_()]
    loss32 = L.build("macl", tau0=tau, alpha=0.0)(*x32)
    loss64 = _macl_rearranged_f64(*x64, tau)
    assert torch.isfinite(loss32)
    assert float(loss32) == pytest.approx(float(loss64), rel=1e-4)
    assert 0.9 < float(loss32) < 1.5  # tends to 1 as P_i -> 1
    g32 = torch.autograd.grad(loss32, x32)
    g64 = torch.autograd.grad(loss64, x64)
    for a, b in zip(g32, g64):
        assert torch.isfinite(a).all()
        assert torch.allclose(a.double(), b, rtol=1e-3, atol=1e-4 * float(b.abs().max()))


def test_macl_tau_floor_is_reported_and_tau0_below_it_refused():
    """Text setting (tau0 0.05, alpha 2, A0 0.8) at alignment A < 0.31 reaches the floor: counted, not hidden."""
    m = L.build("macl", tau0=0.05, alpha=2.0, a0=0.8, reweight=False)
    g = torch.Generator().manual_seed(6)
    za, zb = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)  # A ~ 0
    assert torch.isfinite(m(za, zb))
    assert m.diagnostics()["tau_clamped"] == 1.0 and m.n_clamped == 1
    assert float(m.tau_a) == pytest.approx(m.tau_min)
    m(za, za)  # A = 1: tau_a = 0.05 * 1.4, not clamped
    assert m.diagnostics()["tau_clamped"] == 0.0 and m.n_clamped == 1
    with pytest.raises(ValueError, match="tau0 = 0.0005 is below"):
        L.build("macl", tau0=5e-4)
    for bad in ({"alpha": float("nan")}, {"a0": float("inf")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            L.build("macl", **bad)


def test_tsimclr_float32_matches_float64_over_the_papers_grids_and_scales():
    """t-SimCLR's normaliser in log space: float32 within 1e-4 relative of float64 for tau, t_df in
    {1, 2, 5, 10, 100} and features from 1e-3 to 1e3 (summing q directly gave -inf at scale 1e3, t_df 100)."""
    import itertools

    g = torch.Generator().manual_seed(0)
    za = torch.randn(32, 16, generator=g)
    zb = za + 0.5 * torch.randn(32, 16, generator=g)
    queue = torch.randn(8, 16, generator=g)
    for scale, tau, df in itertools.product([1e-3, 1.0, 1e2, 1e3], [1, 2, 5, 10], [1, 2, 5, 10, 100]):
        loss = L.build("tsimclr", temperature=tau, t_df=df)
        for q in (None, queue):
            a = loss(za * scale, zb * scale, queue=None if q is None else q * scale)
            b = loss((za * scale).double(), (zb * scale).double(), queue=None if q is None else (q * scale).double())
            assert torch.isfinite(a), (scale, tau, df)
            assert abs(float(a) - float(b)) <= 1e-4 * abs(float(b)), (scale, tau, df, float(a), float(b))
