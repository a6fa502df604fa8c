"""Tiny offline data for the documentation's examples: a data root (``SUITE_DATA``) holding a 40-molecule
``moleculenet/bbbp.csv`` (both classes in the scaffold split's test part) and a synthetic ``TU/MUTAG``."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from tests.graph.synthetic import write_synthetic_tu

RINGS = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCNCC1", "c1ccc2ccccc2c1", "C1CCOC1", "c1ccsc1", "C1CC1", "c1ccoc1",
         "C1CCC1", "c1cnccn1", "C1CNCCN1", "c1ccc2[nH]ccc2c1", "C1CCCCCC1"]
TAILS = ["", "C", "O", "N", "CC", "Cl"]


def tiny_bbbp(path: Path) -> Path:
    """40 molecules over 14 ring systems; labels alternate along the scaffold split so that every part holds both
    classes (a ROC-AUC is defined on the test part)."""
    from graph.mol.splits import scaffold_split

    smiles = [t + r for i, r in enumerate(RINGS) for t in TAILS[: 1 + (i * 5) % 4]][:37] + ["CCO", "CCCC", "CC(=O)O"]
    labels = [0] * len(smiles)
    for part in scaffold_split(smiles):
        for k, i in enumerate(part.tolist()):
            labels[i] = k % 2
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{i},m{i},{y},{s}\n" for i, (s, y) in enumerate(zip(smiles, labels)))
    path.write_text("num,name,p_np,smiles\n" + rows)
    return path


@pytest.fixture(scope="session")
def tiny_data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs-data")
    tiny_bbbp(root / "moleculenet" / "bbbp.csv")
    write_synthetic_tu(root / "TU", name="MUTAG", n_graphs=40)
    return root


@pytest.fixture
def example_env(tiny_data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A scratch working folder (examples write ``runs/...``), the tiny data root, one thread."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SUITE_DATA", str(tiny_data_root))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path
    torch.set_num_threads(threads)
    assert os.environ["SUITE_DATA"] == str(tiny_data_root)
