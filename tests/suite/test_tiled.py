"""The tiled (memory-bounded) path of every loss against its dense path: values and gradients in
float64 (1e-10 relative) and float32 (1e-5), every option, tile sizes 1, prime, not dividing N and
larger than N; the auto rule; memory in a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import suite.losses as L
from suite.losses import tiling

F64 = torch.float64
N, D, V, Q = 7, 5, 3, 4


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    za, zb = torch.randn(N, D, generator=g, dtype=dtype), torch.randn(N, D, generator=g, dtype=dtype)
    views = torch.randn(V, N, D, generator=g, dtype=dtype)
    queue = torch.randn(Q, D, generator=g, dtype=dtype)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 2])
    graph = torch.rand(N, N, generator=g, dtype=dtype)
    graph = (graph + graph.T) / 2
    graph.fill_diagonal_(1.0)
    weights = torch.rand(N, generator=g, dtype=dtype) + 0.1
    keys = views + 0.1 * torch.randn(V, N, D, generator=g, dtype=dtype)
    return dict(za=za, zb=zb, views=views, queue=queue, labels=labels, graph=graph, weights=weights, keys=keys)


FAMILY_OPTS = [dict(negatives="all", symmetric=True), dict(negatives="all", symmetric=False),
               dict(negatives="cross", symmetric=True), dict(negatives="cross", symmetric=False)]

# (case id, loss name, hparams, call: inputs -> (leaf names, fn(loss, *leaves)))
CASES = []
for name in ("infonce", "dcl", "macl", "hard_negative"):
    for opt in FAMILY_OPTS:
        tag = f"{name}-{opt['negatives']}-{'sym' if opt['symmetric'] else 'one'}"
        CASES.append((tag, name, opt, "pair"))
        CASES.append((tag + "-queue-weights", name, opt, "pair_queue_weights"))
    CASES.append((f"{name}-none-queue", name, dict(negatives="none", symmetric=False), "pair_queue"))
CASES += [
    ("macl-noreweight", "macl", dict(reweight=False, tau0=0.05, alpha=2.0, a0=0.8), "pair"),
    ("hard_negative-debias", "hard_negative", dict(tau_plus=0.1), "pair"),
    ("supcon", "supcon", {}, "labels"),
    ("supcon-queue", "supcon", {}, "labels_queue"),
    ("xclr", "xclr", {}, "graph"),
    ("xclr-queue", "xclr", {}, "graph_queue"),
    ("xclr-embeddings", "xclr", dict(target_temperature=0.5), "graph_emb"),
    ("tsimclr", "tsimclr", {}, "pair"),
    ("tsimclr-queue-weights", "tsimclr", dict(temperature=1.0, t_df=2.0), "pair_queue_weights"),
    ("align_uniform", "align_uniform", {}, "pair"),
    ("align_uniform-queue", "align_uniform", {}, "pair_queue"),
    ("cmc", "cmc", {}, "views"),
    ("cmc-queue", "cmc", {}, "views_queue"),
    ("cacr", "cacr", {}, "views"),
    ("cacr-queue", "cacr", {}, "views_queue"),
    ("cacr-cross_view-queue", "cacr", dict(negatives="cross_view"), "views_queue"),
    ("cacr-keys", "cacr", dict(t_pos=0.5), "views_keys"),
    ("cacr-detach", "cacr", dict(detach_weights=True), "views"),
    ("uaur", "uaur", {}, "views"),
]


def _call(kind, x):
    if kind == "pair":
        return ["za", "zb"], lambda f, a, b: f(a, b)
    if kind == "pair_queue":
        return ["za", "zb"], lambda f, a, b: f(a, b, queue=x["queue"])
    if kind == "pair_queue_weights":
        return ["za", "zb"], lambda f, a, b: f(a, b, queue=x["queue"], weights=x["weights"])
    if kind == "labels":
        return ["za", "zb"], lambda f, a, b: f(a, b, labels=x["labels"])
    if kind == "labels_queue":
        return ["za", "zb"], lambda f, a, b: f(a, b, labels=x["labels"], queue=x["queue"],
                                               queue_labels=torch.tensor([0, 2, 3, 1]))
    if kind == "graph":
        return ["za", "zb"], lambda f, a, b: f(a, b, x["graph"])
    if kind == "graph_queue":
        qs = torch.rand(N, Q, dtype=x["za"].dtype, generator=torch.Generator().manual_seed(9))
        qs[:, 0] = float("-inf")
        return ["za", "zb"], lambda f, a, b: f(a, b, x["graph"], queue=x["queue"], queue_similarity=qs)
    if kind == "graph_emb":
        emb = torch.randn(N, 3, dtype=x["za"].dtype, generator=torch.Generator().manual_seed(10))
        return ["za", "zb"], lambda f, a, b: f(a, b, similarity_embeddings=emb)
    if kind == "views":
        return ["views"], lambda f, v: f(v)
    if kind == "views_queue":
        return ["views"], lambda f, v: f(v, queue=x["queue"])
    if kind == "views_keys":
        return ["views"], lambda f, v: f(v, queue=x["queue"], keys=x["keys"])
    raise AssertionError(kind)


def _value_and_grads(loss, kind, x):
    names, fn = _call(kind, x)
    leaves = [x[k].clone().requires_grad_() for k in names]
    val = fn(loss, *leaves)
    return val, torch.autograd.grad(val, leaves)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype,rtol", [(F64, 1e-10), (torch.float32, 1e-5)])
def test_tiled_equals_dense(case, dtype, rtol):
    _, name, hp, kind = case
    x = _inputs(dtype)
    dense_v, dense_g = _value_and_grads(L.build(name, **hp), kind, x)
    for chunk in (1, 3, 4, 100, "auto"):  # 1, prime, not dividing 2N = 14, larger than N, auto (dense here)
        v, g = _value_and_grads(L.build(name, chunk_size=chunk, **hp), kind, x)
        assert torch.allclose(v, dense_v, rtol=rtol, atol=rtol * 1e-2), (chunk, float(v), float(dense_v))
        for a, b in zip(g, dense_g):
            assert torch.allclose(a, b, rtol=rtol * 10, atol=rtol * float(b.abs().max())), (chunk, (a - b).abs().max())


def test_xclr_embeddings_are_the_graph_e_et():
    """similarity_embeddings E gives the loss of the dense graph G = E E^T (unit rows), so an (N, N) graph
    is never needed."""
    x = _inputs(F64)
    emb = torch.randn(N, 3, dtype=F64, generator=torch.Generator().manual_seed(11))
    en = torch.nn.functional.normalize(emb, dim=1)
    loss = L.build("xclr", target_temperature=0.5)
    assert float(loss(x["za"], x["zb"], similarity_embeddings=emb)) == pytest.approx(float(loss(x["za"], x["zb"], en @ en.T)), rel=1e-12)
    with pytest.raises(ValueError, match="exactly one"):
        loss(x["za"], x["zb"])


def test_auto_rule():
    assert tiling.resolve("auto", 4096, 4096) is None  # dense where it is cheap
    assert tiling.resolve("auto", 65536, 65536) == tiling.AUTO_TILE_ELEMENTS // 65536
    assert tiling.resolve(None, 10**6, 10**6) is None
    assert tiling.resolve(64, 10, 10) is None and tiling.resolve(3, 10, 10) == 3
    assert tiling.resolve("auto", 8192, 8192) == tiling.AUTO_TILE_ELEMENTS // 8192  # the CPU: tiles at 2N = 8,192
    with tiling.on_cuda(True):  # a CUDA device: dense there, tiles above
        assert tiling.resolve("auto", 8192, 8192) is None
        assert tiling.resolve("auto", 16384, 16384) == tiling.AUTO_TILE_ELEMENTS // 16384
        assert tiling.resolve(None, 10**6, 10**6) is None and tiling.resolve(3, 10, 10) == 3
    assert tiling.resolve("auto", 8192, 8192) == tiling.AUTO_TILE_ELEMENTS // 8192


_MEM_SCRIPT = r"""
import json, resource, sys, torch
import suite.losses as L
torch.set_num_threads(1)
name, n, d, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
chunk = None if chunk == "none" else (chunk if chunk == "auto" else int(chunk))
g = torch.Generator().manual_seed(0)
za = torch.randn(n, d, generator=g).requires_grad_()
zb = torch.randn(n, d, generator=g).requires_grad_()
from suite.memory import peak_rss, reset_peak_rss
before = reset_peak_rss()
loss = L.build(name, chunk_size=chunk)(za, zb)
loss.backward()
print(json.dumps({"growth_mb": peak_rss() - before, "loss": float(loss)}))
"""


def _peak_growth(name, n, chunk):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _MEM_SCRIPT, name, str(n), "128", str(chunk)], capture_output=True,
                         text=True, env=env, check=True, timeout=240)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_memory_bounded_at_2n_16384():
    """2N = 16,384, d = 128: the tiled infonce's peak RSS growth stays under 256 MB (dense: ~2 GB)."""
    r = _peak_growth("infonce", 8192, 256)
    assert r["growth_mb"] < 256, r


def test_memory_bounded_at_2n_8192():
    """2N = 8,192, d = 128: the tiled infonce's peak RSS growth stays under 128 MB (dense: about 800 MB)."""
    r = _peak_growth("infonce", 4096, 256)
    assert r["growth_mb"] < 128, r


@pytest.fixture
def tile_calls(monkeypatch):
    """One entry per row tile of similarities the PyTorch tiles build (``tiling._tile_logits``), forward or backward."""
    calls = []
    real = tiling._tile_logits
    monkeypatch.setattr(tiling, "_tile_logits", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.parametrize("with_queue,with_excl", [(False, False), (True, True)])
def test_row_lse_gradient_formed_in_the_forward_is_exact_for_any_incoming_gradient(with_queue, with_excl, tile_calls):
    """row_lse(uniform=True) forms the whole gradient in the forward (for callers that average rows uniformly): a
    uniform incoming gradient uses it scaled (no tile is recomputed), a non-uniform one recomputes the candidate
    columns; without the hint only the anchors' part is formed in the forward; all equal the dense float64
    gradient, and the value is the dense logsumexp"""
    g = torch.Generator().manual_seed(3)
    a, c = torch.randn(11, 4, dtype=F64, generator=g), torch.randn(9, 4, dtype=F64, generator=g)
    q = torch.randn(5, 4, dtype=F64, generator=g) if with_queue else None
    excl = torch.stack([torch.arange(11) % 9]) if with_excl else None

    def dense(a_, c_, q_):
        sim = a_ @ c_.T
        if excl is not None:
            sim = sim.index_put((torch.arange(11), excl[0]), torch.tensor(float("-inf"), dtype=F64))
        return torch.logsumexp(sim if q_ is None else torch.cat([sim, a_ @ q_.T], 1), 1)

    calls = tile_calls
    for hint, w in [(h, w) for h in (True, False)
                    for w in (torch.full((11,), 0.25, dtype=F64), torch.rand(11, dtype=F64, generator=g))]:
        leaves = [t.clone().requires_grad_() for t in (a, c) + ((q,) if q is not None else ())]
        ref = torch.autograd.grad((dense(*leaves, *([None] if q is None else [])) * w).sum(), leaves)
        leaves2 = [t.clone().requires_grad_() for t in leaves]
        calls.clear()
        val = tiling.row_lse(leaves2[0], leaves2[1], leaves2[2] if q is not None else None, excl, chunk=4, uniform=hint)
        n_forward = len(calls)
        got = torch.autograd.grad((val * w).sum(), leaves2)
        assert torch.allclose(val, dense(a, c, q), rtol=1e-12)
        for x, y in zip(got, ref):
            assert torch.allclose(x, y, rtol=1e-10, atol=1e-12), (x - y).abs().max()
        uniform = bool((w == w[0]).all())
        assert (len(calls) == n_forward) == (hint and uniform)  # tiles recomputed unless the hint held


@pytest.mark.parametrize("name,hp,recomputes", [
    ("infonce", {}, False), ("dcl", {}, False), ("supcon", {}, False),
    ("macl", {}, False),  # reweighted: d/dx_i of sg(V_i) softplus(x_i) is 1, every anchor alike
    ("macl", dict(reweight=False), False),  # softplus alone: sigmoid(x_i), row-wise, evaluated tile by tile
    ("hard_negative", {}, False)])  # a row-wise function of its rows' statistics, evaluated tile by tile
def test_tiled_backward_recomputes_no_tile_where_every_row_weighs_the_same(name, hp, recomputes, tile_calls):
    """The losses whose rows' log-sum-exps all get the same gradient form the candidates' gradient in the forward
    (3 products per tile, as dense): their backward recomputes no tile; so do hard negatives and MACL without its
    reweighting, whose rows' gradients differ but are a row-wise function of the rows' statistics, known within each
    tile. Counted by the tiles built;
    the gradients equal the dense path's either way (the cases above)."""
    x = _inputs(torch.float32)
    names, fn = _call("labels" if name == "supcon" else "pair", x)
    calls = tile_calls
    leaves = [x[k].clone().requires_grad_() for k in names]
    out = fn(L.build(name, chunk_size=3, **hp), *leaves)
    n_forward = len(calls)
    torch.autograd.grad(out, leaves)
    assert n_forward > 0 and (len(calls) > n_forward) == recomputes, (n_forward, len(calls))


@pytest.mark.parametrize("hp,scales", [({}, 2), (dict(beta=0.0), 1)])
def test_hard_negatives_take_both_scales_from_one_pass_of_tiles(hp, scales, tile_calls):
    """Hard negatives' two log-sum-exps (of beta s / t and (1 + beta) s / t) come from the same tiles: each row tile
    is built once, in the forward, for both scales, which evaluates the rows' loss there and forms the gradient (3
    products per tile; 8 with a pass per scale and a recomputing backward, 4 with one pass and the backward); with
    beta = 0 there is one scale. With pair weights the rows' gradients are not the forward's, and the backward
    builds each tile once more. The values and gradients equal the dense path's (the cases above)."""
    x = _inputs(torch.float32)
    calls = tile_calls
    spans = -(-2 * N // 3)  # 2N anchors in tiles of 3 rows
    for weights, built in ((None, spans), (x["weights"], 2 * spans)):
        calls.clear()
        leaves = [x[k].clone().requires_grad_() for k in ("za", "zb")]
        out = L.build("hard_negative", chunk_size=3, **hp)(*leaves, weights=weights)
        assert len(calls) == spans
        torch.autograd.grad(out, leaves)
        assert len(calls) == built


@pytest.mark.parametrize("name,hp", [("infonce", dict(temperature=0.001)), ("dcl", dict(temperature=0.002)),
                                     ("hard_negative", dict(temperature=0.005)),
                                     ("macl", dict(reweight=False, tau0=0.05, alpha=2.0, a0=0.8))])
def test_tiles_exp_no_argument_below_the_floor_at_extreme_temperatures(name, hp, monkeypatch):
    """At tau = 0.001 (MACL's text setting clamps there) a row's logits span 2000: the tiles clamp their exp passes'
    arguments at tiling.EXP_FLOOR (-60; the CPU's exp is 30x slower below about -87, -inf included), with values and
    gradients as dense's to float64 precision; at tau = 0.1 (a span of 20) there is nothing to clamp."""
    seen: list[float] = []

    def exp_(t, floor, real=tiling._exp_):
        out = real(t, floor)
        seen.append(float(out.min().log()) if out.numel() else 0.0)
        return out

    monkeypatch.setattr(tiling, "_exp_", exp_)
    x = _inputs(F64)
    x["za"], x["zb"] = x["za"] * 3.0, x["zb"] + 0.1  # inputs far from unit length: the losses normalise them
    dense_v, dense_g = _value_and_grads(L.build(name, **hp), "pair", x)
    v, g = _value_and_grads(L.build(name, chunk_size=3, **hp), "pair", x)
    assert seen and min(seen) >= tiling.EXP_FLOOR - 1e-9, min(seen)
    assert min(seen) < -50.0  # the floor was reached: the logits did span past it
    assert torch.allclose(v, dense_v, rtol=1e-10), (float(v), float(dense_v))
    for a, b in zip(g, dense_g):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12 * float(b.abs().max()))
    z = torch.nn.functional.normalize(x["za"], dim=1)
    assert tiling._exp_floor(z / 0.1, z) is None and tiling._exp_floor(z / 0.001, z) == tiling.EXP_FLOOR


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tiled_without_gradients(case):
    """Every loss, tiled, under torch.no_grad and torch.inference_mode (an evaluation's loss): the value it has with
    gradients (the tiles that form the gradient in the forward, or evaluate a loss's rows there by autograd, form
    none when none is wanted)."""
    _, name, hp, kind = case
    x = _inputs(F64)
    loss = L.build(name, chunk_size=3, **hp)
    want, _ = _value_and_grads(loss, kind, x)
    names, fn = _call(kind, x)
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            got = fn(loss, *[x[k] for k in names])
        assert torch.allclose(got, want.detach(), rtol=1e-12), (mode.__name__, float(got), float(want))


@pytest.mark.parametrize("case", CASES[::3] + [c for c in CASES if c[1] in ("tsimclr", "cacr")], ids=lambda c: c[0])
def test_losses_stay_float32_under_bf16_autocast(case):
    """a forward inside torch.autocast(bfloat16) (as the engine runs it; the backward after it) -> every loss, dense
    and tiled, gives the float32 value and gradients (autocast is off during the loss; before, InfoNCE's
    similarities were bf16: 7e-4 off dense, 2e-2 tiled)"""
    _, name, hp, kind = case
    x = _inputs(torch.float32)
    for chunk in (None, 3):
        loss = L.build(name, chunk_size=chunk, **hp)
        ref_v, ref_g = _value_and_grads(loss, kind, x)
        names, fn = _call(kind, x)
        leaves = [x[k].clone().requires_grad_() for k in names]
        with torch.autocast("cpu", dtype=torch.bfloat16):  # the forward under autocast, the backward after it
            v = fn(loss, *leaves)
        g = torch.autograd.grad(v, leaves)
        assert v.dtype == torch.float32 and torch.allclose(v, ref_v, rtol=1e-6, atol=1e-7), (chunk, float(v), float(ref_v))
        for a, b in zip(g, ref_g):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), (chunk, (a - b).abs().max())
