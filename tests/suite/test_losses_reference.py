"""Every loss against its naive reference (tests/reference.py) in float64: values to 1e-6 and
gradients through autograd of the reference, over several N, d, V and options."""
from __future__ import annotations


import pytest
import torch

import suite.losses as L
from tests import reference as R

F64 = torch.float64
SHAPES = [(2, 3), (5, 4), (7, 6)]


def _pair(n: int, d: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=F64), torch.randn(n, d, generator=g, dtype=F64)


def _check(ours_fn, ref_fn, leaves, atol=1e-6):
    xs = [x.clone().requires_grad_() for x in leaves]
    ys = [x.clone().requires_grad_() for x in leaves]
    v_ours = ours_fn(*xs)
    v_ref = ref_fn(*ys)
    assert v_ours.dtype == torch.float64
    assert torch.allclose(v_ours, v_ref, atol=atol, rtol=1e-6), (float(v_ours), float(v_ref))
    g_ours = torch.autograd.grad(v_ours, xs)
    g_ref = torch.autograd.grad(v_ref, ys)
    for a, b in zip(g_ours, g_ref):
        assert torch.allclose(a, b, atol=atol, rtol=1e-5), (a - b).abs().max()


FAMILY = {"infonce": R.infonce, "dcl": R.dcl, "macl": R.macl, "hard_negative": R.hard_negative}


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("negatives,symmetric", [("all", True), ("all", False), ("cross", True), ("cross", False)])
@pytest.mark.parametrize("n,d", SHAPES)
def test_infonce_family(name, negatives, symmetric, n, d):
    za, zb = _pair(n, d, 1)
    hp = {"negatives": negatives, "symmetric": symmetric}
    loss = L.build(name, **hp)
    _check(lambda a, b: loss(a, b), lambda a, b: FAMILY[name](a, b, **hp), [za, zb])


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("negatives", ["all", "cross", "none"])
def test_infonce_family_with_queue(name, negatives):
    za, zb = _pair(4, 5, 2)
    queue = torch.randn(6, 5, generator=torch.Generator().manual_seed(3), dtype=F64)
    hp = {"negatives": negatives, "symmetric": negatives != "none"}
    loss = L.build(name, **hp)
    # queue is a constant (no gradient through it): compare grads w.r.t. z only
    _check(lambda a, b: loss(a, b, queue=queue), lambda a, b: FAMILY[name](a, b, queue=queue, **hp), [za, zb])


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("negatives,symmetric", [("all", True), ("cross", False), ("none", False)])
def test_infonce_family_weighted_pairs(name, negatives, symmetric):
    """t-SimCLR Sec. 4.1 / Fig. 2a on cosine losses: (1/2n) sum_i p_ii' (l(x_i, x_i') + l(x_i', x_i))."""
    za, zb = _pair(5, 4, 30)
    w = torch.rand(5, generator=torch.Generator().manual_seed(31), dtype=F64) * 3
    queue = torch.randn(4, 4, generator=torch.Generator().manual_seed(32), dtype=F64) if negatives == "none" else None
    hp = {"negatives": negatives, "symmetric": symmetric}
    loss = L.build(name, **hp)
    _check(lambda a, b: loss(a, b, queue=queue, weights=w),
           lambda a, b: FAMILY[name](a, b, queue=queue, weights=w, **hp), [za, zb])
    # uniform weights are the unweighted loss; scaling the weights changes nothing
    assert float(loss(za, zb, queue=queue, weights=torch.full((5,), 7.0, dtype=F64))) == pytest.approx(float(loss(za, zb, queue=queue)))
    assert float(loss(za, zb, queue=queue, weights=w)) == pytest.approx(float(loss(za, zb, queue=queue, weights=5 * w)))
    with pytest.raises(ValueError, match="weights"):
        loss(za, zb, queue=queue, weights=-w)


@pytest.mark.parametrize("hp", [dict(tau0=0.2, alpha=0.5, a0=0.0), dict(tau0=0.05, alpha=2.0, a0=0.8, reweight=False),
                                dict(tau0=0.1, alpha=0.0, reweight=True)])
def test_macl_settings(hp):
    za, zb = _pair(6, 4, 4)
    zb = za + 0.3 * zb  # well aligned, as in SimCSE (tau_a stays positive with alpha = 2)
    loss = L.build("macl", **hp)
    _check(lambda a, b: loss(a, b), lambda a, b: R.macl(a, b, **hp), [za, zb])
    za_u, zb_u = torch.nn.functional.normalize(za, dim=1), torch.nn.functional.normalize(zb, dim=1)
    align = float((za_u * zb_u).sum(1).mean())
    assert float(loss.alignment) == pytest.approx(align)
    assert float(loss.tau_a) == pytest.approx(hp["tau0"] * (1 + hp["alpha"] * (align - hp.get("a0", 0.0))))
    assert loss.diagnostics()["tau"] == pytest.approx(float(loss.tau_a))


def test_hard_negative_debiased():
    za, zb = _pair(5, 4, 5)
    loss = L.build("hard_negative", tau_plus=0.1, beta=0.5)
    _check(lambda a, b: loss(a, b), lambda a, b: R.hard_negative(a, b, tau_plus=0.1, beta=0.5), [za, zb])


@pytest.mark.parametrize("n,d", SHAPES)
@pytest.mark.parametrize("classes", [2, 5])  # fewer classes than dimensions and more (two ways to a class's sum)
def test_supcon(n, d, classes):
    za, zb = _pair(n, d, 6)
    labels = torch.arange(n) % classes
    loss = L.build("supcon", temperature=0.2)
    _check(lambda a, b: loss(a, b, labels), lambda a, b: R.supcon(a, b, labels, 0.2), [za, zb])


@pytest.mark.parametrize("n,d", SHAPES)
@pytest.mark.parametrize("tau_s", [0.1, 1.0])
def test_xclr(n, d, tau_s):
    za, zb = _pair(n, d, 7)
    g = torch.rand(n, n, generator=torch.Generator().manual_seed(8), dtype=F64)
    g = (g + g.T) / 2
    g.fill_diagonal_(1.0)
    loss = L.build("xclr", temperature=0.1, target_temperature=tau_s)
    _check(lambda a, b: loss(a, b, g), lambda a, b: R.xclr(a, b, g, 0.1, tau_s), [za, zb])


def test_xclr_queue():
    za, zb = _pair(4, 3, 20)
    g = torch.eye(4, dtype=F64)
    queue = torch.randn(5, 3, generator=torch.Generator().manual_seed(21), dtype=F64)
    qs = torch.rand(4, 5, generator=torch.Generator().manual_seed(22), dtype=F64)
    partial = qs.clone()
    partial[:, :2] = float("-inf")  # unlabelled queue entries: pure negatives
    loss = L.build("xclr", target_temperature=0.5)
    for q_sim in (None, qs, partial):
        _check(lambda a, b: loss(a, b, g, queue=queue, queue_similarity=q_sim),
               lambda a, b: R.xclr(a, b, g, 0.1, 0.5, queue=queue, queue_similarity=q_sim), [za, zb])


def test_xclr_queue_without_similarities_takes_no_target_mass():
    """A queue with no similarities is pure negatives: the targets (and so the loss's target term) do not
    change with the queue size; the loss equals X-CLR without queue plus the extra negatives only."""
    za, zb = _pair(6, 4, 24)
    g = torch.eye(6, dtype=F64)
    loss = L.build("xclr", temperature=0.1, target_temperature=0.1)
    big = torch.randn(4096, 4, generator=torch.Generator().manual_seed(25), dtype=F64)
    # identity graph, tau_s -> targets ~ one-hot on the other view: X-CLR with a queue ~ InfoNCE with a queue
    ref = L.build("infonce", temperature=0.1)(za, zb, queue=big)
    ours = loss(za, zb, g, queue=big)
    assert abs(float(ours) - float(ref)) < 0.05  # target mass on the queue would add ~74 %-weighted queue terms
    with pytest.raises(ValueError, match="NaN"):
        loss(za, zb, g, queue=big[:3], queue_similarity=torch.full((6, 3), float("nan"), dtype=F64))


def test_supcon_queue():
    za, zb = _pair(4, 3, 23)
    labels = torch.tensor([0, 1, 0, 2])
    queue = torch.randn(3, 3, generator=torch.Generator().manual_seed(24), dtype=F64)
    loss = L.build("supcon")
    out = loss(za, zb, labels, queue=queue, queue_labels=torch.tensor([0, 1, 1]))
    assert torch.isfinite(out)
    with pytest.raises(ValueError, match="queue_labels"):
        loss(za, zb, labels, queue=queue)


@pytest.mark.parametrize("n,d", SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_tsimclr(n, d, weighted):
    za, zb = _pair(n, d, 9)
    za, zb = 3 * za, 3 * zb  # Euclidean: scale matters
    w = torch.rand(n, generator=torch.Generator().manual_seed(10), dtype=F64) + 0.1 if weighted else None
    loss = L.build("tsimclr")
    _check(lambda a, b: loss(a, b, weights=w), lambda a, b: R.tsimclr(a, b, weights=w), [za, zb])


def test_tsimclr_queue_and_params():
    za, zb = _pair(4, 3, 11)
    queue = torch.randn(3, 3, generator=torch.Generator().manual_seed(12), dtype=F64)
    loss = L.build("tsimclr", temperature=1.0, t_df=1.0)
    _check(lambda a, b: loss(a, b, queue=queue), lambda a, b: R.tsimclr(a, b, 1.0, 1.0, queue=queue), [za, zb])


@pytest.mark.parametrize("chunk", [None, 3])
def test_tsimclr_duplicate_rows_at_a_small_kernel_scale(chunk):
    """Rows that coincide (a positive pair, a queue entry) have u = 0, which the product form of the distances gives
    as +-rounding: their pairs keep the value q(0) = 1 and get no gradient (its true value, e_j - e_k = 0), also where
    a small kernel scale (tau t_df = 0.02) makes f'(0) = -c / a large. Dense and in tiles of 3 rows."""
    za, zb = _pair(5, 4, 14)
    zb[:2] = za[:2]
    queue = torch.cat([za[2:3], torch.randn(2, 4, generator=torch.Generator().manual_seed(15), dtype=F64)])
    loss = L.build("tsimclr", temperature=0.02, t_df=1.0, chunk_size=chunk)
    for q in (None, queue):
        _check(lambda a, b: loss(a, b, queue=q), lambda a, b: R.tsimclr(a, b, 0.02, 1.0, queue=q), [za, zb])


@pytest.mark.parametrize("n,d", SHAPES)
def test_align_uniform(n, d):
    za, zb = _pair(n, d, 13)
    loss = L.build("align_uniform", alpha=2.0, t=2.0)
    _check(lambda a, b: loss(a, b), lambda a, b: R.align_uniform(a, b), [za, zb])
    queue = torch.randn(3, d, generator=torch.Generator().manual_seed(14), dtype=F64)
    _check(lambda a, b: loss(a, b, queue=queue), lambda a, b: R.align_uniform(a, b, queue=queue), [za, zb])


MULTI = {"cmc": R.cmc, "cacr": R.cacr}


@pytest.mark.parametrize("v,n,d", [(2, 3, 4), (3, 4, 3), (5, 3, 5)])
def test_cmc(v, n, d):
    views = torch.randn(v, n, d, generator=torch.Generator().manual_seed(15), dtype=F64)
    loss = L.build("cmc", temperature=0.2)
    _check(lambda x: loss(x), lambda x: R.cmc(x, 0.2), [views])
    queue = torch.randn(4, d, generator=torch.Generator().manual_seed(16), dtype=F64)
    _check(lambda x: loss(x, queue=queue), lambda x: R.cmc(x, 0.2, queue=queue), [views])


@pytest.mark.parametrize("v,n,d", [(2, 3, 4), (3, 4, 3), (5, 3, 5)])
@pytest.mark.parametrize("t_pos,t_neg,detach", [(1.0, 2.0, False), (0.5, 1.0, True), (3.0, 0.7, False)])
@pytest.mark.parametrize("negatives", ["same_view", "cross_view"])
def test_cacr(v, n, d, t_pos, t_neg, detach, negatives):
    views = torch.randn(v, n, d, generator=torch.Generator().manual_seed(17), dtype=F64)
    loss = L.build("cacr", t_pos=t_pos, t_neg=t_neg, detach_weights=detach, negatives=negatives)
    _check(lambda x: loss(x), lambda x: R.cacr(x, t_pos, t_neg, detach, negatives=negatives), [views])


@pytest.mark.parametrize("negatives", ["same_view", "cross_view"])
def test_cacr_queue_and_two_view_call(negatives):
    views = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(18), dtype=F64)
    queue = torch.randn(6, 5, generator=torch.Generator().manual_seed(19), dtype=F64)
    loss = L.build("cacr", negatives=negatives)
    _check(lambda x: loss(x, queue=queue), lambda x: R.cacr(x, queue=queue, negatives=negatives), [views])
    za, zb = views[0], views[1]
    _check(lambda a, b: loss(a, b), lambda a, b: R.cacr(torch.stack([a, b]), negatives=negatives), [za, zb])


@pytest.mark.parametrize("v", [2, 3, 5])
def test_cacr_moco_form_algorithm3(v):
    """Algorithm 3: queries from the online encoder, keys (other views) as positives with weights
    without gradient, queue plus same-view queries as negatives with weights keeping their gradient."""
    g = torch.Generator().manual_seed(20)
    views = torch.randn(v, 4, 5, generator=g, dtype=F64)
    keys = views + 0.3 * torch.randn(v, 4, 5, generator=g, dtype=F64)
    queue = torch.randn(6, 5, generator=g, dtype=F64)
    loss = L.build("cacr", t_pos=0.7, t_neg=1.5)
    _check(lambda x: loss(x, queue=queue, keys=keys), lambda x: R.cacr(x, 0.7, 1.5, queue=queue, keys=keys), [views])
    with pytest.raises(ValueError, match="same_view"):
        L.build("cacr", negatives="cross_view")(views, keys=keys)
    with pytest.raises(ValueError, match="keys"):
        loss(views, keys=keys[:, :3])


def test_cacr_arrangements_differ_and_same_view_is_the_papers_eq5():
    """The two arrangements are different objectives (V >= 2); with V = 2 and t_neg = 0 the same-view
    repulsion is the mean cost to the other queries of the query's own view, (1/(N-1)) sum_j c(x_i, x_j)."""
    views = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(21), dtype=F64)
    a = L.build("cacr", negatives="same_view")(views)
    b = L.build("cacr", negatives="cross_view")(views)
    assert abs(float(a) - float(b)) > 1e-3
    loss = L.build("cacr", t_neg=0.0)
    loss(views)
    z = torch.nn.functional.normalize(views, dim=-1)
    d = torch.cdist(z, z) ** 2  # (V, N, N)
    expected = -(d.sum(-1) / (z.shape[1] - 1)).mean()
    assert loss.diagnostics()["repulsion"] == pytest.approx(float(expected), abs=1e-10)
