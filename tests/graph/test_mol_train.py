"""Molecular GIN, pretraining resume equality, and the end-to-end pretrain -> finetune path (tiny)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
import torch

from graph.mol.data import featurize
from graph.mol.model import load_mol_encoder as load_encoder
from graph.mol.pretrain import PretrainMolConfig, pretrain
from suite.presets import make_loss
from graph.mol.model import MolGIN, MolPredictor

CORPUS = ["CCO", "CCN", "CCC", "c1ccccc1", "c1ccncc1", "CC(=O)O", "CC(=O)N", "C1CCCCC1", "C1CCNCC1", "c1ccc(O)cc1",
          "c1ccc(N)cc1", "CCOC(=O)C", "CC(C)O", "CC(C)N", "OCCO", "NCCN", "c1ccsc1", "c1ccoc1", "C1CCOC1", "CC#N",
          "c1ccc2ccccc2c1", "CC(=O)Oc1ccccc1C(=O)O", "CN1CCCC1", "OC(=O)CCC(=O)O", "c1cnc2ccccc2c1", "CCCCCC",
          "CCCCO", "CCCCN", "c1ccc(Cl)cc1", "c1ccc(F)cc1", "BrCCBr", "ClCCl", "CS(=O)C", "CC(C)(C)O", "C=CC=C",
          "C1=CCCCC1", "NC(=O)N", "c1ccccc1C", "c1ccccc1CC", "O=C1CCCC1"]
TINY = dict(num_layers=2, emb_dim=16, batch_size=8)


def test_gin_shapes_and_dropout_modes() -> None:
    g = featurize(CORPUS[:5])
    b = g.batch(torch.arange(5))
    enc = MolGIN(num_layers=3, dim=8, dropout=0.5)
    assert enc(b.x, b.edge_index, b.edge_attr).shape == (b.x.shape[0], 8)
    assert enc.embed(b).shape == (5, 8)
    assert MolPredictor(enc, 3)(b).shape == (5, 3)
    assert enc.embed(b.to_pyg()).shape == (5, 8)  # PyG batches work too
    with pytest.raises(ValueError, match="categorical features"):
        enc(b.x[:, :1], b.edge_index, b.edge_attr)
    from graph.mol.data import get_featurizer

    ogb = featurize(CORPUS[:5], "ogb").batch(torch.arange(5))
    assert MolGIN(num_layers=2, dim=8, featurizer=get_featurizer("ogb")).embed(ogb).shape == (5, 8)


def test_loss_presets() -> None:
    def build_loss(name: str) -> tuple[str, object]:
        built = make_loss("graph_transfer", name, aliases=False)
        return built.name, built.loss

    name, loss = build_loss("graphcl")
    assert name == "dcl" and loss.temperature == 0.1 and loss.negatives == "cross" and not loss.symmetric
    name, loss = build_loss("macl")
    assert (loss.tau0, loss.alpha, loss.a0) == (0.1, 0.5, 0.0)
    assert build_loss("cacr")[0] == "cacr"
    with pytest.raises(ValueError, match="unknown loss"):
        build_loss("nope")


def _corpus(tmp_path: Path) -> Path:
    p = tmp_path / "corpus.csv"
    p.write_text("SMILES\n" + "\n".join(CORPUS) + "\n")
    return p


def test_resume_gives_identical_result(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    base = dict(corpus=str(corpus), epochs=3, loss="macl", registry=False, keep_checkpoints=0, device="cpu", **TINY)
    full = pretrain(PretrainMolConfig(out=str(tmp_path / "a"), **base))
    with pytest.raises(KeyboardInterrupt):  # interrupted after epoch 1 (its checkpoint is written)
        pretrain(PretrainMolConfig(out=str(tmp_path / "b"), **base), stop_after=1)
    # a fresh process state: scramble the global RNGs before resuming
    torch.manual_seed(1234)
    torch.rand(10)
    resumed = pretrain(PretrainMolConfig(out=str(tmp_path / "b"), **base))
    assert resumed.resumed_from == 1 and resumed.epochs == 3
    assert [h["loss"] for h in resumed.info["history"]] == [h["loss"] for h in full.info["history"]]
    ea, _ = load_encoder(tmp_path / "a")
    eb, _ = load_encoder(tmp_path / "b")
    for (k, va), (_, vb) in zip(ea.state_dict().items(), eb.state_dict().items()):
        assert torch.equal(va, vb), k


def test_end_to_end_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from graph.mol.cli import register_mol

    corpus = _corpus(tmp_path)
    rows = "".join(f"{i},m{i},{int('O' in s or 'N' in s)},{s}\n" for i, s in enumerate(CORPUS * 2))
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + rows)
    parser = argparse.ArgumentParser()
    register_mol(parser.add_subparsers())
    tiny = ["--num-layers", "2", "--emb-dim", "16", "--device", "cpu"]
    a = parser.parse_args(["pretrain-mol", "--corpus", str(corpus), "--loss", "graphcl", "--epochs", "1",
                           "--batch-size", "16", "--out", str(tmp_path / "ckpt"), *tiny])
    assert a.func(a) == 0
    assert "pretrained graphcl" in capsys.readouterr().out  # the preset's name, not its underlying dcl
    for seed in ("0", "1"):
        f = parser.parse_args(["finetune-mol", "--dataset", "bbbp", "--data-root", str(tmp_path), "--init",
                               str(tmp_path / "ckpt"), "--seed", seed, "--epochs", "2", "--split", "random",
                               "--batch-size", "16", *tiny])
        assert f.func(f) == 0
        out = capsys.readouterr().out
        assert f"bbbp (graphcl) seed {seed}" in out and "best-valid" in out
    from graph.mol.finetune import FinetuneMolConfig, finetune

    res = finetune(FinetuneMolConfig(dataset="bbbp", data_root=str(tmp_path), init="none", seed=0, epochs=2,
                                     split="random", batch_size=16, num_layers=2, emb_dim=16, device="cpu"))
    r = res.info
    assert r["loss"] == "none" and 1 <= r["best_epoch"] <= 2
    assert all(0.0 <= r[k] <= 1.0 for k in ("test_rocauc_last", "test_rocauc_bestval")) or math.isnan(r["test_rocauc_last"])
    from suite.registry import Registry

    runs = Registry().runs(task="molnet-finetune", dataset="bbbp")
    assert len(runs) >= 3 and all(x["status"] == "finished" for x in runs)
    losses = [x["loss"] for x in runs]
    assert losses.count("graphcl") >= 2 and "dcl" not in losses  # the 2 seeds from the GraphCL encoder
    # each records the weights it started from: the encoder's digest, the same for both seeds
    from graph.mol.model import weights_digest

    enc, _ = load_encoder(str(tmp_path / "ckpt"))
    specs = [json.loads(x["config"])["init_spec"] for x in runs if x["loss"] == "graphcl"]
    assert {s["weights"] for s in specs} == {weights_digest(enc.state_dict())}
    # ... and, as every run that reads an exported model, the folder's files and the run that made them
    from suite.inputs import files_digest

    pre = Registry().runs(task="mol-pretrain")[-1]
    read = [json.loads(x["run_options"])["inputs"] for x in runs if x["loss"] == "graphcl"]
    assert read == [{"init": {"path": str(tmp_path / "ckpt"), "run_id": pre["id"],
                              "files": files_digest(tmp_path / "ckpt" / "export")}}] * 2
    assert "inputs" not in json.loads(pre["run_options"])  # its own folder is no input
    assert all("inputs" not in json.loads(x["run_options"]) for x in runs if x["loss"] == "none")
    changed = {k: v.clone() for k, v in enc.state_dict().items()}
    first = sorted(changed)[0]
    changed[first].view(-1)[0] += 1e-6
    assert weights_digest(changed) != weights_digest(enc.state_dict())


def test_finetune_max_steps_caps_training(tmp_path: Path) -> None:
    """The cpu profile's step cap: training stops after max_steps optimiser steps, mid-epoch, and the cut
    epoch is evaluated as the last one; without a cap every epoch runs."""
    from graph.mol.finetune import FinetuneMolConfig, finetune

    rows = "".join(f"{i},m{i},{int('O' in s or 'N' in s)},{s}\n" for i, s in enumerate(CORPUS * 2))
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + rows)
    base = dict(dataset="bbbp", data_root=str(tmp_path), init="none", seed=0, epochs=4, split="random",
                batch_size=8, num_layers=2, emb_dim=16, device="cpu", registry=False)
    per_epoch = len(CORPUS * 2) * 8 // 10 // 8  # 64 training molecules -> 8 steps per epoch
    capped = finetune(FinetuneMolConfig(max_steps=per_epoch + 3, **base))
    assert capped.steps == per_epoch + 3 and capped.info["epochs_run"] == 2
    assert 1 <= capped.info["best_epoch"] <= 2
    full = finetune(FinetuneMolConfig(**base))
    assert full.steps == 4 * per_epoch and full.info["epochs_run"] == 4
    with pytest.raises(ValueError, match="max_steps"):
        finetune(FinetuneMolConfig(max_steps=0, **base))
