"""No host read per training step (issue 47): the engine keeps the loss, the losses' diagnostics and their input checks
on the device and reads them every ``log_every`` steps and at an epoch's end. Counted on the CPU by patching every way a
tensor reaches the host (``item``, ``float``, ``int``, ``bool``, ``tolist``, ``cpu``, ``numpy``), so the property holds
where there is no GPU."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from suite.losses import build as build_loss
from suite.train import Engine, NonFiniteLossError, epoch_batches, load_checkpoint

READS = ("item", "__float__", "__int__", "__bool__", "__index__", "tolist", "cpu", "numpy")


@pytest.fixture()
def host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every host read of a tensor while the fixture is active, by name."""
    seen: list[str] = []
    for name in READS:
        real = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *a: Any, _real: Callable[..., Any] = real, _name: str = name, **k: Any) -> Any:
            seen.append(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, counted)
    yield seen


X = torch.randn(96, 6, generator=torch.Generator().manual_seed(0))
LABELS = torch.arange(96) % 4


def _inputs(name: str, idx: torch.Tensor, z: Callable[[torch.Tensor], torch.Tensor]) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    x = X[idx]
    a, b = z(x), z(x + 0.1)
    loss = build_loss(name)
    extra: dict[str, torch.Tensor] = {}
    if "labels" in loss.requires:
        extra["labels"] = LABELS[idx]
    if "similarity" in loss.requires:
        extra["similarity"] = (LABELS[idx][:, None] == LABELS[idx][None, :]).float()
    if getattr(loss, "multi_view", False):
        return (torch.stack([a, b, z(x - 0.1)]),), extra
    return (a, b), extra


def _train(name: str, fused: bool, log_every: int, epochs: int = 2) -> Engine:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
    loss = build_loss(name)
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused), device="cpu", loss=loss,
                 log_every=log_every)

    def step(idx: torch.Tensor) -> torch.Tensor:
        args, extra = _inputs(name, idx, eng.ddp)
        return loss(*args, **extra)

    eng.fit(lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep), step, epochs=epochs)
    return eng


# the loss that still chooses an exact path from its inputs' magnitude (one read a call): see docs/gpu.md (-l2 SimCLR's
# rescale is a device power of two since issue 78)
PATH_READS = {"tsimclr": 1}


@pytest.mark.parametrize("name", ["infonce", "dcl", "macl", "supcon", "xclr", "hard_negative", "align_uniform",
                                  "cacr", "cmc", "uaur", "tsimclr", "simclr_l2"])
def test_a_step_reads_the_host_only_at_the_logging_interval(name: str, host_reads: list[str]) -> None:
    """24 steps (2 epochs of 12), log_every 5, fused Adam -> at most 4 + 2 reads of the interval and the epochs' ends
    and 2 of the epochs' means; the old engine read 3 to 6 times every step (the loss, its diagnostics, the checks)"""
    eng = _train(name, fused=True, log_every=5)
    steps = eng.step
    assert steps == 24
    allowed = math.ceil(steps / 5) + 2 * 2 + PATH_READS.get(name, 0) * steps
    assert len(host_reads) <= allowed, (name, len(host_reads), sorted(set(host_reads)))
    assert eng.host_reads <= math.ceil(steps / 5) + 2


def test_an_optimiser_that_cannot_skip_on_the_device_is_guarded_by_a_read_per_step(host_reads: list[str]) -> None:
    """plain (unfused) Adam -> one read of the engine per step, before its update: the update of a non-finite loss is
    never made"""
    eng = _train("infonce", fused=False, log_every=50, epochs=1)
    assert not eng.skips_on_device
    assert eng.host_reads >= eng.step


@pytest.mark.parametrize("fused, bad", [(True, "nan"), (True, "inf"), (False, "nan")])
def test_non_finite_loss_is_named_and_never_stepped_between_reads(fused: bool, bad: str, tmp_path: Any) -> None:
    """the loss turns NaN (or inf) at step 4 of 12, log_every 50 (no read until the epoch ends, fused) ->
    NonFiniteLossError naming step 4; the parameters equal the step-3 checkpoint's: no update from step 4 on was made"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
    loss = build_loss("infonce")
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused), device="cpu", loss=loss, log_every=50)
    ck = tmp_path / "ck.pt"

    def step(idx: torch.Tensor) -> torch.Tensor:
        value = loss(eng.ddp(X[idx]), eng.ddp(X[idx] + 0.1))
        return value * float(bad) if eng.step == 3 else value

    def on_step() -> None:
        if eng.step == 3:
            eng.save(ck, {})

    with pytest.raises(NonFiniteLossError, match=rf"loss became {bad} at step 4 \(epoch 1, batch 4\)"):
        eng.fit(lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep), step, epochs=1, on_step=on_step)
    assert eng.step == (12 if fused else 3)  # fused: the later steps ran, their updates skipped on the device
    state = load_checkpoint(ck)
    for k, v in model.state_dict().items():
        assert torch.equal(v, state["model"][k]), k


class _Ops(TorchDispatchMode):
    """The operators dispatched inside it, by name (on a GPU, most of them a kernel launch and host time)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    @property
    def n(self) -> int:
        return len(self.seen)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen.append(func.__name__)
        return func(*args, **(kwargs or {}))


def test_the_engine_adds_few_operators_to_a_step() -> None:
    """8 steps through the engine (fused Adam, no accumulation) against the same 8 steps written by hand -> at most 8
    more operators a step: the loss kept for the read (detach, view), its non-finite flag made and kept sticky (sub,
    ne_, maximum), fused Adam's skip of a flagged step (one _foreach_sub_), the read's stack once an interval. The
    engine made 14 before the flag took isfinite's place and the loss stopped being divided by an accumulation of 1."""

    def make() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
        return model, torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)

    model, opt = make()
    eng = Engine(model, opt, device="cpu", log_every=1000)
    batches = lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep)  # noqa: E731
    step = lambda idx: eng.ddp(X[idx]).pow(2).mean()  # noqa: E731
    eng.fit(batches, step, max_steps=2)
    engine_ops = _Ops()
    with engine_ops:
        eng.fit(batches, step, max_steps=10)
    hand_model, hand_opt = make()

    def by_hand(idx: torch.Tensor) -> None:
        loss = hand_model(X[idx]).pow(2).mean()
        hand_opt.zero_grad(set_to_none=True)
        loss.backward()
        hand_opt.step()

    for b in batches(0)[:2]:
        by_hand(b)
    hand_ops = _Ops()
    with hand_ops:
        for b in batches(0)[2:10]:
            by_hand(b)
    assert hand_ops.n > 0 and engine_ops.n - hand_ops.n <= 8 * 8, (engine_ops.n, hand_ops.n)
    for p, q in zip(model.parameters(), hand_model.parameters()):  # the same steps, the same parameters
        assert torch.equal(p, q)


def test_a_failed_input_check_is_named_at_the_next_read() -> None:
    """a zero embedding at step 2 (the cosine of a zero vector is undefined) -> the loss's ValueError, named with its
    step at the epoch's read, not a silent wrong loss"""
    torch.manual_seed(0)
    model = nn.Linear(6, 8)
    loss = build_loss("infonce")
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-3, fused=True), device="cpu", loss=loss)

    def step(idx: torch.Tensor) -> torch.Tensor:
        z = eng.ddp(X[idx])
        if eng.step == 1:
            z = z * torch.cat([torch.zeros(1, 1), torch.ones(len(idx) - 1, 1)])
        return loss(z, eng.ddp(X[idx] + 0.1))

    with pytest.raises(ValueError, match=r"zero vectors.*step 2 \(epoch 1, batch 2\)"):
        eng.fit(lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep), step, epochs=1)


def test_epoch_stats_equal_the_per_step_values() -> None:
    """the epoch's loss mean read once from the device equals the mean of the per-step losses"""
    torch.manual_seed(0)
    model = nn.Linear(6, 8)
    loss = build_loss("macl")
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-3, fused=True), device="cpu", loss=loss)
    seen: list[float] = []
    taus: list[float] = []

    def step(idx: torch.Tensor) -> torch.Tensor:
        v = loss(eng.ddp(X[idx]), eng.ddp(X[idx] + 0.1))
        seen.append(float(v.detach()))
        taus.append(float(loss.tau_a))
        return v

    got: dict[str, float] = {}
    eng.fit(lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep), step, epochs=1,
            on_epoch=lambda ep, stats: got.update(stats))
    assert got["loss"] == pytest.approx(sum(seen) / len(seen), rel=1e-6)
    assert got["tau"] == pytest.approx(sum(taus) / len(taus), rel=1e-6)


def _collated_run(workers: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.2), nn.Linear(16, 8))
    loss = build_loss("infonce")
    eng = Engine(model, torch.optim.Adam(model.parameters(), lr=1e-2), device="cpu", loss=loss)

    def step(b: dict[str, torch.Tensor]) -> torch.Tensor:
        return loss(eng.ddp(b["x"]), eng.ddp(b["x"] + 0.1))

    eng.fit(lambda ep: epoch_batches(len(X), 8, seed=1, epoch=ep), step, epochs=2,
            collate=lambda idx: {"x": X[idx].clone()}, workers=workers)
    return model.state_dict(), torch.get_rng_state()


def test_collating_in_workers_changes_nothing() -> None:
    """the host's part of a step (collate) in 2 DataLoader workers ahead of the step -> the same parameters bit for bit
    and the same global random state (dropout) as collating in the training process"""
    here, rng_here = _collated_run(0)
    there, rng_there = _collated_run(2)
    assert torch.equal(rng_here, rng_there)
    for k in here:
        assert torch.equal(here[k], there[k]), k


# ops whose output's size (or a Python value) depends on the tensors' values: on a GPU each waits for the device,
# unseen by the reads counted above (they happen in C++)
WAITS = {"unique", "_unique", "_unique2", "unique_dim", "unique_consecutive", "nonzero", "nonzero_static",
         "masked_select", "bincount", "repeat_interleave", "_local_scalar_dense", "is_nonzero", "equal"}
# where a wait is the design: t-SimCLR chooses float64 from its inputs' magnitude (PATH_READS)
EXPECTED_WAITS = {"tsimclr-dense"}


def test_no_dense_loss_call_waits_for_the_device() -> None:
    """Every loss's dense path (what a GPU runs up to 2N = 8,192), forward and backward at 2N = 64 as the engine calls
    it (checks deferred): no op that waits for the device but where EXPECTED_WAITS says why. SupCon's dense path
    counted its classes with torch.unique and bincount: two waits a call, each for a training step's whole encoder
    forward. (The tiled paths wait where it is cheap beside their work: the PyTorch tiles read whether their incoming
    gradient is uniform, once a backward; SupCon's tiles count their classes. On a GPU the fused kernels replace the
    PyTorch tiles.)"""
    from benchmarks.measurements.gpu_bench import loss_cases
    from suite.losses.checks import DeferredChecks, deferred

    waits = {}
    for name, (fn, _, _) in loss_cases(64, torch.device("cpu")).items():
        if not name.endswith("-dense"):
            continue
        with _Ops() as ops, deferred(DeferredChecks()):
            fn().backward()
        seen = [op for op in ops.seen if op.split(".")[0] in WAITS]
        if seen:
            waits[name] = seen
    assert set(waits) == EXPECTED_WAITS, waits
