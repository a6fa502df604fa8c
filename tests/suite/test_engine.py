"""The training engine: non-finite loss, atomic checkpoint, bit-identical resume, the epoch rule,
precision, accumulation, clipping, gradient caching (issue 14)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import suite.train.checkpoint as ckmod
from suite import distributed as sd
from suite.train import (CachedStep, Engine, NonFiniteLossError, epoch_batches, eval_batches, load_checkpoint,
                         resolve_device)

X = torch.randn(40, 6, generator=torch.Generator().manual_seed(0))


def _model(dropout: float = 0.2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 4))


def _engine(model: nn.Module, **kw: object) -> Engine:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return Engine(model, opt, scheduler=sched, device="cpu", generators={"aug": torch.Generator().manual_seed(5)},
                  **kw)  # type: ignore[arg-type]


def _step(eng: Engine):
    def step(idx: torch.Tensor) -> torch.Tensor:
        x = X[idx]
        noise = torch.randn(x.shape, generator=eng.generators["aug"])  # a seeded augmentation
        z1, z2 = eng.ddp(x), eng.ddp(x + 0.1 * noise)  # dropout: the global torch RNG
        return ((z1 - z2) ** 2).mean() + z1.pow(2).mean() * 0.01
    return step


def _batches(ep: int) -> list[torch.Tensor]:
    return epoch_batches(len(X), 8, seed=3, epoch=ep)


class _Stop(Exception):
    pass


def test_resume_is_bitwise_equal(tmp_path: Path) -> None:
    """a run interrupted mid-epoch (step 7 of 15) and resumed from its step-6 checkpoint -> parameters, optimiser and scheduler equal the uninterrupted run's bit for bit"""
    torch.manual_seed(11)
    full = _engine(_model())
    full.fit(_batches, _step(full), epochs=3)
    assert full.step == 15

    torch.manual_seed(11)
    a = _engine(_model())
    ck = tmp_path / "ck.pt"

    def on_step() -> None:
        if a.step == 6:
            a.save(ck, {"seed": 3})
        if a.step == 7:
            raise _Stop

    with pytest.raises(_Stop):
        a.fit(_batches, _step(a), epochs=3, on_step=on_step)
    torch.manual_seed(999)  # a fresh process: other RNG state, other initial weights
    b = _engine(_model())
    assert b.load(ck, {"seed": 3}) == {}
    assert (b.step, b.epoch, b.batch_in_epoch) == (6, 1, 1)
    b.fit(_batches, _step(b), epochs=3)
    assert b.step == 15
    for p, q in zip(full.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)
    assert full.scheduler.state_dict() == b.scheduler.state_dict()
    sa, sb = full.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert all(torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"]) for k in sa)


def test_checkpoint_layout_and_config_check(tmp_path: Path) -> None:
    """a checkpoint -> holds model, optimiser, scheduler, step, sampler position, RNG (incl. generators) and config; another config is refused naming the key"""
    from suite.train import ConfigMismatchError

    eng = _engine(_model())
    eng.fit(_batches, _step(eng), max_steps=2)
    state = load_checkpoint(eng.save(tmp_path / "c.pt", {"lr": 0.01}, extra={"best": 0.5}))  # type: ignore[arg-type]
    assert {"model", "optimizer", "scheduler", "step", "epoch", "batch_in_epoch", "rng", "generators", "config",
            "extra"} <= set(state)
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (2, 0, 2)
    assert {"python", "numpy", "torch"} <= set(state["rng"]) and "aug" in state["generators"]
    with pytest.raises(ConfigMismatchError, match=r"lr: 0.01 -> 0.1"):
        _engine(_model()).load(tmp_path / "c.pt", {"lr": 0.1})


def test_checkpoint_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """a crash while a checkpoint is being written -> the previous checkpoint is intact and loads"""
    eng = _engine(_model())
    path = eng.save(tmp_path / "c.pt", {"k": 1})
    eng.fit(_batches, _step(eng), max_steps=1)
    real = torch.save

    def crashing_save(obj: object, f: object) -> None:
        real({"half": torch.zeros(3)}, f)  # some bytes reach the temporary file, then the process dies
        raise OSError("disk full")

    monkeypatch.setattr(ckmod.torch, "save", crashing_save)
    with pytest.raises(OSError, match="disk full"):
        eng.save(path, {"k": 1})  # type: ignore[arg-type]
    monkeypatch.setattr(ckmod.torch, "save", real)
    assert load_checkpoint(path)["step"] == 0  # type: ignore[arg-type]


def test_non_finite_loss_names_step_and_keeps_checkpoint(tmp_path: Path) -> None:
    """the loss turns NaN at step 4 -> NonFiniteLossError naming step 4 and nan; parameters and the step-3 checkpoint untouched"""
    eng = _engine(_model())
    inner = _step(eng)
    ck = tmp_path / "ck.pt"

    def step(idx: torch.Tensor) -> torch.Tensor:
        loss = inner(idx)
        return loss * float("nan") if eng.step == 3 else loss

    with pytest.raises(NonFiniteLossError, match=r"loss became nan at step 4 \(epoch 1, batch 4\)"):
        eng.fit(_batches, step, epochs=1, on_step=lambda: eng.save(ck, {}))
    state = load_checkpoint(ck)
    assert state["step"] == 3
    for (k, v) in eng.model.state_dict().items():
        assert torch.equal(v, state["model"][k])


def test_epoch_rule_equal_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """23 examples, batch 4, 2 ranks -> 2 equal batches per rank (the partial rest dropped), disjoint, their union = one process's first batch-8 batches; one process keeps its partial batch of >= 2; eval keeps all 23"""
    single = epoch_batches(23, 8, seed=1, epoch=2)
    assert [len(b) for b in single] == [8, 8, 7]  # one process: the partial batch of 7 is kept
    assert [len(b) for b in epoch_batches(17, 8, seed=1, epoch=2)] == [8, 8]  # a partial batch of 1 is no pair
    monkeypatch.setattr(sd, "world_size", lambda: 2)
    parts = []
    for r in (0, 1):
        monkeypatch.setattr(sd, "rank", lambda r=r: r)
        parts.append(epoch_batches(23, 4, seed=1, epoch=2))
    assert [len(b) for p in parts for b in p] == [4] * 4
    for j in range(2):
        assert torch.equal(torch.cat([parts[0][j], parts[1][j]]), single[j])
    assert not set(torch.cat(parts[0]).tolist()) & set(torch.cat(parts[1]).tolist())
    assert not torch.equal(torch.cat(epoch_batches(23, 4, seed=1, epoch=3)), torch.cat(parts[1]))  # a new order per epoch
    with pytest.warns(UserWarning, match="fewer than one batch of 4 x 2"):
        small = epoch_batches(5, 4, seed=0, epoch=0)  # smaller than one batch: one batch of all (2 per rank)
    assert [len(b) for b in small] == [2]
    with pytest.raises(ValueError, match="3 training examples make no contrastive batch"):
        epoch_batches(3, 4, seed=0, epoch=1)
    monkeypatch.undo()
    assert torch.equal(torch.cat(eval_batches(23, 4)), torch.arange(23))


def test_bf16_autocast_on_cpu() -> None:
    """precision bf16 on the CPU -> the step runs under autocast (bf16 activations), parameters stay float32 and move"""
    eng = _engine(_model(0.0), precision="bf16")
    seen = []

    def step(idx: torch.Tensor) -> torch.Tensor:
        z = eng.ddp(X[idx])
        seen.append(z.dtype)
        return z.float().pow(2).mean()

    before = [p.detach().clone() for p in eng.model.parameters()]
    eng.fit(_batches, step, max_steps=2)
    assert seen == [torch.bfloat16] * 2
    assert all(p.dtype == torch.float32 for p in eng.model.parameters())
    assert any(not torch.equal(a, p) for a, p in zip(before, eng.model.parameters()))
    with pytest.raises(ValueError, match="precision must be one of"):
        _engine(_model(), precision="fp8")


def test_fp16_uses_a_grad_scaler() -> None:
    """precision fp16 -> the gradient scaler is on, its state is checkpointed, the step is finite"""
    eng = _engine(_model(0.0), precision="fp16")
    assert eng.scaler.is_enabled()
    eng.fit(_batches, _step(eng), max_steps=1)
    assert eng.state_dict({})["scaler"] is not None and eng.step == 1


def test_accumulation_averages_gradients() -> None:
    """accumulate=2 over two halves of a batch (a per-sample mean loss) -> the same parameters as one step on the batch"""
    def run(acc: int, parts: int) -> list[torch.Tensor]:
        m = _model(0.0)
        eng = Engine(m, torch.optim.SGD(m.parameters(), lr=0.1), device="cpu", accumulate=acc)
        batches = [b for b in torch.arange(16).chunk(parts)]
        eng.fit(lambda ep: batches, lambda idx: eng.ddp(X[idx]).pow(2).mean(), epochs=1)
        assert eng.step == 1
        return [p.detach() for p in m.parameters()]

    for a, b in zip(run(1, 1), run(2, 2)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_grad_clip_bounds_the_update() -> None:
    """grad_clip=0.01 with SGD lr 1 -> the parameter update has L2 norm <= 0.01"""
    m = _model(0.0)
    eng = Engine(m, torch.optim.SGD(m.parameters(), lr=1.0), device="cpu", grad_clip=0.01)
    before = torch.cat([p.detach().flatten().clone() for p in m.parameters()])
    eng.fit(lambda ep: [torch.arange(16)], lambda idx: 100 * eng.ddp(X[idx]).pow(2).mean(), max_steps=1)
    after = torch.cat([p.detach().flatten() for p in m.parameters()])
    assert 0 < float((after - before).norm()) <= 0.01 + 1e-6


def test_bad_device_names() -> None:
    """device 'gpu0' or 'cuda' on a machine without CUDA -> one-line ValueError naming it"""
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is available"):
            resolve_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def _cached(eng: Engine, chunk: int, record: list | None = None):
    def encode(idx: torch.Tensor) -> torch.Tensor:
        z = eng.ddp(X[idx].repeat(2, 1)).view(2, len(idx), -1)  # (2, k, d): two dropout views
        if record is not None:
            record.append(z.detach().clone())
        return z

    def loss(z: torch.Tensor) -> torch.Tensor:  # (2, B, d): a loss that mixes the whole batch
        s = torch.nn.functional.normalize(z[0], dim=-1) @ torch.nn.functional.normalize(z[1], dim=-1).T / 0.1
        return torch.nn.functional.cross_entropy(s, torch.arange(s.shape[0]))

    def step(idx: torch.Tensor):
        if chunk:
            return CachedStep(encode, list(idx.split(chunk)), loss, dim=1)
        return loss(encode(idx))
    return step


def test_grad_cache_equals_full_batch_without_dropout() -> None:
    """3 steps with gradient caching (chunks of 3) vs the full batch, dropout 0 -> same parameters to 1e-5"""
    params = []
    for chunk in (0, 3):
        eng = _engine(_model(0.0))
        eng.fit(_batches, _cached(eng, chunk), max_steps=3)
        params.append(torch.cat([p.detach().flatten() for p in eng.model.parameters()]))
    torch.testing.assert_close(params[0], params[1], rtol=0, atol=1e-5)


def test_grad_cache_replays_dropout() -> None:
    """gradient caching with dropout 0.5 -> each chunk re-encoded with gradients equals its cached embedding exactly (same masks)"""
    eng = _engine(_model(0.5))
    record: list[torch.Tensor] = []
    eng.fit(_batches, _cached(eng, 3, record), max_steps=1)
    first, second = record[:3], record[3:]  # 8 = 3 + 3 + 2 per pass
    assert len(first) == len(second) == 3
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert not torch.equal(first[0][0], first[0][1])  # the two views differ (dropout is on)


def _dist_resume_worker(rank: int, init: str, outdir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        ck = Path(outdir) / "ck.pt"

        def engine(seed: int) -> Engine:
            eng = _engine(_model())
            eng.generators["aug"].manual_seed(seed)  # each rank its own augmentation stream
            torch.manual_seed(seed)  # and its own dropout stream
            return eng

        full = engine(11 + rank)
        full.fit(_batches, _step(full), epochs=3)
        a = engine(11 + rank)

        def on_step() -> None:
            if a.step == 3:
                a.save(ck, {"seed": 3})  # a collective: called on every rank
            if a.step == 4:
                raise _Stop

        try:
            a.fit(_batches, _step(a), epochs=3, on_step=on_step)
        except _Stop:
            pass
        b = engine(999)  # a fresh process: other random states
        b.load(ck, {"seed": 3})
        b.fit(_batches, _step(b), epochs=3)
        same = all(torch.equal(p, q) for p, q in zip(full.model.parameters(), b.model.parameters()))
        torch.save({"same": same, "steps": (full.step, b.step)}, Path(outdir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_distributed_resume_restores_every_ranks_random_state(tmp_path: Path) -> None:
    """2 gloo ranks with their own dropout and augmentation streams, interrupted after step 4 and resumed from the
    step-3 checkpoint -> every rank's parameters equal the uninterrupted run's bit for bit (each rank gets its own
    random state back, not the main rank's); resuming that checkpoint in one process is refused, naming both counts"""
    import torch.multiprocessing as mp

    mp.spawn(_dist_resume_worker, args=(f"file://{tmp_path / 'pg'}", str(tmp_path)), nprocs=2, join=True)
    for r in range(2):
        res = torch.load(tmp_path / f"rank{r}.pt", weights_only=True)
        assert res["same"] and res["steps"] == (6, 6), (r, res)
    state = load_checkpoint(tmp_path / "ck.pt")
    assert len(state["rank_rng"]) == 2
    assert not torch.equal(state["rank_rng"][0]["rng"]["torch"], state["rank_rng"][1]["rng"]["torch"])
    with pytest.raises(ValueError, match=r"written by 2 process\(es\) and is resumed by 1"):
        _engine(_model()).load(tmp_path / "ck.pt", {"seed": 3})


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_compile_equals_eager() -> None:
    """--compile (the forward through torch.compile) -> after 8 steps the same parameters as eager within float32
    tolerance, and checkpoints hold the module's own state (no compiled wrapper's names)"""
    from suite.losses import build

    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(0))

    def trained(compile: bool) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
        loss = build("infonce")
        eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-2), device="cpu", loss=loss, compile=compile)
        eng.fit(lambda ep: epoch_batches(64, 16, 1, ep), lambda idx: loss(eng.ddp(x[idx]), eng.ddp(x[idx] + 0.1)),
                epochs=2)
        assert set(eng.state_dict({})["model"]) == set(model.state_dict())
        return model.state_dict()

    eager, compiled = trained(False), trained(True)
    for k in eager:
        torch.testing.assert_close(compiled[k], eager[k], rtol=1e-5, atol=1e-6)
