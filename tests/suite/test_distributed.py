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


def rank_results(rank: int) -> dict[int, tuple[float, torch.Tensor]]:
    """This rank's loss value and input gradient for every case, on its rows of the global batch."""
    data = _inputs()
    rows = slice(rank * N, (rank + 1) * N)
    res = {}
    for i, (name, hp) in enumerate(CASES):
        loss = L.build(name, **hp)
        res[i] = _run(loss, *data[:5], None, rows) if name == "xclr" else _run(loss, *data, rows)
    return res


def assert_equals_single_process(per_rank: list[dict[int, tuple[float, torch.Tensor]]]) -> None:
    """The ranks' mean loss is the single process's at the global batch, and their gradients / W are its gradients."""
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


def _worker(rank: int, init: str, outdir: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W)
    try:
        torch.save(rank_results(rank), os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_two_process_gloo_equals_single_process(tmp_path):
    init = f"file://{tmp_path / 'pg'}"
    mp.spawn(_worker, args=(init, str(tmp_path)), nprocs=W, join=True)
    assert_equals_single_process([torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(W)])


def test_slurm_environment_becomes_torch_distributeds(monkeypatch):
    """srun's variables -> RANK, WORLD_SIZE, LOCAL_RANK, the step's first node as MASTER_ADDR and one port for every
    task of the step; a batch script (no step) and a one-task step are one process; torchrun's own variables win"""
    from suite.distributed import first_host, init_from_env, slurm_env

    step = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "8",
            "SLURM_STEP_NODELIST": "gpu[007-008,011],cpu1", "SLURM_JOB_NODELIST": "gpu[001-011],cpu1"}
    envs = [slurm_env({**step, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r % 4)}) for r in range(8)]
    assert [e["RANK"] for e in envs] == [str(r) for r in range(8)]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "2", "3"] * 2
    assert {(e["WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {("8", "gpu007", envs[0]["MASTER_PORT"])}
    assert 15000 <= int(envs[0]["MASTER_PORT"]) < 35000
    assert envs[0]["MASTER_PORT"] != slurm_env({**step, "SLURM_STEP_ID": "4", "SLURM_PROCID": "0"})["MASTER_PORT"]
    assert slurm_env({**step, "SLURM_PROCID": "0", "MASTER_PORT": "29500"})["MASTER_PORT"] == "29500"
    batch = {k: v for k, v in step.items() if not k.startswith("SLURM_STEP")}
    assert slurm_env({**batch, "SLURM_PROCID": "0"}) is None  # sbatch --ntasks 8 running python itself
    assert slurm_env({**step, "SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}) is None
    assert [first_host(x) for x in ("vm", "a,b", "rack[1-2]-n[01-04],x", "n[9]")] == ["vm", "a", "rack1-n01", "n9"]
    with pytest.raises(ValueError, match="names no host"):
        first_host(",x")
    # torchrun's variables (WORLD_SIZE set) are not replaced by SLURM's
    for k, v in {"WORLD_SIZE": "1", **step, "SLURM_PROCID": "0"}.items():
        monkeypatch.setenv(k, v)
    for k in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    assert init_from_env("gloo") is False
    assert os.environ["WORLD_SIZE"] == "1" and "RANK" not in os.environ and "MASTER_ADDR" not in os.environ
