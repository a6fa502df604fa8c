"""Resume only what belongs to the run: a checkpoint records its experiment config and a run with
another config refuses it (naming the differing keys); default output folders depend on the config."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from suite.train import ConfigMismatchError, check_resume_config, config_diff
from suite.train.run import runs_root

CORPUS = ["CCO", "CCN", "CCC", "c1ccccc1", "c1ccncc1", "CC(=O)O", "CC(=O)N", "C1CCCCC1", "C1CCNCC1", "c1ccc(O)cc1",
          "c1ccc(N)cc1", "CCOC(=O)C", "CC(C)O", "CC(C)N", "OCCO", "NCCN"]


def test_config_diff_names_nested_keys() -> None:
    """two configs differing in a top-level and a nested key -> both keys reported as old -> new, run options ignored"""
    old = {"loss": "infonce", "seed": 0, "loss_hparams": {"alpha": 0.5}, "device": "cpu"}
    new = {"loss": "macl", "seed": 0, "loss_hparams": {"alpha": 2.0}, "device": "cuda"}
    assert config_diff(old, new, ignore=("device",)) == {"loss": ("infonce", "macl"), "loss_hparams.alpha": (0.5, 2.0)}
    assert config_diff(old, dict(old)) == {}
    with pytest.raises(ConfigMismatchError, match=r"loss: 'infonce' -> 'macl'.*loss_hparams.alpha: 0.5 -> 2.0"):
        check_resume_config("x.pt", old, new, ignore=("device",))


def test_checkpoint_without_config_refused() -> None:
    """resuming a checkpoint that records no config -> refused (it cannot be shown to belong to the run)"""
    with pytest.raises(ConfigMismatchError, match="records no experiment config"):
        check_resume_config("old.pt", None, {"loss": "macl"})


# ----------------------------------------------------------------------------- text

def _text_cfg(model_dir: Path, out: Path, **kw: object):
    from text.methods.simcse import SimCSEConfig

    base = dict(backbone=str(model_dir), pooling="cls", max_length=12, batch_size=16, max_steps=1, eval_every=0,
                eval_batch_size=32, out=str(out), seed=0, loss="infonce")
    base.update(kw)
    return SimCSEConfig(**base)  # type: ignore[arg-type]


def test_text_other_loss_into_same_out_refused(tiny_model_dir: Path, data_env: Path, tmp_path: Path) -> None:
    """`suite text train --loss macl --seed 1` into an --out holding an infonce seed-0 checkpoint -> refused, message names loss and seed"""
    from text.methods.simcse import train_simcse

    out = tmp_path / "out"
    train_simcse(_text_cfg(tiny_model_dir, out))
    assert list((out / "checkpoints").glob("step-*.pt"))
    with pytest.raises(ConfigMismatchError, match=r"loss: 'infonce' -> 'macl'.*seed: 0 -> 1"):
        train_simcse(_text_cfg(tiny_model_dir, out, loss="macl", seed=1))
    # the same config resumes (finished run: no further steps), a run option (device) may change
    s = train_simcse(_text_cfg(tiny_model_dir, out, device="cpu"))
    assert s.steps == 1


def test_text_default_out_depends_on_config(tmp_path: Path) -> None:
    """default --out for two losses / two seeds -> distinct folders; run options (device, resume) do not change it"""
    from suite.train.run import run_folder
    from text.methods.simcse import SimCSEConfig, SimCSETask

    def output_dir(cfg: SimCSEConfig) -> Path:
        task = SimCSETask(cfg)
        return run_folder(cfg, task.name, task.stem(cfg))

    a = output_dir(SimCSEConfig())
    assert a.parent == runs_root() / "simcse-unsup" and a.name.startswith("infonce-s0-")
    assert output_dir(SimCSEConfig(loss="macl")) != a and output_dir(SimCSEConfig(seed=1)) != a
    assert output_dir(SimCSEConfig(device="cpu", resume=False, checkpoint_every=7)) == a
    assert output_dir(SimCSEConfig(out=str(tmp_path))) == tmp_path


# ----------------------------------------------------------------------------- molecules

def _mol_cfg(tmp_path: Path, **kw: object):
    from graph.mol.pretrain import PretrainMolConfig

    corpus = tmp_path / "corpus.csv"
    corpus.write_text("SMILES\n" + "\n".join(CORPUS) + "\n")
    base = dict(corpus=str(corpus), epochs=1, loss="graphcl", registry=False, device="cpu", num_layers=2, emb_dim=8,
                batch_size=8, out=str(tmp_path / "mol"))
    base.update(kw)
    return PretrainMolConfig(**base)  # type: ignore[arg-type]


def test_pretrain_mol_other_loss_refused(tmp_path: Path) -> None:
    """`suite graph pretrain-mol --loss macl` into an --out holding graphcl's checkpoint -> refused naming loss; same config resumes"""
    from graph.mol.pretrain import pretrain

    cfg = _mol_cfg(tmp_path, epochs=2)
    with pytest.raises(KeyboardInterrupt):  # interrupted after epoch 1 (its checkpoint is written)
        pretrain(cfg, stop_after=1)
    with pytest.raises(ConfigMismatchError, match=r"loss: 'graphcl' -> 'macl'"):
        pretrain(dataclasses.replace(cfg, loss="macl"))
    with pytest.raises(ConfigMismatchError, match=r"seed: 0 -> 3"):
        pretrain(dataclasses.replace(cfg, seed=3))
    res = pretrain(dataclasses.replace(cfg, keep_checkpoints=5))  # run option changed: still resumes
    assert res.resumed_from == 1 and [h["epoch"] for h in res.info["history"]] == [1, 2]


def test_pretrain_mol_default_out_depends_on_config() -> None:
    """default pretrain-mol --out for graphcl and macl -> distinct folders named by loss and config hash"""
    from graph.mol.pretrain import MolPretrainTask, PretrainMolConfig
    from suite.train.run import run_folder

    def output_dir(cfg: PretrainMolConfig) -> Path:  # the folder pretrain() uses (the run owner's rule)
        task = MolPretrainTask()
        return run_folder(cfg, task.name, task.stem(cfg))

    a, b = output_dir(PretrainMolConfig()), output_dir(PretrainMolConfig(loss="macl"))
    assert a.parent == runs_root() / "mol-pretrain" == b.parent
    assert a != b and a.name.startswith("graphcl-") and b.name.startswith("macl-")
    assert output_dir(PretrainMolConfig(device="cpu", keep_checkpoints=9)) == a


# ----------------------------------------------------------------------------- vision

def test_vision_run_folder_collision_refused(tmp_path: Path) -> None:
    """`suite vision pretrain --out r` twice with different seeds -> second refused naming seed"""
    from vision.train import pretrain

    cfg = _vision_cfg(tmp_path / "r", epochs=1)
    pretrain(cfg)
    with pytest.raises(ConfigMismatchError, match=r"seed: 0 -> 1"):
        pretrain(dataclasses.replace(cfg, seed=1))


def _vision_cfg(tmp_path: Path | None, **kw: object):
    from vision.config import PretrainConfig

    base = dict(dataset="digits", encoder="convnet", width=4, epochs=2, batch_size=32, max_steps_per_epoch=1,
                optimizer="adam", out=str(tmp_path) if tmp_path else "", registry=False, linear_probe=False,
                geometry_batches=0, train_per_class=5, eval_train_per_class=5, eval_test_per_class=5, seed=0,
                eval_every=0)
    base.update(kw)
    return PretrainConfig(**base)  # type: ignore[arg-type]


def _vision_folder(cfg: Any) -> Path:
    from suite.train.run import run_folder
    from vision.train import PretrainTask

    task = PretrainTask(cfg)
    return run_folder(cfg, task.name, task.stem(cfg))


@pytest.mark.parametrize("change", [{"device": "cpu"}, {"checkpoint_every": 2}])
def test_vision_resume_across_a_changed_run_option(tmp_path: Path, change: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """`suite vision pretrain` (default run folder) interrupted after epoch 1, restarted with another --device or
    --checkpoint-every -> resumes the interrupted run (same folder, from epoch 1), not a fresh one"""
    from vision.train import pretrain

    monkeypatch.setenv("SUITE_RUNS", str(tmp_path / "runs"))
    cfg = _vision_cfg(None, device="auto", checkpoint_every=1)
    assert _vision_folder(dataclasses.replace(cfg, **change)) == _vision_folder(cfg)

    with pytest.raises(KeyboardInterrupt):  # interrupted after epoch 1 (its checkpoint is written)
        pretrain(cfg, stop_after=1)
    res = pretrain(dataclasses.replace(cfg, **change))
    assert res.resumed_from == 1 and res.folder == _vision_folder(cfg)
    assert [p.name for p in (tmp_path / "runs" / "pretrain-simclr").iterdir()] == [_vision_folder(cfg).name]


def test_vision_default_run_folder_ignores_every_run_option() -> None:
    """the default vision run folder for configs differing only in run options (RUN_OPTIONS: device, eval_every,
    checkpoint_every, registry, ...) -> one folder; an experiment field (seed, lr) -> another"""
    from vision.config import PretrainConfig

    cfg = _vision_cfg(None, proj_dim=2)  # points (a run option) needs 2-D projections
    for k in PretrainConfig.RUN_OPTIONS:
        if k == "out":
            continue
        v = getattr(cfg, k)
        other = {"device": "cuda", "eval_every": 7, "checkpoint_every": 3, "keep_checkpoints": 5,
                 "points": 10}.get(k, (not v) if isinstance(v, bool) else v)
        assert _vision_folder(dataclasses.replace(cfg, **{k: other})) == _vision_folder(cfg), k
    assert _vision_folder(dataclasses.replace(cfg, seed=1)) != _vision_folder(cfg)
    assert _vision_folder(dataclasses.replace(cfg, lr=0.5)) != _vision_folder(cfg)


@pytest.mark.parametrize("old", ["experiment-hash", "oldest"])
def test_vision_run_in_a_folder_of_the_old_layout_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          old: str) -> None:
    """a vision run interrupted under an older layout (runs/vision/<stem>-<hash>/epoch<N>.pt, the hash of the
    experiment config, or before that of a hand-written field list) -> a restart resumes its newest checkpoint (and
    writes its next ones in the run owner's layout); with resume off it starts afresh"""
    from suite.config import experiment_hash, to_dict
    from suite.registry import config_hash
    from vision.train import _name_stem, pretrain

    monkeypatch.chdir(tmp_path)  # the older layout's root: runs/vision in the working folder
    monkeypatch.setenv("SUITE_RUNS", str(tmp_path / "runs"))
    cfg = _vision_cfg(None, checkpoint_every=1)

    with pytest.raises(KeyboardInterrupt):  # interrupted after epoch 1 (its checkpoint is written)
        pretrain(cfg, stop_after=1)
    folder = _vision_folder(cfg)
    ckpt = next((folder / "checkpoints").glob("step-*.pt"))
    # the oldest naming hashed every field but resume, registry, eval_every and the folder, under the names of then
    oldest = config_hash({**{k: v for k, v in to_dict(cfg).items() if k not in (
        "resume", "registry", "eval_every", "out", "checkpoint_every", "keep_checkpoints")},
        "run_name": "", "ckpt_every": cfg.checkpoint_every})[:8]
    legacy = Path("runs/vision") / f"{_name_stem(cfg)}-{experiment_hash(cfg) if old == 'experiment-hash' else oldest}"
    legacy.mkdir(parents=True)
    ckpt.rename(legacy / "epoch0001.pt")
    shutil.rmtree(folder)
    assert pretrain(cfg).resumed_from == 1
    assert pretrain(dataclasses.replace(cfg, resume=False, out="fresh")).resumed_from == 0
