"""MoCo queue order and momentum update; kNN and linear probe on separable features."""
from __future__ import annotations

import copy

import torch

import suite.losses as L
from vision.eval import ClassificationEvaluator
from suite.presets import make_loss
from vision.methods import KeyQueue, MoCo, SimCLR, momentum_update


def build_loss(name, hp, framework):
    return make_loss(framework, name, hp).loss
from vision.models import build_encoder


def test_queue_fifo_order() -> None:
    q = KeyQueue(5, 2)
    assert len(q) == 0
    q.enqueue(torch.tensor([[1.0, 1], [2, 2]]), torch.tensor([1, 2]))
    keys, labels = q.get()
    assert keys[:, 0].tolist() == [2, 1] and labels.tolist() == [2, 1]  # newest first
    q.enqueue(torch.tensor([[3.0, 3], [4, 4], [5, 5]]))
    q.enqueue(torch.tensor([[6.0, 6], [7, 7]]), torch.tensor([6, 7]))  # wraps: 1 and 2 are dequeued
    keys, labels = q.get()
    assert keys[:, 0].tolist() == [7, 6, 5, 4, 3] and labels.tolist() == [7, 6, -1, -1, -1] and len(q) == 5
    q.enqueue(torch.arange(16.0).view(8, 2))  # larger than the queue: the last 5 are kept
    assert q.get()[0][:, 0].tolist() == [14, 12, 10, 8, 6]


def test_momentum_update() -> None:
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ka, qb = a.weight.detach().clone(), b.weight.detach().clone()
    momentum_update(a, b, 0.9)
    assert torch.allclose(a.weight, 0.9 * ka + 0.1 * qb)
    momentum_update(a, b, 0.0)
    assert torch.allclose(a.weight, b.weight)


def test_moco_step_enqueues_and_updates() -> None:
    torch.manual_seed(0)
    enc = build_encoder("convnet", 4, 8, proj_dim=16)
    m = MoCo(enc, build_loss("infonce", {}, "moco"), queue_size=32, momentum=0.5)
    assert m.loss.negatives == "none" and m.loss.symmetric is False  # MoCo-v2 arrangement
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
    before_q = m.queue.get()[0].clone()
    k_before = [p.clone() for p in m.key_encoder.parameters()]
    loss = m(torch.randn(2, 6, 3, 8, 8))
    loss.backward()
    opt.step()
    m.after_step()
    keys = m.queue.get()[0]
    assert torch.equal(keys[6:], before_q[:-6])  # 6 new keys in front, the oldest 6 dropped
    q_params = list(m.encoder.parameters())
    for kb, ka, qp in zip(k_before, m.key_encoder.parameters(), q_params):
        assert torch.allclose(ka, 0.5 * kb + 0.5 * qp)
    assert all(not p.requires_grad for p in m.key_encoder.parameters())
    cacr = MoCo(build_encoder("convnet", 4, 8), L.build("cacr"), queue_size=16)
    assert torch.isfinite(cacr(torch.randn(4, 5, 3, 8, 8)))  # query + 3 keys


def test_moco_cacr_follows_algorithm3() -> None:
    """CACR under MoCo: every view is a query from the online encoder and a key from the momentum
    encoder; the loss equals the paper's reference on those queries and keys (not the stack
    (q, k_1, ..., k_K) with detached keys as queries), and the last view's keys are enqueued."""
    from tests import reference as R

    torch.manual_seed(0)
    enc = build_encoder("convnet", 4, 8, proj_dim=16).double().eval()
    m = MoCo(enc, build_loss("cacr", {}, "moco"), queue_size=32, momentum=0.5).double().eval()
    views = torch.randn(3, 5, 3, 8, 8, dtype=torch.float64)
    loss = m(views)
    with torch.no_grad():
        q = enc(views.flatten(0, 1)).view(3, 5, -1)
        k = m.key_encoder(views.flatten(0, 1)).view(3, 5, -1)
    ref = R.cacr(q, queue=m.queue.get()[0], keys=k)
    assert abs(loss.item() - ref.item()) < 1e-8
    m.after_step()
    assert torch.allclose(m.queue.get()[0][:5].double(), k[-1].flip(0), atol=1e-6)  # newest first


def test_simclr_multi_view_and_errors() -> None:
    m = SimCLR(build_encoder("convnet", 4, 8), L.build("cmc"))
    assert torch.isfinite(m(torch.randn(5, 4, 3, 8, 8)))
    m2 = SimCLR(build_encoder("convnet", 4, 8), L.build("infonce"))
    try:
        m2(torch.randn(3, 4, 3, 8, 8))
    except ValueError as e:
        assert "two views" in str(e)
    else:
        raise AssertionError("expected ValueError")


def test_knn_and_linear_on_separable_features() -> None:
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(4, 16, generator=g) * 5
    ytr, yte = torch.arange(4).repeat(50), torch.arange(4).repeat(20)
    xtr = centers[ytr] + 0.3 * torch.randn(200, 16, generator=g)
    xte = centers[yte] + 0.3 * torch.randn(80, 16, generator=g)
    ev = ClassificationEvaluator(xtr, ytr, xte, yte, num_classes=4, knn_k=20)
    out = ev(lambda x: x)
    assert out["knn_acc"] > 0.99 and out["linear_acc"] > 0.99


def test_moco_keeps_its_parameter_lists_and_equals_a_fresh_walk() -> None:
    """MoCo's momentum update takes the parameter lists it keeps (no walk of the modules per step, which binds a GPU
    step to the host): the key encoder equals the update over freshly walked modules bit for bit, and a .to() walks
    them again (a conversion that gives the parameters new tensors is followed)"""
    torch.manual_seed(0)
    m = MoCo(build_encoder("convnet", 4, 8, proj_dim=16), build_loss("infonce", {}, "moco"), queue_size=8, momentum=0.7)
    with torch.no_grad():
        for p in m.encoder.parameters():
            p.add_(torch.randn_like(p))
    ref = copy.deepcopy(m)
    for _ in range(2):
        m.after_step()
        momentum_update(ref.key_encoder, ref.encoder, 0.7)
    assert m._params is not None and all(a is b for a, b in zip(m._params[0], m.key_encoder.parameters()))
    for a, b in zip(m.key_encoder.parameters(), ref.key_encoder.parameters()):
        assert torch.equal(a, b)
    m.to(torch.float64)
    assert m._params is None
    m.after_step()
    assert m._params[0][0].dtype == torch.float64 and all(
        a is b for a, b in zip(m._params[1], m.encoder.parameters()))


def _newest_first(keys: torch.Tensor, labels: torch.Tensor, ptr: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The queue's order by index arithmetic (what KeyQueue.get computed on the device before): slot ptr - 1 first."""
    order = (ptr - 1 - torch.arange(count)) % keys.shape[0]
    return keys[order], labels[order]


def test_queue_keeps_its_position_on_the_host_and_its_order() -> None:
    """The queue's write position and fill count live on the host (a step's enqueue is a slice copy, its get a flip and
    a roll): over batches that fill, wrap and overrun queues of several sizes, get() equals the index-arithmetic order
    bit for bit; the saved state holds ptr and count, and a queue loaded from it goes on where the first one stands"""
    g = torch.Generator().manual_seed(0)
    for size, batches in ((7, [3, 2, 4, 7, 1, 9, 5]), (8, [4, 4, 4, 8, 2]), (5, [6]), (6, [1, 1, 1, 1, 1, 1, 1, 2])):
        q = KeyQueue(size, 3)
        keys, labels, ptr, count = torch.zeros(size, 3), torch.full((size,), -1), 0, 0  # the reference ring
        for i, b in enumerate(batches):
            k = torch.randn(b, 3, generator=g)
            y = torch.randint(0, 5, (b,), generator=g) if i % 2 else None
            q.enqueue(k, y)
            if b > size:  # the last `size` keys are written
                k, y, b = k[-size:], None if y is None else y[-size:], size
            for j in range(b):
                keys[(ptr + j) % size] = k[j]
                labels[(ptr + j) % size] = -1 if y is None else y[j]
            ptr, count = (ptr + b) % size, min(count + b, size)
            got_k, got_y = q.get()
            ref_k, ref_y = _newest_first(keys, labels, ptr, count)
            assert torch.equal(got_k, ref_k) and torch.equal(got_y, ref_y), (size, batches[: i + 1])
            assert q.get(labels=False)[1] is None and len(q) == count
        state = q.state_dict()
        assert int(state["ptr"]) == ptr and int(state["count"]) == count
        loaded = KeyQueue(size, 3)
        loaded.load_state_dict(state)
        more = torch.randn(2, 3, generator=g)
        q.enqueue(more)
        loaded.enqueue(more)
        assert torch.equal(q.get()[0], loaded.get()[0]) and torch.equal(q.get()[1], loaded.get()[1])
    full = KeyQueue(4, 2, random_init=True)  # MoCo's start: full of random keys, the write position at slot 0
    assert len(full) == 4 and torch.equal(full.get()[0], full.keys.flip(0))


def test_moco_key_shuffle_with_one_batchnorm_batch_changes_no_key() -> None:
    """bn_splits 1: the keys with and without the shuffle agree (BatchNorm's statistics over the same images, summed
    in another order), which is why a GPU skips it; with 2 splits the shuffle changes the statistics, and the keys.
    The CPU keeps the shuffle (its random stream, and with it the committed CPU results, as before)"""
    torch.manual_seed(0)
    x = torch.randn(16, 3, 8, 8)
    for splits, same in ((1, True), (2, False)):
        m = MoCo(build_encoder("convnet", 4, 8, proj_dim=16), build_loss("infonce", {}, "moco"), queue_size=8,
                 bn_splits=splits).train()
        torch.manual_seed(1)
        shuffled = m._keys(x, shuffle=True)
        plain = m._keys(x, shuffle=False)
        assert torch.allclose(shuffled, plain, atol=1e-5) == same, splits
    state = torch.get_rng_state()
    m._keys(x)  # the CPU's default: shuffled (a randperm drawn)
    assert not torch.equal(state, torch.get_rng_state())


def test_queue_position_does_not_recompile_a_compiled_forward() -> None:
    """--compile: the queue's position is a host int, which a compiled forward would specialise on (a recompile for each
    position, until torch gives up compiling the forward); get() runs eagerly instead, the graphs compiled once"""
    from torch._dynamo.utils import counters

    q = KeyQueue(6, 2, random_init=True)
    f = torch.compile(lambda x: (q.get()[0] * x).sum(), backend="eager")
    torch._dynamo.reset()
    counters.clear()
    for _ in range(8):  # every position, and around again
        f(torch.ones(2))
        q.enqueue(torch.randn(1, 2))
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
