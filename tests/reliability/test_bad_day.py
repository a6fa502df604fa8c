"""More bad days: a full disk, a data root that is a file, two runners on overlapping grids, an empty split."""
from __future__ import annotations

import errno
import sys
import threading

import pytest
import torch
import yaml

from benchmarks.runner.suitefile import load_suite
from benchmarks.runner.plan import Runner
from suite.registry import Registry
from suite.train import load_checkpoint, save_checkpoint


def test_disk_full_while_writing_a_checkpoint(tmp_path, monkeypatch):
    """the disk fills while a checkpoint is written -> one error naming the file; the previous checkpoint and no temp file remain"""
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"step": 1, "w": torch.ones(3)})

    def full(obj, f, *a, **k):
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(OSError, match=r"(?i)could not write checkpoint .*ckpt.pt: No space left on device"):
        save_checkpoint(path, {"step": 2, "w": torch.zeros(3)})
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    assert not (tmp_path / "ckpt.pt.tmp").exists()


def test_data_root_that_is_a_file(tmp_path, monkeypatch):
    """SUITE_DATA pointing at a file -> ValueError naming it, not a 'not found' for every data set"""
    f = tmp_path / "datasets"
    f.write_text("not a folder")
    monkeypatch.setenv("SUITE_DATA", str(f))
    from suite.paths import data_path

    with pytest.raises(ValueError, match=r"SUITE_DATA=.*datasets is a file"):
        data_path("TU", "MUTAG")


class _SleepRunner(Runner):
    def command(self, job):
        return [sys.executable, "-c", "import time; time.sleep(0.2)"]


def test_two_runners_on_overlapping_grids(tmp_path):
    """two runners on one registry with overlapping grids at the same time -> every job runs exactly once"""
    def suite(name, datasets):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump({"name": name, "jobs": [{"frontend": "graph", "command": "tu", "seeds": [0, 1],
                                                              "grid": {"dataset": datasets}}]}))
        return load_suite(p)[1]

    a, b = suite("a", ["MUTAG", "PROTEINS", "NCI1"]), suite("b", ["PROTEINS", "NCI1", "DD"])
    db = str(tmp_path / "r.sqlite")
    counts = []

    def go(jobs, logs):
        counts.append(_SleepRunner(db, jobs=2, log_dir=tmp_path / logs).run(jobs))

    ts = [threading.Thread(target=go, args=(a, "la")), threading.Thread(target=go, args=(b, "lb"))]
    [t.start() for t in ts]
    [t.join(timeout=120) for t in ts]
    union = {j.hash for j in a + b}
    reg = Registry(db)
    assert all(reg.job_status(h) == "finished" for h in union)
    ran = sum(c.get("finished", 0) for c in counts)
    assert ran == len(union), counts  # the 4 shared jobs ran once, by one runner


def test_empty_split_after_scaffolding():
    """a MoleculeNet set too small for its scaffold split (a part ends up empty) -> ValueError naming the sizes"""
    from graph.mol.splits import scaffold_split

    smiles = ["c1ccccc1", "c1ccccc1C", "c1ccccc1CC", "C1CCCCC1"]  # two scaffold sets: nothing left for test
    with pytest.raises(ValueError, match=r"left (valid|test) empty"):
        scaffold_split(smiles)


def test_single_class_split_does_not_crash_finetuning(tmp_path, monkeypatch):
    """a MoleculeNet split whose labels are all one class (ROC-AUC undefined) -> the run finishes, the undefined scores are counted and not logged"""
    import math

    from graph.mol.finetune import FinetuneMolConfig, finetune
    from suite.registry import Registry

    smiles = ["CCO", "CCN", "CCC", "c1ccccc1", "c1ccncc1", "CC(=O)O", "CC(=O)N", "C1CCCCC1", "C1CCNCC1", "c1ccc(O)cc1",
              "c1ccc(N)cc1", "CCOC(=O)C", "CC(C)O", "CC(C)N", "OCCO", "NCCN"] * 2
    rows = "".join(f"{i},m{i},1,{s}\n" for i, s in enumerate(smiles))  # every label 1
    (tmp_path / "bbbp.csv").write_text("num,name,p_np,smiles\n" + rows)
    reg_path = tmp_path / "r.sqlite"
    monkeypatch.setenv("SUITE_REGISTRY", str(reg_path))
    with pytest.warns(UserWarning, match="ROC-AUC undefined"):
        res = finetune(FinetuneMolConfig(dataset="bbbp", data_root=str(tmp_path), init="none", seed=0, epochs=1,
                                         split="random", batch_size=8, num_layers=2, emb_dim=16, device="cpu"))
    assert res.info["undefined_rocauc"] == 2 and math.isnan(res.info["test_rocauc_last"])
    (run,) = Registry(str(reg_path)).runs(task="molnet-finetune")
    assert run["status"] == "finished"
