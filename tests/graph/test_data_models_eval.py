"""TU loader (real loader on synthetic raw files), GIN shapes, SVM evaluator, presets."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from graph.tu.data import check_tu_raw, load_tu
from graph.tu.svm import SVMEvaluator
from graph.tu.presets import resolve
from graph.tu.model import GINEncoder, GraphCLModel
from tests.graph.synthetic import write_synthetic_tu


def test_loader_reads_synthetic_tu(tmp_path: Path) -> None:
    root = write_synthetic_tu(tmp_path, n_graphs=20)
    ds = load_tu("SYNTH", root)
    assert len(ds) == 20 and ds.num_classes == 2 and ds.num_features == 3
    g = ds.graphs[0]
    assert g.x.dtype == torch.float32 and torch.equal(g.x.sum(1), torch.ones(g.num_nodes))  # one-hot labels
    assert sorted(ds.labels.unique().tolist()) == [0, 1]
    assert not any(p.name == "processed" for p in (root / "SYNTH").iterdir()), "wrote into the data folder"


def test_loader_featureless_gets_constant(tmp_path: Path) -> None:
    root = write_synthetic_tu(tmp_path, n_graphs=10)
    (root / "SYNTH" / "raw" / "SYNTH_node_labels.txt").unlink()
    ds = load_tu("SYNTH", root)
    assert ds.num_features == 1 and all(torch.equal(g.x, torch.ones(g.num_nodes, 1)) for g in ds.graphs)


def test_loader_errors_name_the_file(tmp_path: Path) -> None:
    root = write_synthetic_tu(tmp_path, n_graphs=10)
    raw = root / "SYNTH" / "raw"
    lines = (raw / "SYNTH_node_labels.txt").read_text().splitlines()
    (raw / "SYNTH_node_labels.txt").write_text("\n".join(lines[:-3]) + "\n")
    with pytest.raises(ValueError, match="SYNTH_node_labels.txt"):
        load_tu("SYNTH", root)
    (raw / "SYNTH_graph_labels.txt").unlink()
    with pytest.raises(ValueError, match="missing .*SYNTH_graph_labels.txt"):
        check_tu_raw(raw, "SYNTH")
    with pytest.raises(ValueError, match="not found"):
        load_tu("NOPE", root)


def test_gin_shapes() -> None:
    x, ei = torch.randn(10, 7), torch.tensor([[0, 1, 2, 5, 6], [1, 2, 3, 6, 7]])
    batch = torch.tensor([0] * 4 + [1] * 6)
    assert GINEncoder(7)(x, ei, batch).shape == (2, 96)
    assert GINEncoder(7, hidden=16, layers=5)(x, ei, batch).shape == (2, 80)
    m = GraphCLModel(7, proj_dim=24)
    assert m(x, ei, batch).shape == (2, 24) and m.embed(x, ei, batch).shape == (2, 96)
    with pytest.raises(ValueError, match="x of shape"):
        GINEncoder(5)(x, ei, batch)


def test_svm_separable_and_shuffled() -> None:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(100) % 2
    x = torch.randn(100, 8, generator=g) * 0.3 + y[:, None].float() * 3
    ev = SVMEvaluator(seed=0, cs=(0.1, 1.0, 10.0))
    assert ev(x, y)["acc"] > 0.98
    shuffled = y[torch.randperm(100, generator=g)]
    r = ev(torch.randn(100, 8, generator=g), shuffled)
    assert 0.25 < r["acc"] < 0.75 and r["protocol"]["outer_folds"] == 10
    assert ev(x, y)["fold_accs"] == ev(x, y)["fold_accs"]  # seeded folds


def test_presets() -> None:
    loss, views, rec = resolve("graphcl")
    assert rec["loss"] == "dcl" and loss.hparams()["negatives"] == "cross" and loss.temperature == 0.2
    loss, views, _ = resolve("macl")
    assert (loss.tau0, loss.alpha, loss.a0, loss.negatives, loss.symmetric) == (0.2, 0.5, 0.0, "cross", False)
    _, views, _ = resolve("cacr3")
    assert views == "orig+aug+aug"
    with pytest.raises(ValueError, match="similarity"):
        resolve("xclr")
    with pytest.raises(ValueError, match="multi-view"):
        resolve("graphcl", views="orig+aug+aug")
    assert resolve("macl", {"tau0": 0.1})[0].tau0 == 0.1


def test_loader_corrupt_cache_is_reported_and_rebuilt(tmp_path: Path) -> None:
    root = write_synthetic_tu(tmp_path, n_graphs=10)
    first = load_tu("SYNTH", root)
    from suite.paths import cache_dir

    bad = list(cache_dir("TU").glob("SYNTH-*/SYNTH/processed/data.pt"))
    assert bad
    for p in bad:
        p.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match=r"processed cache .*data\.pt is corrupt.*rebuilding"):
        again = load_tu("SYNTH", root)
    assert len(again) == len(first) and torch.equal(again.labels, first.labels)
