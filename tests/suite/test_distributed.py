"""DDP equivalence: 2 gloo processes with batch N each give the same loss (mean over ranks) and,
after DDP's gradient averaging, the same gradients as one process with batch 2N."""
from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import suite.losses as L

N, D, V, W = 4, 5, 3, 2


def _inputs():
    g = torch.Generator().manual_seed(0)
    za = torch.randn(W * N, D, generator=g, dtype=torch.float64)
    zb = torch.randn(W * N, D, generator=g, dtype=torch.float64)
    views = torch.randn(V, W * N, D, generator=g, dtype=torch.float64)
    labels = torch.arange(W * N) % 3
    sim = torch.rand(W * N, W * N, generator=g, dtype=torch.float64)
    sim = (sim + sim.T) / 2
    sim.fill_diagonal_(1.0)
    queue = torch.randn(3, D, generator=g, dtype=torch.float64)
    return za, zb, views, labels, sim, queue


CASES = [(name, {}) for name in L.available()] + [
    ("infonce", {"negatives": "cross", "symmetric": False}),
    ("macl", {"negatives": "cross", "symmetric": False}),
    ("dcl", {"negatives": "cross", "symmetric": True}),
    ("cacr", {"negatives": "cross_view"}),
] + [(name, {"chunk_size": 3}) for name in L.available()]  # the tiled path with gathered candidates


def _run(loss, za, zb, views, labels, sim, queue, rows):
    extra = {}
    if "labels" in loss.requires:
        extra["labels"] = labels[rows]
    if "similarity" in loss.requires:
        extra["similarity"] = sim  # global graph; the loss takes its rows
    if loss.has_negatives and not loss.requires:
        extra["queue"] = queue
    if loss.multi_view:
        v = views[:, rows].clone().requires_grad_()
        out = loss(v, **extra)
        out.backward()
        return float(out), v.grad
    a, b = za[rows].clone().requires_grad_(), zb[rows].clone().requires_grad_()
    out = loss(a, b, **extra)
    out.backward()
    return float(out), torch.cat([a.grad, b.grad], 1)


def _worker(rank: int, init: str, outdir: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W)
    try:
        data = _inputs()
        rows = slice(rank * N, (rank + 1) * N)
        res = {}
        for i, (name, hp) in enumerate(CASES):
            loss = L.build(name, **hp)
            if name == "xclr":
                res[i] = _run(loss, *data[:5], None, rows)
            else:
                res[i] = _run(loss, *data, rows)
        torch.save(res, os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_two_process_gloo_equals_single_process(tmp_path):
    init = f"file://{tmp_path / 'pg'}"
    mp.spawn(_worker, args=(init, str(tmp_path)), nprocs=W, join=True)
    per_rank = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(W)]
    data = _inputs()
    for i, (name, hp) in enumerate(CASES):
        loss = L.build(name, **hp)
        args = (*data[:5], None) if name == "xclr" else data
        single_val, single_grad = _run(loss, *args, slice(0, W * N))
        dist_val = sum(r[i][0] for r in per_rank) / W
        assert dist_val == pytest.approx(single_val, abs=1e-10), (name, hp)
        # DDP averages gradients over ranks: rank r's input gradient / W == single-process gradient of its rows
        axis = 1 if loss.multi_view else 0
        grads = torch.cat([r[i][1] for r in per_rank], dim=axis) / W
        assert torch.allclose(grads, single_grad, atol=1e-10), (name, hp, (grads - single_grad).abs().max())
