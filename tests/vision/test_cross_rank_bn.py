"""Cross-rank BatchNorm in two gloo processes (issue 75, item 2).

- :class:`suite.distributed.GlobalBatchNorm` (SimCLR's global BN, on the CPU where torch's SyncBatchNorm refuses
  tensors): outputs, running statistics and gradients equal one process's BatchNorm over the global batch, also with
  unequal batches per rank and through a whole converted encoder;
- MoCo's cross-rank Shuffle-BN (``MoCo._keys`` under torch.distributed): some of rank 0's keys are computed on rank 1,
  every image exactly once; the unshuffled keys are the keys computed without shuffle when BN is in eval mode, and in
  training mode each key is the one its image gets in a single-process BatchNorm over the batch its rank encoded.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import suite.losses as L
from suite import distributed as sd
from vision.methods import MoCo
from vision.models import build_encoder

W = 2
ROWS = [(0, 3), (3, 8)]  # unequal per-rank batches for the 2-D BN case
B = 6  # MoCo keys per rank (equal: MoCo gathers)


def _bn_inputs():
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(8, 4, 3, 3, generator=g, dtype=torch.float64) * 2 + 1 for _ in range(2)]  # two steps
    t = torch.randn(8, 4, 3, 3, generator=g, dtype=torch.float64)
    h = torch.randn(2 * 5, 6, generator=g, dtype=torch.float64)
    img = torch.randn(2 * 5, 3, 8, 8, generator=g, dtype=torch.float64)
    return xs, t, h, img


def _bn(cls, c):
    torch.manual_seed(3)
    bn = cls(c).double()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_()
    return bn


def _encoder():
    torch.manual_seed(4)
    return build_encoder("convnet", 4, 8, proj_dim=5).double()


def _bn_run(bn, xs, t, rows):
    """Two training steps of ``bn`` on ``rows`` of each batch: outputs, input gradients, then parameter gradients and
    running statistics."""
    out = {}
    for s, x in enumerate(xs):
        xi = x[rows].clone().requires_grad_()
        y = bn(xi)
        (y * t[rows]).sum().backward()
        out[f"y{s}"], out[f"xg{s}"] = y.detach(), xi.grad
    out.update(wg=bn.weight.grad, bg=bn.bias.grad, rm=bn.running_mean.clone(), rv=bn.running_var.clone(),
               nbt=bn.num_batches_tracked.clone())
    return out


def _enc_run(enc, img, rows):
    z = enc(img[rows])
    (z * torch.arange(10 * 5, dtype=z.dtype).view(10, 5)[rows].cos()).sum().backward()  # weights of global rows
    return {"z": z.detach(), "grads": [p.grad.clone() for p in enc.parameters()],
            "rm": [m.running_mean.clone() for m in enc.modules() if hasattr(m, "running_mean")]}


def _moco_inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(W * B, 3, 8, 8, generator=g, dtype=torch.float64)


def _moco(enc):
    return MoCo(enc, L.build("infonce"), queue_size=8).double()


def rank_results(rank: int) -> dict:
    xs, t, h, img = _bn_inputs()
    res: dict = {}
    bn2 = sd.convert_sync_batchnorm(nn.Sequential(_bn(nn.BatchNorm2d, 4)))[0]
    assert isinstance(bn2, sd.GlobalBatchNorm)
    res["bn2d"] = _bn_run(bn2, xs, t, slice(*ROWS[rank]))
    bn1 = sd.convert_sync_batchnorm(_bn(nn.BatchNorm1d, 6))
    res["bn1d"] = _bn_run(bn1, [h], h.cos(), slice(rank * 5, rank * 5 + 5))
    res["enc"] = _enc_run(sd.convert_sync_batchnorm(_encoder()), img, slice(rank * 5, rank * 5 + 5))
    # MoCo: the key batch shuffled across ranks
    x = _moco_inputs()[rank * B:(rank + 1) * B]
    m = _moco(_encoder())
    seen: list[torch.Tensor] = []
    m.key_encoder.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach().clone()))
    torch.manual_seed(10 + rank)  # the permutation is rank 0's, whatever the other ranks' generators hold
    m.key_encoder.eval()
    res["k_eval"], res["k_plain"] = m._keys(x), m.key_encoder(x)
    res["seen_eval"] = seen[0]
    seen.clear()
    m.key_encoder.train()
    res["k_train"], res["seen_train"] = m._keys(x), seen[0]
    res["k_own"] = m.key_encoder(x)  # training-mode BN over this rank's own batch
    return res


def _worker(rank: int, init: str, outdir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W)
    try:
        torch.save(rank_results(rank), os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("crossbn")
    mp.spawn(_worker, args=(f"file://{d / 'pg'}", str(d)), nprocs=W, join=True)
    return [torch.load(d / f"rank{r}.pt", weights_only=True) for r in range(W)]


def _close(a, b):
    return torch.allclose(a, b, atol=1e-10, rtol=1e-10)


@pytest.mark.slow  # two gloo processes started: about 15 s of one core (`make test-slow`)
def test_global_batchnorm_equals_one_process_over_the_global_batch(ranks):
    xs, t, h, img = _bn_inputs()
    for key, bn, batches, target, rows in (
            ("bn2d", _bn(nn.BatchNorm2d, 4), xs, t, [slice(*r) for r in ROWS]),
            ("bn1d", _bn(nn.BatchNorm1d, 6), [h], h.cos(), [slice(0, 5), slice(5, 10)])):
        single = _bn_run(bn, batches, target, slice(None))
        for s in range(len(batches)):
            assert _close(torch.cat([r[key][f"y{s}"] for r in ranks]), single[f"y{s}"]), (key, s)
            assert _close(torch.cat([r[key][f"xg{s}"] for r in ranks]), single[f"xg{s}"]), (key, s)
        # DDP sums (then averages) the parameter gradients: their sum is one process's over the global batch
        for g in ("wg", "bg"):
            assert _close(sum(r[key][g] for r in ranks), single[g]), (key, g)
        for r in ranks:  # running mean and (unbiased) variance of the global batch on every rank
            assert _close(r[key]["rm"], single["rm"]) and _close(r[key]["rv"], single["rv"]), key
            assert int(r[key]["nbt"]) == len(batches)
    # a whole encoder (conv BN and the projection head's BN) converted
    single = _enc_run(_encoder(), img, slice(None))
    assert _close(torch.cat([r["enc"]["z"] for r in ranks]), single["z"])
    for i, g in enumerate(single["grads"]):
        assert _close(ranks[0]["enc"]["grads"][i] + ranks[1]["enc"]["grads"][i], g), i
    assert all(_close(a, b) for r in ranks for a, b in zip(r["enc"]["rm"], single["rm"]))


def test_global_batchnorm_is_plain_batchnorm_in_one_process():
    bn = _bn(nn.BatchNorm2d, 4)
    ref = copy.deepcopy(bn)
    conv = sd.convert_sync_batchnorm(bn)
    assert isinstance(conv, sd.GlobalBatchNorm) and conv.weight is bn.weight and conv.running_mean is bn.running_mean
    assert set(conv.state_dict()) == set(ref.state_dict())
    x = _bn_inputs()[0][0]
    assert torch.equal(conv(x), ref(x)) and torch.equal(conv.running_var, ref.running_var)
    conv.eval(), ref.eval()
    assert torch.equal(conv(x), ref(x))


def _index(rows: torch.Tensor, images: torch.Tensor) -> list[int]:
    """Global index of each row of ``rows`` among ``images``."""
    d = (rows[:, None] - images[None]).flatten(2).abs().sum(-1)  # (R, W*B)
    assert bool((d.min(1).values == 0).all())
    return d.argmin(1).tolist()


@pytest.mark.slow  # two gloo processes started: about 15 s of one core (`make test-slow`)
def test_moco_key_shuffle_crosses_ranks_and_is_undone(ranks):
    images = _moco_inputs()
    # each rank encoded B images of the global batch; together every image exactly once; rank 0's images reach rank 1
    for mode in ("seen_eval", "seen_train"):
        where = [_index(r[mode], images) for r in ranks]
        assert sorted(where[0] + where[1]) == list(range(W * B))
        assert any(i < B for i in where[1]) and any(i >= B for i in where[0]), where
    assert _index(ranks[0]["seen_eval"], images) != list(range(B))
    # eval-mode BN is a function of each image alone: the unshuffled keys are the keys without shuffle
    for r in ranks:
        assert _close(r["k_eval"], r["k_plain"])
    # training-mode BN: each image's key is a single-process key encoder's over the batch its rank encoded
    key_encoder = copy.deepcopy(_moco(_encoder()).key_encoder).train()
    keys = torch.empty(W * B, ranks[0]["k_train"].shape[1], dtype=torch.float64)
    for r in ranks:
        keys[_index(r["seen_train"], images)] = key_encoder(r["seen_train"]).detach()
    assert _close(torch.cat([r["k_train"] for r in ranks]), keys)
    assert not _close(torch.cat([r["k_own"] for r in ranks]), keys)  # the statistics are not the rank's own batch's
