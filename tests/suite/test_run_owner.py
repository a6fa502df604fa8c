"""The run owner (suite/train/run.py): a toy front-end of a few lines gets seeding, the output folder, checkpoints,
config-checked resume, the registry row and the export without writing any of them."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

from suite.losses import build as build_loss
from suite.pretrained import load_pretrained, load_state
from suite.registry import Registry
from suite.train import ConfigMismatchError
from suite.train.run import Checkpoints, Task, Training, derive_seed, run, run_folder


# ----------------------------------------------------------------------------- the toy front-end

@dataclass
class ToyConfig:
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every", "keep_checkpoints", "registry")
    dataset: str = "gauss"
    loss: str = "infonce"
    lr: float = 0.1
    epochs: int = 4
    seed: int = 0
    out: str = ""
    device: str = "auto"
    checkpoint_every: int = 1
    keep_checkpoints: int = 2
    registry: bool = True


class _Interrupt(KeyboardInterrupt):
    pass


class Toy(Task[ToyConfig]):
    modality, name, primary, model_type = "toy", "toy-contrastive", ("alignment", "test"), "toy_linear"

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at = stop_at  # raise an interruption after this epoch (its checkpoint is not written)

    def build(self, cfg: ToyConfig, ctx: Any) -> Training:
        self.x = torch.randn(64, 8, generator=ctx.generator("data", per_rank=False))
        noise = ctx.generator("views")
        model, loss = nn.Linear(8, 4), build_loss(cfg.loss)

        def step(idx: torch.Tensor) -> torch.Tensor:
            x = self.x[idx]
            return loss(model(x + 0.1 * torch.randn(x.shape, generator=noise)), model(x + 0.1 * torch.randn(x.shape, generator=noise)))

        return Training(model, torch.optim.SGD(model.parameters(), lr=cfg.lr), lambda ep: ctx.epoch_batches(64, 16, ep),
                        step, epochs=cfg.epochs, loss=loss, data_info={"examples": 64})

    def on_epoch(self, cfg: ToyConfig, ctx: Any, training: Training, epoch: int, stats: dict[str, float]) -> None:
        if epoch == self.stop_at:
            raise _Interrupt

    def evaluate(self, cfg: ToyConfig, ctx: Any, training: Training) -> dict[str, float]:
        with torch.no_grad():
            z = nn.functional.normalize(training.model(self.x), dim=-1)
            return {"alignment": float((z[:-1] * z[1:]).sum(-1).mean())}

    def export_config(self, cfg: ToyConfig, training: Training) -> dict[str, Any]:
        return {"in_dim": 8, "out_dim": 4}


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    return Registry(str(tmp_path / "r.sqlite"))


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    _, state = load_pretrained(folder / "export", "toy_linear")
    return state


# ----------------------------------------------------------------------------- tests

def test_a_toy_front_end_gets_a_recorded_checkpointed_exported_run(tmp_path: Path, reg: Registry) -> None:
    """run(task, cfg): one registry row (finished, headline set, train stats and evaluation logged), the newest
    keep_checkpoints checkpoints, and an export loadable by the module's own class"""
    cfg = ToyConfig(out=str(tmp_path / "toy"))
    res = run(Toy(), cfg, registry=reg)
    row = reg.get(res.run_id)  # type: ignore[arg-type]
    assert (row["status"], row["modality"], row["task"], row["loss"]) == ("finished", "toy", "toy-contrastive", "infonce")
    assert (row["primary_metric"], row["primary_split"]) == ("alignment", "test")
    names = {(m["name"], m["split"]) for m in reg.metrics(res.run_id)}
    assert {("loss", "train"), ("alignment", "test"), ("examples", "data")} <= names
    assert json.loads(row["config"])["lr"] == 0.1 and "out" not in json.loads(row["config"])
    cks = Checkpoints(res.folder / "checkpoints").all()
    assert [p.name for p in cks] == ["step-000000012.pt", "step-000000016.pt"]  # 4 batches an epoch, 2 kept
    model = load_state(nn.Linear(8, 4), _weights(res.folder), res.folder)
    with torch.no_grad():
        z = nn.functional.normalize(model(_x(cfg)), dim=-1)
    assert res.metrics["alignment"] == pytest.approx(float((z[:-1] * z[1:]).sum(-1).mean()), abs=1e-6)


def _x(cfg: ToyConfig) -> torch.Tensor:
    from suite.train.run import seeded_generator

    return torch.randn(64, 8, generator=seeded_generator(cfg.seed, stream="data"))


def test_interrupted_run_resumes_across_changed_run_options_bit_identically(tmp_path: Path, reg: Registry) -> None:
    """a run interrupted after epoch 3, restarted with another device spelling and checkpoint interval -> resumes its
    folder and its registry row, and ends with the uninterrupted run's weights exactly"""
    full = run(Toy(), ToyConfig(out=str(tmp_path / "full")), registry=reg)
    cfg = ToyConfig()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        with pytest.raises(_Interrupt):
            run(Toy(stop_at=3), cfg, registry=reg)
        (first,) = [r for r in reg.runs() if r["status"] == "interrupted"]
        again = run(Toy(), replace(cfg, device="cpu", checkpoint_every=2), registry=reg)
        assert again.folder == run_folder(cfg, "toy-contrastive", Toy().stem(cfg))
        assert (again.resumed_from, again.run_id) == (2, first["id"])  # epoch 3's checkpoint was never written
        assert reg.get(first["id"])["status"] == "finished"
        for k, v in _weights(full.folder).items():
            assert torch.equal(v, _weights(tmp_path / again.folder)[k]), k


def test_a_field_that_changes_results_starts_a_new_run(tmp_path: Path, reg: Registry) -> None:
    """another learning rate -> another folder and a fresh run (resumed from epoch 0); pointing it at the first run's
    folder is refused naming the key"""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        a = run(Toy(), ToyConfig(epochs=2), registry=reg)
        b = run(Toy(), ToyConfig(epochs=2, lr=0.05), registry=reg)
        assert a.folder != b.folder and b.resumed_from == 0 and a.run_id != b.run_id
        with pytest.raises(ConfigMismatchError, match=r"lr: 0.1 -> 0.05"):
            run(Toy(), ToyConfig(epochs=2, lr=0.05, out=str(a.folder)), registry=reg)


def test_seed_derivation_is_one_function_of_seed_rank_epoch_stream() -> None:
    """derive_seed: distinct (seed, rank, epoch, stream) give distinct seeds (no seed + 1 collisions), the same give
    the same; a negative or non-integer seed is refused"""
    seen = {derive_seed(s, rank=r, epoch=e, stream=st) for s in range(3) for r in range(3) for e in range(3)
            for st in ("main", "data", "views")}
    assert len(seen) == 81 and all(0 <= v < 2**32 for v in seen)
    assert derive_seed(1) != derive_seed(0, rank=1) and derive_seed(4, stream="x") == derive_seed(4, stream="x")
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="seed must be an integer"):
            derive_seed(bad)  # type: ignore[arg-type]


def test_checkpoints_are_pruned_and_can_all_go(tmp_path: Path, reg: Registry) -> None:
    """keep_checkpoints 0 -> no checkpoint is left once the run has finished (the export stays); a bad keep is refused"""
    res = run(Toy(), ToyConfig(epochs=2, keep_checkpoints=0, out=str(tmp_path / "t")), registry=reg)
    assert Checkpoints(res.folder / "checkpoints").all() == [] and (res.folder / "export" / "model.safetensors").is_file()
    with pytest.raises(ValueError, match="keep_checkpoints must be an integer >= 0"):
        Checkpoints(tmp_path, keep=-1)


@dataclass
class _FromEncoder(ToyConfig):
    init: str = ""  # an exported model the run reads (the toy does not use it; the run owner records it)


def test_a_finished_run_is_not_reused_once_its_input_has_other_files(tmp_path: Path, reg: Registry,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """run(..., reuse=True) of a config whose init names an exported encoder: the row records the encoder's folder,
    run and files; the same command again is reused; the encoder made again with other weights (another lr) -> the
    command trains again from the beginning (it was reused before; its checkpoint, trained from the old encoder, is
    removed with one line saying so, not resumed), and its new row records the new files"""
    from suite.inputs import files_digest

    enc = tmp_path / "enc"
    first_enc = run(Toy(), ToyConfig(out=str(enc)), registry=reg)
    cfg = _FromEncoder(init=str(enc), out=str(tmp_path / "use"), epochs=1)
    a = run(Toy(), cfg, registry=reg, reuse=True)
    read = json.loads(reg.get(a.run_id)["run_options"])["inputs"]  # type: ignore[arg-type]
    assert read == {"init": {"path": str(enc), "run_id": first_enc.run_id, "files": files_digest(enc / "export")}}
    assert run(Toy(), cfg, registry=reg, reuse=True).reused == a.run_id
    old = files_digest(enc / "export")
    import shutil

    shutil.rmtree(enc)
    run(Toy(), ToyConfig(out=str(enc), lr=0.2), registry=reg)
    assert files_digest(enc / "export") != old
    capsys.readouterr()
    b = run(Toy(), cfg, registry=reg, reuse=True)
    assert b.reused is None and b.run_id != a.run_id
    assert "checkpoints were trained from other files of init than those there now; 1 removed" in capsys.readouterr().out
    assert [m["step"] for m in reg.metrics(b.run_id, name="loss") if m["split"] == "train"] == [1]  # trained its one epoch, not resumed after it
    assert json.loads(reg.get(b.run_id)["run_options"])["inputs"]["init"]["files"] == files_digest(enc / "export")  # type: ignore[arg-type]
    assert run(Toy(), cfg, registry=reg, reuse=True).reused == b.run_id
