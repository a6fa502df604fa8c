"""Every registered loss compiles whole (issue 78): ``torch.compile(fullgraph=True)`` traces it at its defaults and with
a queue, with every input check kept. The checks' flags are tensors (:mod:`suite.losses.checks`): under the engine's
:func:`~suite.losses.checks.deferred` they wait for its one read; compiled on its own a failed check is an asynchronous
assert. Values and gradients of the compiled loss equal eager's. The graphs are traced with the ``aot_eager`` backend
(Dynamo and AOT autograd, forward and backward, no C++ compile; about 1 s of one core a loss); one loss goes through
Inductor (``slow``)."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import pytest
import torch
import torch._dynamo as dynamo
from torch import nn

import suite.losses as L
from suite.losses.checks import DeferredChecks, deferred
from suite.losses.examples import example_inputs

NAMES = L.available()
N, D, Q = 6, 8, 5


def _queue_extra(loss: Any, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A queue (Q, d) for a loss that takes one, and SupCon's labels of it."""
    params = inspect.signature(type(loss).forward).parameters
    if "queue" not in params or not getattr(loss, "has_negatives", False):
        return {}
    extra = {"queue": torch.randn(Q, D, generator=gen)}
    if "queue_labels" in params:
        extra["queue_labels"] = torch.randint(0, 3, (Q,), generator=gen)
    return extra


# with a queue: one loss per way of taking it (the pair losses share InfoNCE's core, uaur is CACR's; user plugins all)
SAME_QUEUE_PATH = {"dcl", "macl", "hard_negative", "uaur"}
CASES = [(name, False) for name in NAMES] + [
    (name, True) for name in NAMES if name not in SAME_QUEUE_PATH and _queue_extra(L.build(name), torch.Generator())]


def _inputs(name: str, queue: bool, seed: int = 0) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    ex = example_inputs(name, N, D, classes=3, generator=gen)
    extra = dict(ex.extra)
    if queue:
        extra.update(_queue_extra(L.build(name), gen))
    return ex.args, extra


def _grads(fn: Callable[..., torch.Tensor], args: tuple[torch.Tensor, ...],
           extra: dict[str, torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [a.detach().clone().requires_grad_() for a in args]
    out = fn(*leaves, **extra)
    out.backward()
    return out.detach(), [x.grad for x in leaves]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    dynamo.reset()
    yield
    dynamo.reset()


def _compiles_whole(name: str, queue: bool, backend: str) -> None:
    loss = L.build(name)
    args, extra = _inputs(name, queue)
    with deferred(DeferredChecks()) as checks:
        if not queue:  # (fullgraph=True below raises at the first break too; explain lists them all)
            report = dynamo.explain(loss)(*args, **extra)
            assert report.graph_break_count == 0, [b.reason for b in report.break_reasons]
            dynamo.reset()
        compiled = torch.compile(loss, fullgraph=True, backend=backend)
        got, got_g = _grads(compiled, args, extra)
    assert checks.pending and not any(bool(b) for _, _, b in checks.pending)  # the checks ran, and passed
    want, want_g = _grads(loss, args, extra)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_g, want_g):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, queue", CASES, ids=[f"{n}{'-queue' if q else ''}" for n, q in CASES])
def test_the_loss_compiles_whole_and_equals_eager(name: str, queue: bool) -> None:
    """explain finds no graph break (InfoNCE had 10, SupCon 11, DCL 12, MACL 13, X-CLR 13, t-SimCLR 5), the engine's
    checks deferred; fullgraph=True traces the whole forward (Dynamo's graph, run by eager autograd: the cheap check
    that nothing breaks it, in `make test`); value and gradients as eager's (float32, 1e-5)"""
    _compiles_whole(name, queue, "eager")


@pytest.mark.slow  # AOT autograd traces each backward too: about 10 s a loss on a loaded core (`make test-slow`)
@pytest.mark.parametrize("name", NAMES)
def test_the_loss_compiles_whole_with_its_backward(name: str) -> None:
    """the same through AOT autograd (forward and backward graphs, as Inductor receives them)"""
    _compiles_whole(name, False, "aot_eager")


def test_a_loss_compiled_on_its_own_traces_whole_and_asserts_its_checks() -> None:
    """outside the engine (no deferred checks): no graph break either; a NaN input is refused by the compiled loss
    (an asynchronous assert naming the check), never a silent NaN loss"""
    loss = L.build("infonce")
    args, _ = _inputs("infonce", False)
    assert dynamo.explain(loss)(*args).graph_break_count == 0
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(*args), loss(*args))
    bad = args[0].detach().clone()
    bad[1, 2] = float("nan")
    with pytest.raises(RuntimeError, match="z_a contains non-finite values"):
        compiled(bad, args[1])


@pytest.mark.parametrize("name, poison, message", [
    ("infonce", "nan", "z_b contains non-finite values"),
    ("macl", "zero", "z_a: some embeddings are zero vectors"),
    ("supcon", "nan", "z_b contains non-finite values"),
])
def test_a_failed_check_of_a_compiled_loss_is_a_flag_read_at_the_sync(name: str, poison: str, message: str) -> None:
    """the compiled loss under the engine's deferred checks: a clean call leaves false flags, a poisoned one a true
    flag with the check's message, and no recompile between them (the flags' list is empty at each micro-batch's start)"""
    from torch._dynamo.testing import CompileCounterWithBackend

    loss = L.build(name)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(loss, fullgraph=True, backend=counter)
    args, extra = _inputs(name, False)
    za, zb = (a.detach().clone().requires_grad_() for a in args)
    with torch.no_grad():
        if poison == "nan":
            zb[3, 0] = float("nan")
        else:
            za[4] = 0.0
    checks = DeferredChecks()
    with deferred(checks):
        checks.index = 0
        compiled(*args, **extra)
        checks.index = 1
        compiled(za, zb, **extra)
    failed = [(i, m) for i, m, b in checks.pending if bool(b)]
    assert failed and failed[0][0] == 1 and failed[0][1].startswith(message), failed
    assert not any(bool(b) for i, _, b in checks.pending if i == 0)
    assert counter.frame_count == 1  # one graph served both calls
    with deferred(checks):  # calls without a new micro-batch: the flags of a check are OR-ed, one more compile at most
        for _ in range(3):
            compiled(*args, **extra)
    assert counter.frame_count <= 2


def test_the_engine_names_a_compiled_losss_failed_check_with_its_step() -> None:
    """a compiled InfoNCE in the engine's step, a zero embedding at step 2 -> the check's ValueError at the epoch's
    read, naming step 2, as uncompiled (tests/suite/test_host_reads.py)"""
    from suite.train import Engine, epoch_batches

    torch.manual_seed(0)
    x = torch.randn(32, 6, generator=torch.Generator().manual_seed(0))
    model = nn.Linear(6, 8)
    loss = L.build("infonce")
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-3, fused=True), device="cpu", loss=loss)

    def step(idx: torch.Tensor) -> torch.Tensor:
        z = eng.ddp(x[idx])
        if eng.step == 1:
            z = z * torch.cat([torch.zeros(1, 1), torch.ones(len(idx) - 1, 1)])
        return compiled(z, eng.ddp(x[idx] + 0.1))

    with pytest.raises(ValueError, match=r"zero vectors.*step 2 \(epoch 1, batch 2\)"):
        eng.fit(lambda ep: epoch_batches(len(x), 8, seed=1, epoch=ep), step, epochs=1)


def test_the_engine_compiles_the_loss_call_where_asked_and_records_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """the engine puts the loss's forward through torch.compile on CUDA by default (SUITE_COMPILE_LOSS=1 here, on the
    CPU, with a fast backend): the front-end's own call of the loss object takes the compiled graph, the values equal
    an uncompiled run's, a failed check still names its step (the run records what was compiled:
    tests/text/test_front_door.py)"""
    from torch._dynamo.utils import counters

    from suite.train import Engine, epoch_batches
    from suite.train.engine import compile_loss_of

    assert not compile_loss_of(L.build("infonce"), torch.device("cpu"))  # the CPU's default: eager
    monkeypatch.setenv("SUITE_COMPILE_BACKEND", "eager")
    x = torch.randn(32, 6, generator=torch.Generator().manual_seed(0))

    def train(compiled: bool, poison: bool = False) -> tuple[list[float], Engine]:
        monkeypatch.setenv("SUITE_COMPILE_LOSS", "1" if compiled else "0")
        torch.manual_seed(0)
        model, loss = nn.Linear(6, 8), L.build("macl")
        eng = Engine(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", loss=loss)
        seen: list[torch.Tensor] = []

        def step(idx: torch.Tensor) -> torch.Tensor:
            z = eng.ddp(x[idx])
            if poison and eng.step == 1:
                z = z * torch.cat([torch.zeros(1, 1), torch.ones(len(idx) - 1, 1)])
            out = loss(z, eng.ddp(x[idx] + 0.1))  # the front-end's call of its loss object
            seen.append(out.detach())
            return out

        eng.fit(lambda ep: epoch_batches(len(x), 8, seed=1, epoch=ep), step, epochs=1)
        return [float(v) for v in seen], eng

    before = counters["stats"]["unique_graphs"]
    got, eng = train(True)
    assert counters["stats"]["unique_graphs"] > before and eng.compiled == {"model": False, "loss": True}
    want, plain = train(False)
    assert plain.compiled["loss"] is False
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"zero vectors.*step 2 \(epoch 1, batch 2\)"):
        train(True, poison=True)


def test_the_euclidean_losses_choose_their_path_on_the_device() -> None:
    """-l2 SimCLR's rescale of features above 2^40 is traced (a device power of two, no host read): compiled at 1e20
    it equals eager (finite); t-SimCLR's float64 path is chosen by a read, so compiled it refuses such features by a
    deferred check instead of returning inf"""
    gen = torch.Generator().manual_seed(3)
    za, zb = torch.randn(N, D, generator=gen) * 1e20, torch.randn(N, D, generator=gen) * 1e20
    l2 = L.build("simclr_l2")
    with deferred(DeferredChecks()) as checks:
        got = torch.compile(l2, fullgraph=True, backend="aot_eager")(za, zb)
        ts = torch.compile(L.build("tsimclr"), fullgraph=True, backend="aot_eager")
        ts(za / 1e20, zb / 1e20)
        checks.index = 1
        ts(za, zb)
    assert torch.isfinite(got)
    torch.testing.assert_close(got, l2(za, zb))
    failed = [(i, m) for i, m, b in checks.pending if bool(b)]
    assert [i for i, _ in failed] == [1] and "tsimclr: embeddings of magnitude above 2^40" in failed[0][1]


@pytest.mark.slow  # a C++ compile of the forward and backward: about 20 s of one core (`make test-slow`)
def test_inductor_compiles_a_loss_with_eager_values() -> None:
    """Inductor (C++ on the CPU): InfoNCE's value and gradients as eager's"""
    loss = L.build("infonce")
    args, _ = _inputs("infonce", False)
    with deferred(DeferredChecks()):
        compiled = torch.compile(loss, fullgraph=True)
        got, got_g = _grads(compiled, args, {})
    want, want_g = _grads(loss, args, {})
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_g, want_g):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_sim_lse_is_the_masked_rows_log_sum_exp() -> None:
    """pair_row_lse (one autograd Function, issue 78 item 2) against logsumexp over pair_rows' masked matrix, float64,
    every arrangement, with and without the positive and a queue: values and gradients to 1e-12"""
    from suite.losses.core import normalize, pair_row_lse, pair_rows, pair_setup

    gen = torch.Generator().manual_seed(5)
    for negatives in ("all", "cross", "none"):
        for symmetric in (True, False):
            for excl in (False, True):
                for with_q in ((True,) if negatives == "none" else (False, True)):
                    za = torch.randn(N, D, generator=gen, dtype=torch.float64, requires_grad=True)
                    zb = torch.randn(N, D, generator=gen, dtype=torch.float64, requires_grad=True)
                    q = torch.randn(Q, D, generator=gen, dtype=torch.float64) if with_q else None
                    outs = []
                    for new in (True, False):
                        ps = pair_setup(normalize(za), normalize(zb), negatives=negatives, symmetric=symmetric,
                                        queue=q, scale=10.0)
                        lse = pair_row_lse(ps, exclude_positive=excl) if new else torch.logsumexp(
                            pair_rows(ps, 0, ps.n_rows, exclude_positive=excl), -1)
                        w = torch.linspace(0.5, 2.0, lse.shape[0], dtype=torch.float64)
                        g = torch.autograd.grad((lse * w).sum(), (za, zb), allow_unused=True)
                        outs.append((lse, [torch.zeros_like(za) if x is None else x for x in g]))
                    (a, ga), (b, gb) = outs
                    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
                    for x, y in zip(ga, gb):
                        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_sim_lse_backward_makes_one_matrix() -> None:
    """the backward of the dense rows makes one (A, C) tensor (g p); the masked product's autograd graph made three
    (index_put_'s clone of the gradient among them)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    from suite.losses.core import normalize, pair_row_lse, pair_rows, pair_setup, row_logsumexp

    a_rows = 64

    class Big(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.made: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            op = func.__name__.split(".")[0]
            if isinstance(out, torch.Tensor) and out.numel() >= a_rows * a_rows and not op.endswith("_") and op not in (
                    "detach", "t", "view", "slice", "transpose", "permute", "alias", "expand", "as_strided"):  # new
                self.made.append(func.__name__)
            return out

    made = {}
    for new in (True, False):
        za = torch.randn(a_rows // 2, 4, requires_grad=True)  # (A, d) well below (A, A)
        zb = torch.randn(a_rows // 2, 4, requires_grad=True)
        ps = pair_setup(normalize(za), normalize(zb), scale=10.0)
        lse = pair_row_lse(ps, exclude_positive=True) if new else row_logsumexp(
            pair_rows(ps, 0, ps.n_rows, exclude_positive=True))
        with Big() as big:
            lse.sum().backward()
        made[new] = big.made
    assert made[True] == ["exp.default"] and len(made[False]) >= 2, made


def test_the_traced_thread_locals_have_no_static_value_to_go_stale() -> None:
    """The two per-thread states a compiled loss reads (the engine's deferred checks, the CUDA flag) are plain
    ``threading.local`` attributes: a static lookup (``inspect.getattr_static``, dynamo's first way to read an
    attribute) finds nothing, so dynamo reads them dynamically, and a thread that never set them reads the default.
    Before: class defaults of ``threading.local`` subclasses, which torch 2.11's dynamo took for the values: with the
    engine's checks set, every front-end on an H200 failed building a guard ('Unexpected type DeferredChecks')."""
    import threading

    from suite.losses import checks, tiling

    missing = object()
    for holder, name in ((checks._DEFERRED, "checks"), (tiling._cuda, "flag")):
        assert type(holder) is threading.local
        assert inspect.getattr_static(holder, name, missing) is missing, name
    mine = DeferredChecks()
    seen: dict[str, Any] = {}

    def other() -> None:
        seen["checks"], seen["cuda"] = checks.deferred_checks(), tiling._on_cuda()

    with deferred(mine), tiling.on_cuda(True):
        assert checks.deferred_checks() is mine and tiling._on_cuda()
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen == {"checks": None, "cuda": False}
    assert checks.deferred_checks() is None and not tiling._on_cuda()
