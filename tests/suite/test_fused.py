"""The fused Triton kernels of the tiled path (suite.losses.fused), run on the CPU under Triton's interpreter: every
loss that takes them against its float64 dense path (values and gradients), each kernel mode against a naive float64
reference (a queue with its gradient, two excluded columns, a row with every column left out, sizes that fill no
block), extreme temperatures, the opt-in precisions' error, and where the kernels do not apply."""
from __future__ import annotations

import os

import pytest
import torch

import suite.losses as L
from suite.losses import fused
from tests.suite.test_tiled import CASES, _inputs, _value_and_grads

pytest.importorskip("triton", reason="Triton is not installed (extra [triton]; in [test] on Linux x86-64)")
if os.environ.get("TRITON_INTERPRET") != "1":  # pragma: no cover (tests/conftest.py sets it)
    pytest.skip("TRITON_INTERPRET=1 must be set before Triton is imported", allow_module_level=True)

F64 = torch.float64
# the interpreter evaluates log(0) of a row block's padding rows in numpy (masked out afterwards)
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
FUSED_CASES = [c for c in CASES if L.loss_class(c[1]).fused_tiles != "no"] + [
    (f"simclr_l2-{neg}-{'sym' if sym else 'one'}", "simclr_l2", dict(negatives=neg, symmetric=sym, temperature=0.3),
     "pair") for neg, sym in (("all", True), ("all", False), ("cross", True))]


@pytest.fixture
def calls(monkeypatch):
    """The number of fused kernel calls made (so a test knows the kernels ran, not the PyTorch tiles)."""
    n = {"fused": 0, "symmetric": 0, "mix": 0, "cost": 0, "two": 0, "pair": 0}
    for fn in (fused._FusedRows, fused._FusedRowSums, fused._FusedSelf, fused._FusedMix, fused._FusedCost,
               fused._FusedSelfTwo, fused._FusedPair):
        def counted(*args, apply=fn.apply, sym=fn in (fused._FusedSelf, fused._FusedSelfTwo), mix=fn is fused._FusedMix,
                    cost=fn is fused._FusedCost, two=fn is fused._FusedSelfTwo, pair=fn is fused._FusedPair):
            n["fused"] += not mix
            n["symmetric"] += sym or (cost and args[-1])  # soft_cost's last argument: its symmetric pass
            n["mix"] += mix
            n["cost"] += cost
            n["two"] += two
            n["pair"] += pair
            return apply(*args)

        monkeypatch.setattr(fn, "apply", counted)
    return n


def test_every_loss_says_whether_it_takes_the_kernels():
    """Every loss of the core takes them (X-CLR in part: an (N, N) graph's target term keeps the PyTorch tiles); a
    user's loss says no unless it says otherwise."""
    core = [n for n in L.available() if n not in L.plugins()]
    assert {n: L.loss_class(n).fused_tiles for n in core if L.loss_class(n).fused_tiles != "yes"} == {"xclr": "part"}
    assert L.ContrastiveLoss.fused_tiles == "no"


def test_the_autotuner_chooses_per_size_class():
    """The tile config is chosen per size class (a choice made at 2N = 8,192 had been kept at 32,768, 1.6x slower
    there on an H200): 8,192 and 32,768 apart, every size from 32,768 up in one class (tuning at 2^20 would take
    minutes), the smallest sizes in one."""
    c = fused._size_class
    assert c(8192) < c(16384) < c(32768) == c(65536) == c(2**20)
    assert c(1) == c(1000) == c(1023) < c(1024)
    assert [c(n) for n in range(1, 70000, 997)] == sorted(c(n) for n in range(1, 70000, 997))


@pytest.mark.parametrize("case", FUSED_CASES, ids=[c[0] for c in FUSED_CASES])
def test_fused_loss_equals_float64_dense(case, calls):
    """float32 through the kernels against the float64 dense path (float32's for calls that draw their own extra
    inputs): the suite's float32 tolerances."""
    _, name, hp, kind = case
    x = _inputs(F64)
    # these calls draw extra inputs in the inputs' dtype: their reference is the float32 dense path on the same draws
    ref_x = _float32(x) if kind in ("graph_queue", "graph_emb") else x
    ref_v, ref_g = _value_and_grads(L.build(name, chunk_size=None, **hp), kind, ref_x)
    with fused.interpret():
        v, g = _value_and_grads(L.build(name, chunk_size=4, **hp), kind, _float32(x))
    assert calls["fused"] > 0
    assert torch.allclose(v.detach().double(), ref_v.double(), rtol=1e-5, atol=1e-6), (float(v), float(ref_v))
    # macl-noreweight's temperature reaches MACL's floor (1/tau ~ 1000), where the symmetric path's gradient is only
    # as close as c ulp allows (see test_symmetric_path_at_an_extreme_scale_stays_within_c_ulp)
    tol = EXTREME_SCALE_GRAD_TOL if case[0] == "macl-noreweight" else 1e-5
    for a, b in zip(g, ref_g):
        b = b.double()
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=tol * float(b.abs().max())), (a.double() - b).abs().max()


def _float32(x):
    return {k: (v.float() if v.is_floating_point() else v) for k, v in x.items()}


def _reference(a, x, q, excl, mode, c1, c2, qoff):
    cols = x if q is None else torch.cat([x, q])
    s = a @ cols.T
    if mode == "dot":
        logit = c1 * s  # c1: the similarities' scale (no scaled copy of the anchors)
    else:
        u = (a[:, None, :] - cols[None]).pow(2).sum(-1)  # from the difference: the float64 truth
        logit = {"negdist": lambda: -c1 * u.clamp_min(1e-24).sqrt(), "cauchy": lambda: -c1 * torch.log1p(u / c2),
                 "linear": lambda: -c1 * u}[mode]()
    if q is not None:
        logit = torch.cat([logit[:, : x.shape[0]], logit[:, x.shape[0]:] + qoff], 1)
    keep = torch.ones_like(logit, dtype=torch.bool)
    if excl is not None:
        for e in excl:
            keep[torch.arange(a.shape[0]), e] = False
    return torch.logsumexp(logit.masked_fill(~keep, float("-inf")), 1)


@pytest.mark.parametrize("mode", list(fused.MODES))
@pytest.mark.parametrize("with_queue", [False, True])
def test_kernel_modes_against_float64(mode, with_queue, calls):
    """Each mode: 35 rows x 41 columns (+ 9 queue columns), d = 20 (none a multiple of the 16-wide blocks), two
    excluded columns per row, the last row with every candidate left out and no queue (lse -inf, no gradient), any
    incoming gradient; the queue's gradient where it wants one."""
    g = torch.Generator().manual_seed(3)
    m, c, d = 35, 41, 20
    a, x = torch.randn(m, d, generator=g, dtype=F64), torch.randn(c, d, generator=g, dtype=F64)
    q = torch.randn(9, d, generator=g, dtype=F64) if with_queue else None
    excl = torch.stack([torch.arange(m), (torch.arange(m) + 7) % c])
    if c == 41 and not with_queue:
        c, x = 2, x[:2]  # every row's candidates are both excluded for row 0 and 1 below
        excl = torch.stack([torch.arange(m) % 2, (torch.arange(m) + 1) % 2])
    w = torch.randn(m, generator=g, dtype=F64)
    c1, c2 = (1.7, 0.6) if mode != "linear" else (0.3, 1.0)
    leaves64 = [t.clone().requires_grad_() for t in (a, x) + ((q,) if q is not None else ())]
    ref = _reference(*leaves64[:2], leaves64[2] if q is not None else None, excl, mode, c1, c2, 0.4)
    ref_g = torch.autograd.grad((ref.masked_fill(ref.isinf(), 0) * w).sum(), leaves64, allow_unused=True)
    leaves = [t.float().requires_grad_() for t in leaves64]
    with fused.interpret():
        out = fused.row_lse(leaves[0], leaves[1], leaves[2] if q is not None else None, excl, mode=mode, c1=c1,
                            c2=c2, qoff=0.4)
    got_g = torch.autograd.grad((out.masked_fill(out.isinf(), 0) * w.float()).sum(), leaves)
    assert calls["fused"] == 1
    assert torch.equal(out.isinf(), ref.isinf())
    fin = ~ref.isinf()
    assert torch.allclose(out[fin].double(), ref[fin], rtol=1e-5, atol=1e-5)
    for got, want in zip(got_g, ref_g):
        want = torch.zeros_like(got, dtype=F64) if want is None else want
        assert torch.isfinite(got).all()
        assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5 * float(want.abs().max()) + 1e-7)


# the cases whose rows are the SimCLR arrangement (one rank, symmetric, every candidate): the symmetric path
SYMMETRIC = {"infonce-all-sym", "dcl-all-sym", "macl-all-sym", "hard_negative-all-sym", "macl-noreweight",
             "hard_negative-debias", "supcon", "xclr", "xclr-embeddings", "tsimclr", "align_uniform",
             "simclr_l2-all-sym", "cacr", "cacr-detach", "uaur"}
# "cross" on both sides, one rank, no queue, and CMC without a queue: the pair path
PAIR = {"infonce-cross-sym", "dcl-cross-sym", "macl-cross-sym", "hard_negative-cross-sym", "cmc"}


def test_the_simclr_arrangement_takes_the_symmetric_path(calls):
    """Each loss case above whose anchors are [z_a; z_b] (times a scale) against themselves, with no queue, runs the
    symmetric path (three products per tile); "cross" on both sides without a queue, and CMC's view pairs, the pair
    path (six per pair of tiles); the others (one-sided, a queue) the general one."""
    took, mixed, two, pair = {}, set(), set(), set()
    for tag, name, hp, kind in FUSED_CASES:
        calls["symmetric"] = calls["mix"] = calls["two"] = calls["pair"] = 0
        with fused.interpret():
            _value_and_grads(L.build(name, chunk_size=4, **hp), kind, _float32(_inputs(F64)))
        took[tag] = calls["symmetric"] > 0
        if calls["mix"]:
            mixed.add(tag)
        if calls["two"]:  # hard negatives' two scales: one pair of kernels
            two.add(tag)
        if calls["pair"]:
            pair.add(tag)
    assert {t for t, sym in took.items() if sym} == SYMMETRIC, took
    assert pair == PAIR, pair
    assert {t for t, *_ in FUSED_CASES if t.startswith("hard_negative") and t in SYMMETRIC} == two, two
    # X-CLR's target term on the kernels: with its graph as embeddings (not an (N, N) graph, a queue with targets)
    assert mixed == {"xclr-embeddings"}, mixed


@pytest.mark.parametrize("mode,k", [(m, 1.0) for m in fused.MODES] + [("dot", 3.5), ("dot", "tensor")])
def test_symmetric_path_against_float64(mode, k, calls):
    """Anchors k z against z (k a float, or a tensor without gradient read on the device; the distance kernels only at
    k = 1): the rows' log-sum-exps and the whole gradient to z (the anchors' share through k z) against float64,
    with exclusions that are not symmetric (row i leaves out columns i and i + 5, so j = i + 5 keeps i), any incoming
    gradient, and sizes that fill no block."""
    g = torch.Generator().manual_seed(6)
    m, d = 37, 20
    z = torch.randn(m, d, generator=g, dtype=F64) * 0.4
    excl = torch.stack([torch.arange(m), (torch.arange(m) + 5) % m])
    w = torch.randn(m, generator=g, dtype=F64)
    c1, c2 = (1.7, 0.6) if mode != "linear" else (0.3, 1.0)
    kv = 3.5 if k == "tensor" else k
    z64 = z.clone().requires_grad_()
    ref = _reference(z64 * kv, z64, None, excl, mode, c1, c2, 0.0)
    (want,) = torch.autograd.grad((ref * w).sum(), z64)
    z32 = z.float().requires_grad_()
    scale = torch.tensor(3.5) if k == "tensor" else k
    with fused.interpret():
        out = fused.row_lse(z32 * scale, z32, None, excl, mode=mode, c1=c1, c2=c2, self_scale=scale)
    (got,) = torch.autograd.grad((out * w.float()).sum(), z32)
    assert calls["symmetric"] == 1
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5 * float(want.abs().max()))


@pytest.mark.parametrize("k", [1.0, 2.5, "tensor"])
def test_two_scales_share_the_symmetric_kernels(k, calls):
    """Hard negatives' two log-sum-exps (scales beta and 1 + beta of the same products, fused.row_lse_scales) on the
    symmetric path: one forward and one backward for both (the "two" kernels), against float64 with exclusions that
    are not symmetric, independent incoming gradients for the two outputs, a float or device-tensor scale k; three
    scales (or a queue) take one call per scale."""
    g = torch.Generator().manual_seed(13)
    m, d = 37, 20
    z = torch.nn.functional.normalize(torch.randn(m, d, generator=g, dtype=F64), dim=1)
    excl = torch.stack([torch.arange(m), (torch.arange(m) + 5) % m])
    w1, w2 = torch.randn(m, generator=g, dtype=F64), torch.randn(m, generator=g, dtype=F64)
    kv = 2.5 if k == "tensor" else k
    scales = (0.4 / 0.07, 1.4 / 0.07)  # hard negatives at beta = 0.4, tau = 0.07
    z64 = z.clone().requires_grad_()
    refs = [_reference(z64 * kv, z64, None, excl, "dot", c, 1.0, 0.0) for c in scales]
    (want,) = torch.autograd.grad((refs[0] * w1 + refs[1] * w2).sum(), z64)
    z32 = z.float().requires_grad_()
    scale = torch.tensor(2.5) if k == "tensor" else k
    with fused.interpret():
        outs = fused.row_lse_scales(z32 * scale, z32, None, excl, scales, self_scale=scale)
    (got,) = torch.autograd.grad((outs[0] * w1.float() + outs[1] * w2.float()).sum(), z32)
    assert calls["two"] == 1 and calls["fused"] == 1
    for out, ref in zip(outs, refs):
        assert torch.allclose(out.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    err = (got.double() - want).abs().max()
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5 * float(want.abs().max())), err
    with fused.interpret():
        fused.row_lse_scales(z32 * scale, z32, None, excl, (*scales, 3.0), self_scale=scale)
        fused.row_lse_scales(z32 * scale, z32, z32[:3].detach(), excl, scales, self_scale=scale)
    assert calls["two"] == 1 and calls["fused"] == 1 + 3 + 2


@pytest.mark.parametrize("k", [1.0, 2.5, "tensor"])
@pytest.mark.parametrize("n_excl", [0, 1, 2])
def test_pair_path_against_float64(k, n_excl, calls):
    """Two sets of rows against each other, both directions (fused.row_lse_pair): each side's log-sum-exps and both
    gradients against float64, with independent incoming gradients for the two sides, a float or device-tensor scale
    k, exclusions (the positive, and one more that is not the same for row i of either side's column i), sizes that
    fill no block; a side that wants no gradient gets none."""
    g = torch.Generator().manual_seed(21)
    n, d = 37, 20
    za, zb = (torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=F64), dim=1) for _ in range(2))
    excl = torch.stack([torch.arange(n), (torch.arange(n) + 5) % n])[:n_excl] if n_excl else None
    wa, wb = torch.randn(n, generator=g, dtype=F64), torch.randn(n, generator=g, dtype=F64)
    kv, c1 = (2.5 if k == "tensor" else k), 1 / 0.07
    a64, b64 = za.clone().requires_grad_(), zb.clone().requires_grad_()
    ref_a = _reference(a64 * kv, b64, None, excl, "dot", c1, 1.0, 0.0)
    ref_b = _reference(b64 * kv, a64, None, excl, "dot", c1, 1.0, 0.0)
    want = torch.autograd.grad((ref_a * wa).sum() + (ref_b * wb).sum(), [a64, b64])
    a32, b32 = za.float().requires_grad_(), zb.float().requires_grad_()
    scale = torch.tensor(2.5) if k == "tensor" else k
    with fused.interpret():
        out_a, out_b = fused.row_lse_pair(a32, b32, excl, c1=c1, scale=scale)
    got = torch.autograd.grad((out_a * wa.float()).sum() + (out_b * wb.float()).sum(), [a32, b32])
    assert calls["pair"] == 1 and calls["fused"] == 1
    for out, ref in ((out_a, ref_a), (out_b, ref_b)):
        assert torch.allclose(out.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    for x, y in zip(got, want):
        assert torch.allclose(x.double(), y, rtol=1e-4, atol=1e-5 * float(y.abs().max())), (x.double() - y).abs().max()
    with fused.interpret():  # z_b wants no gradient: z_a's alone, the same
        out_a, out_b = fused.row_lse_pair(a32, zb.float(), excl, c1=c1, scale=scale)
    (only,) = torch.autograd.grad((out_a * wa.float()).sum() + (out_b * wb.float()).sum(), [a32])
    assert torch.equal(only, got[0])


def test_pair_path_where_it_does_not_apply(calls):
    """A scale that wants a gradient, sets of rows of other sizes, ``use("general")``: two general calls with the same
    values; a queue or several ranks never reach it (InfoNCE "cross" with a queue: the general path)."""
    g = torch.Generator().manual_seed(2)
    za, zb = torch.randn(9, 4, generator=g), torch.randn(9, 4, generator=g)
    k = torch.tensor(2.0, requires_grad=True)
    with fused.interpret():
        ref = fused.row_lse_pair(za, zb, scale=2.0)
        assert calls["pair"] == 1
        for x, y in zip(fused.row_lse_pair(za, zb, scale=k), ref):
            assert torch.allclose(x, y, rtol=1e-6, atol=1e-6)
        assert [t.shape[0] for t in fused.row_lse_pair(za, zb[:7], scale=2.0)] == [9, 7]
        with fused.use("general"):
            fused.row_lse_pair(za, zb, scale=2.0)
        assert calls["pair"] == 1 and calls["fused"] == 1 + 2 + 2 + 2
        x = _float32(_inputs(F64))
        L.build("infonce", chunk_size=4, negatives="cross")(x["za"], x["zb"], queue=x["queue"])
    assert calls["pair"] == 1


def test_symmetric_path_where_it_does_not_apply(calls):
    """A queue, a scale that wants a gradient, a distance kernel at k != 1, anchors that want a gradient their
    candidates do not, ``use("general")``: the general path (the word ``self_scale`` alone proves nothing it cannot
    use); the same call outside that block: the symmetric one."""
    z = torch.randn(9, 4, requires_grad=True)
    q = torch.randn(3, 4)
    k = torch.tensor(2.0, requires_grad=True)
    with fused.interpret():
        fused.row_lse(z, z, q, self_scale=1.0)
        fused.row_lse(z * k, z, self_scale=k)
        fused.row_lse(z * 2.0, z, mode="cauchy", self_scale=2.0)
        fused.row_lse(z * 2.0, z.detach(), self_scale=2.0)
        with fused.use("general"):  # the benchmarks' comparison
            fused.row_lse(z * 2.0, z, self_scale=2.0)
        fused.row_lse(z * 2.0, z, self_scale=2.0)
        fused.row_lse(z, z, mode="linear", self_scale=1)  # an int scale: taken as the number it is
    assert calls["fused"] == 7 and calls["symmetric"] == 2


# The symmetric path's gradient at a scale c = 1/tau: it takes p_ji from the (i, j) product of its tile, while the
# forward's log-sum-exp of row j summed the (j, i) product; where the two round differently in their last bit (the
# order in which the BLAS, or a GPU's MMA, accumulates over d), p_ji is off by c ulp. At c = 1000 that is up to
# 1000 x 2^-23 = 1.2e-4 per term; measured: 1.7e-5 relative in the gradient (AMD EPYC Zen 3, OpenBLAS's Haswell
# kernels; 0 where the machine rounds both the same), where the dense float32 path and the general path keep 1.3e-7.
EXTREME_SCALE_GRAD_TOL = 1e-4


def test_symmetric_path_at_an_extreme_scale_stays_within_c_ulp(calls):
    """At 1 / tau = 1000 (MACL's temperature floor) both paths' gradients are within c ulp of float64
    (:data:`EXTREME_SCALE_GRAD_TOL`). Which of the two is the closer depends on the machine: where (i, j) and (j, i)
    round the same, the symmetric one (a rounded copy k z of the anchors put k eps = 1e-4 between the general path's
    l_ij and l_ji); where they do not, the general one (here 1.7e-5 symmetric, 4.5e-8 general)."""
    g = torch.Generator().manual_seed(8)
    z = torch.nn.functional.normalize(torch.randn(24, 5, generator=g, dtype=F64), dim=1)
    excl = torch.stack([torch.arange(24), (torch.arange(24) + 12) % 24])
    z64 = z.clone().requires_grad_()
    (want,) = torch.autograd.grad(_reference(z64 * 1000.0, z64, None, excl, "dot", 1.0, 1.0, 0.0).sum(), z64)
    errs = []
    for sym in (1000.0, None):
        z32 = z.float().requires_grad_()
        with fused.interpret():
            out = fused.row_lse(z32 * 1000.0, z32, None, excl, self_scale=sym)
        (got,) = torch.autograd.grad(out.sum(), z32)
        errs.append(float((got.double() - want).abs().max() / want.abs().max()))
    assert calls["symmetric"] == 1
    assert max(errs) < EXTREME_SCALE_GRAD_TOL, errs


@pytest.mark.parametrize("n_excl", [0, 1, 2])
def test_soft_mix_against_float64(n_excl, calls):
    """Attention of 35 anchors (width 20) on 41 candidates' values (width 27: not the anchors' width, no block's
    multiple), up to two excluded columns per row, scale 4: the row log-sum-exps and O = softmax @ V against float64,
    and the values' gradient for any incoming dO; the anchors and candidates get none."""
    g = torch.Generator().manual_seed(9)
    a, x = torch.randn(35, 20, generator=g, dtype=F64), torch.randn(41, 20, generator=g, dtype=F64)
    v = torch.randn(41, 27, generator=g, dtype=F64)
    excl = torch.stack([torch.arange(35), (torch.arange(35) + 3) % 41])[:n_excl] if n_excl else None
    d_o = torch.randn(35, 27, generator=g, dtype=F64)
    logit = 4.0 * a @ x.T
    if excl is not None:
        for e in excl:
            logit[torch.arange(35), e] = float("-inf")
    v64 = v.clone().requires_grad_()
    ref_o = torch.softmax(logit, 1) @ v64
    (want,) = torch.autograd.grad((ref_o * d_o).sum(), v64)
    a32, x32 = a.float().requires_grad_(), x.float().requires_grad_()
    v32 = v.float().requires_grad_()
    with fused.interpret():
        lse, o = fused.soft_mix(a32, x32, v32, excl, c1=4.0)
    assert not lse.requires_grad and calls["mix"] == 1
    assert torch.allclose(lse.double(), torch.logsumexp(logit, 1), rtol=1e-5, atol=1e-5)
    assert torch.allclose(o.double(), ref_o.detach(), rtol=1e-4, atol=1e-5)
    (got,) = torch.autograd.grad((o * d_o.float()).sum(), v32)
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5 * float(want.abs().max()))
    assert a32.grad is None and x32.grad is None


def _cost_reference(a, x, q, excl, t, detach):
    """CACR's repulsion rows from their definition (float64): -sum_j w_ij d_ij and -sum_j w_ij log w_ij, d_ij =
    ||a_i - x_j||^2 of unit vectors, w_i = softmax_j(-t d_ij) over [x; q] without row i's excluded columns."""
    cols = x if q is None else torch.cat([x, q])
    d = ((a[:, None, :] - cols[None, :, :]) ** 2).sum(-1)
    logit = -t * d
    for e in excl:
        logit = logit.index_put((torch.arange(a.shape[0]), e), torch.tensor(float("-inf"), dtype=F64))
    log_w = torch.log_softmax(logit, 1)
    w = log_w.exp()
    ent = -(w * log_w.masked_fill(torch.isinf(log_w), 0.0)).sum(1)
    return -((w.detach() if detach else w) * d.masked_fill(torch.isinf(logit), 0.0)).sum(1), ent.detach()


@pytest.mark.parametrize("t", [0.0, 2.0, 50.0])
@pytest.mark.parametrize("arrangement", ["self", "other", "queue", "self-two-excluded"])
@pytest.mark.parametrize("detach", [False, True])
def test_soft_cost_against_float64(t, arrangement, detach, calls):
    """CACR's repulsion rows on the kernels (fused.soft_cost) against their definition in float64: values, the weights'
    entropy, and the gradients to the anchors and the candidates for any incoming gradient, the weights keeping
    theirs or not, at t = 0 (UAUR's uniform weights), CACR's 2 and 50 (weights on a few columns); 37 rows (no
    block's multiple). ``self``: the anchors are the candidates, own column left out (CACR on one rank: the symmetric
    pass); with two columns left out, not symmetric ones; ``other``: 37 anchors against 41 candidates (CACR's
    cross_view, or another rank's); ``queue``: the same and 6 queue columns, which get no gradient. The costs are
    those of unit vectors (2 - 2 s): the gradients are compared through the normalisation, as CACR takes them."""
    g = torch.Generator().manual_seed(12)
    m, c, d = 37, 41, 20
    z, x = torch.randn(m, d, generator=g, dtype=F64), torch.randn(c, d, generator=g, dtype=F64)
    q = torch.nn.functional.normalize(torch.randn(6, d, generator=g, dtype=F64), dim=1)
    same = arrangement.startswith("self")
    excl = torch.arange(m)[None]
    if arrangement == "self-two-excluded":
        excl = torch.stack([torch.arange(m), (torch.arange(m) + 5) % m])
    queue = q if arrangement == "queue" else None
    w = torch.randn(m, generator=g, dtype=F64)
    unit = torch.nn.functional.normalize
    z64, x64 = z.clone().requires_grad_(), x.clone().requires_grad_()
    ref, ref_ent = _cost_reference(unit(z64, dim=1), unit(z64 if same else x64, dim=1), queue, excl, t, detach)
    want = torch.autograd.grad((ref * w).sum(), [z64] if same else [z64, x64])
    z32, x32 = z.float().requires_grad_(), x.float().requires_grad_()
    zu = unit(z32, dim=1)
    with fused.interpret():
        out, ent = fused.soft_cost(zu, zu if same else unit(x32, dim=1), None if queue is None else queue.float(), excl,
                                   t, detach, self_scale=1.0 if same else None)
    got = torch.autograd.grad((out * w.float()).sum(), [z32] if same else [z32, x32])
    assert calls["cost"] == 1 and calls["symmetric"] == int(same) and not ent.requires_grad
    assert torch.allclose(out.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    # the entropy lse_i - 2 t sbar_i (as the PyTorch tiles form it): two terms of about 2 t, each rounded to float32
    err = (ent.double() - ref_ent).abs().max()
    assert torch.allclose(ent.double(), ref_ent, rtol=1e-5, atol=max(1e-5, 4e-7 * t)), err
    for a, b in zip(got, want):
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-5 * float(b.abs().max())), (a.double() - b).abs().max()


@pytest.mark.parametrize("tau_s", [0.002, 0.5, 20.0])
@pytest.mark.parametrize("with_queue", [False, True])
def test_xclr_target_term_on_the_kernels_against_float64(tau_s, with_queue, calls):
    """X-CLR with its graph as embeddings on the kernels (the log-sum-exps and the target term) against float64 dense
    on the graph E E^T: target temperatures where the own entry takes nearly all the target mass (0.002: e^delta
    overflows float32 unless taken as a log-add-exp) and where the targets are nearly uniform (20), with a queue of
    pure negatives (no queue_similarity: no target mass, still on the kernels); distinct samples of one class too."""
    g = torch.Generator().manual_seed(10)
    n, d = 13, 12
    za, zb = torch.randn(n, d, generator=g, dtype=F64), torch.randn(n, d, generator=g, dtype=F64)
    emb = torch.randn(n, 5, generator=g, dtype=F64)
    emb[3] = emb[7]  # two samples with the same graph row
    queue = torch.randn(6, d, generator=g, dtype=F64) if with_queue else None
    en = torch.nn.functional.normalize(emb, dim=1)
    kw = {} if queue is None else {"queue": queue}
    leaves64 = [za.clone().requires_grad_(), zb.clone().requires_grad_()]
    ref = L.build("xclr", chunk_size=None, target_temperature=tau_s)(*leaves64, en @ en.T, **kw)
    want = torch.autograd.grad(ref, leaves64)
    leaves = [za.float().requires_grad_(), zb.float().requires_grad_()]
    kw32 = {k: v.float() for k, v in kw.items()}
    with fused.interpret():
        got = L.build("xclr", chunk_size=4, target_temperature=tau_s)(*leaves, similarity_embeddings=emb.float(),
                                                                       **kw32)
    assert calls["mix"] == 1
    assert float(got) == pytest.approx(float(ref), rel=1e-5, abs=1e-5)
    for a, b in zip(torch.autograd.grad(got, leaves), want):
        assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))


@pytest.mark.parametrize("mode", list(fused.MODES))
@pytest.mark.parametrize("with_queue", [False, True])
def test_row_lse_sum_against_float64(mode, with_queue, calls):
    """The sum over several candidate sets (CMC's pairs of one anchor view) with one anchors' accumulator: the sum of
    the float64 references' rows, and its gradients to the anchors, each candidate set and the queue; a candidate set
    that wants no gradient gets none."""
    g = torch.Generator().manual_seed(4)
    m, d = 29, 20
    a = torch.randn(m, d, generator=g, dtype=F64)
    cs = [torch.randn(c, d, generator=g, dtype=F64) for c in (29, 37, 11)]
    q = torch.randn(9, d, generator=g, dtype=F64) if with_queue else None
    c1, c2 = (1.7, 0.6) if mode != "linear" else (0.3, 1.0)
    leaves64 = [t.clone().requires_grad_() for t in [a, *cs] + ([q] if q is not None else [])]
    qq = leaves64[4] if q is not None else None
    ref = sum(_reference(leaves64[0], c, qq, None, mode, c1, c2, 0.0).sum() for c in leaves64[1:4])
    ref_g = torch.autograd.grad(ref * 0.7, leaves64)
    leaves = [t.float().requires_grad_() for t in leaves64]
    frozen = leaves[2].detach()  # the second candidate set: no gradient wanted
    with fused.interpret():
        out = fused.row_lse_sum(leaves[0], [leaves[1], frozen, leaves[3]], leaves[4] if q is not None else None,
                                mode=mode, c1=c1, c2=c2)
    assert out.dim() == 0 and calls["fused"] == 1
    assert float(out.detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
    want = [w for i, w in enumerate(ref_g) if i != 2]
    got = torch.autograd.grad(out * 0.7, [t for i, t in enumerate(leaves) if i != 2])
    for x, y in zip(got, want):
        assert torch.allclose(x.double(), y, rtol=1e-4, atol=1e-5 * float(y.abs().max()) + 1e-7)


@pytest.mark.parametrize("with_queue", [False, True])
def test_cmc_keeps_at_most_one_gradient_accumulator_per_view(with_queue, calls):
    """CMC's fused path with V = 3 views: with a queue it keeps V (N, d) accumulators of the anchors' gradient for the
    backward, one per anchor view, not one per ordered pair (V (V - 1) = 6); without, each view pair's pair path keeps
    none. The memory that decides whether 2N = 1M fits."""
    v, n, d = 3, 40, 16
    views = torch.randn(v, n, d, generator=torch.Generator().manual_seed(0), requires_grad=True)
    queue = torch.randn(5, d, generator=torch.Generator().manual_seed(1)) if with_queue else None
    kept: dict[int, tuple[int, ...]] = {}

    def pack(t):
        kept[t.untyped_storage().data_ptr()] = (*t.shape, t.untyped_storage().nbytes())
        return t

    with fused.interpret(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = L.build("cmc", chunk_size=8)(views, queue=queue)
    out.backward()
    assert (calls["fused"], calls["pair"]) == ((v, 0) if with_queue else (v * (v - 1) // 2,) * 2)
    accumulators = [k for k in kept.values() if k == (n, d, n * d * 4)]  # their own (N, d) storage: not a view's
    assert len(accumulators) == (v if with_queue else 0), kept


@pytest.mark.parametrize("temperature", [0.005, 100.0])
def test_extreme_temperatures_match_float64(temperature, calls):
    """InfoNCE and DCL at temperatures whose logits reach 200 (exp overflows float32 without the running maximum)
    and whose logits are all near 0: float32 kernels against float64 dense, on the symmetric path ("all") and the
    pair path ("cross" on both sides)."""
    x = _inputs(F64, seed=5)
    for name in ("infonce", "dcl"):
        for neg in ("all", "cross"):
            hp = dict(temperature=temperature, negatives=neg)
            ref_v, ref_g = _value_and_grads(L.build(name, chunk_size=None, **hp), "pair", x)
            with fused.interpret():
                v, g = _value_and_grads(L.build(name, chunk_size=3, **hp), "pair", _float32(x))
            assert float(v.detach()) == pytest.approx(float(ref_v), rel=1e-5, abs=1e-6)
            for a, b in zip(g, ref_g):
                assert torch.allclose(a.double(), b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))
    assert calls["fused"] >= 4 and calls["pair"] == 2 and calls["symmetric"] == 2


@pytest.mark.parametrize("prec,bound", [("tf32", 2e-3), ("bf16", 2e-2)])
def test_opt_in_precision_error_is_bounded(prec, bound, calls):
    """The opt-in precisions round the products' inputs (bf16: 8 bits of mantissa): the loss stays within ``bound``
    (relative) of float64; fp32 stays within 1e-5. Under the interpreter TF32 products are computed in float32."""
    g = torch.Generator().manual_seed(2)
    za, zb = torch.randn(40, 32, generator=g, dtype=F64), torch.randn(40, 32, generator=g, dtype=F64)
    ref = float(L.build("infonce", chunk_size=None)(za, zb))
    errs = {}
    for p in ("fp32", prec):
        with fused.interpret():
            errs[p] = abs(float(L.build("infonce", chunk_size=16, precision=p)(za.float(), zb.float())) - ref) / ref
    assert errs["fp32"] < 1e-5
    assert errs[prec] < bound
    if prec == "bf16":
        assert errs["bf16"] > errs["fp32"]  # the rounding is real: the setting reached the kernels
    assert calls["fused"] == 2


def test_precision_is_a_checked_setting():
    loss = L.build("infonce", precision="bf16")
    assert loss.precision == "bf16"
    with pytest.raises(ValueError, match="precision must be one of fp32, tf32, bf16, got 'fp16'"):
        L.build("infonce", precision="fp16")
    with pytest.raises(ValueError, match="precision must be one of"):
        loss.precision = "half"
    assert loss.precision == "bf16"


def test_where_the_kernels_do_not_apply(calls):
    """The CPU without the interpreter, float64, embeddings wider than MAX_DIM, SUITE_FUSED=off: today's tiles."""
    x32 = torch.randn(6, 8)
    assert not fused.applies(x32)  # the CPU: the PyTorch tiles
    with fused.interpret():
        assert fused.applies(x32)
        assert not fused.applies(x32.double())
        assert not fused.applies(torch.randn(6, fused.MAX_DIM + 1))
        with fused.use("off"):
            assert not fused.applies(x32)
        L.build("infonce", chunk_size=2)(x32.double(), torch.randn(6, 8, dtype=F64))
    assert calls["fused"] == 0
    with pytest.raises(ValueError, match="fused mode must be"):
        with fused.use("on"):
            pass


def test_more_than_two_exclusions_are_refused():
    with pytest.raises(ValueError, match="at most 2 excluded columns per row, got 3"):
        fused.row_lse(torch.randn(4, 3), torch.randn(4, 3), None, torch.zeros(3, 4, dtype=torch.long))


def test_kernels_that_cannot_be_built_fall_back_with_one_warning(monkeypatch, calls):
    """Triton failing to build the kernels (an older GPU, a mismatched driver: an error from Triton's modules) -> one
    warning naming it, the PyTorch tiles for the rest of the process (the same value); other errors pass through."""
    CompilationError = type("CompilationError", (Exception,), {"__module__": "triton.compiler.errors"})

    def broken(interpreted):
        raise CompilationError("at 12:4: input_precision tf32x3 is not supported on sm_70\nmore")

    monkeypatch.setattr(fused, "_kernels", broken)
    monkeypatch.setattr(fused, "_broken", [])
    x = _float32(_inputs(F64))
    want = L.build("infonce", chunk_size=4)(x["za"], x["zb"])
    with fused.interpret():
        with pytest.warns(RuntimeWarning, match="fused loss kernels failed on this device .CompilationError: at 12:4: "
                                                "input_precision tf32x3 is not supported on sm_70.; the PyTorch tiles"):
            got = L.build("infonce", chunk_size=4)(x["za"], x["zb"])
        assert not fused.applies(x["za"])  # no second try, no second warning
        again = L.build("dcl", chunk_size=4)(x["za"], x["zb"])
    assert torch.equal(got, want) and torch.isfinite(again)
    assert calls["fused"] == 1  # the one attempt

    monkeypatch.setattr(fused, "_broken", [])
    monkeypatch.setattr(fused, "_kernels", lambda interpreted: (_ for _ in ()).throw(ValueError("ours")))
    with fused.interpret(), pytest.raises(ValueError, match="ours"):
        L.build("infonce", chunk_size=4)(x["za"], x["zb"])
