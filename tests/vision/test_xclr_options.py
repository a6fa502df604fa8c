"""What the X-CLR comparisons need in the vision front-end: the graph source (caption / labels / seeded random),
fine-tuning from an encoder export (``--init``), the learned class similarities (X-CLR Fig. 4); run identities of
the configs that use none of them unchanged."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from suite.config import experiment_config, to_dict
from vision.config import PretrainConfig
from vision.eval.class_sim import as_metrics, class_similarity, from_metrics
from vision.graph import class_graph, random_graph
from vision.models import build_encoder, load_init
from vision.train import check_config, pretrain


def test_new_fields_leave_existing_identities_unchanged() -> None:
    d = to_dict(PretrainConfig())
    assert "init" not in d and "class_similarity" not in d  # omitted at their defaults: hashes as before
    assert "class_similarity" not in experiment_config(PretrainConfig(class_similarity=100))  # a run option
    assert experiment_config(PretrainConfig(init="runs/a"))["init"] == "runs/a"  # part of the setting: never pooled


def test_random_graph_is_seeded_symmetric_with_unit_diagonal() -> None:
    g = random_graph(10, 0)
    assert torch.equal(g, g.T) and torch.equal(torch.diagonal(g), torch.ones(10))
    off = g[~torch.eye(10, dtype=torch.bool)]
    assert off.min() >= 0 and off.max() < 1 and off.unique().numel() == 45  # one value per class pair
    assert torch.equal(class_graph([str(i) for i in range(10)], "random"), g)
    assert torch.equal(class_graph([str(i) for i in range(10)], "random:0"), g)
    assert not torch.equal(class_graph([str(i) for i in range(10)], "random:1"), g)
    assert torch.equal(class_graph(["a", "b"], "labels"), torch.eye(2))
    with pytest.raises(ValueError, match="random:<seed>"):
        check_config(PretrainConfig(text_model="random:x"))


def test_class_similarity_is_the_mean_over_the_cartesian_product() -> None:
    g = torch.Generator().manual_seed(0)
    h, y = torch.rand(30, 6, generator=g), torch.arange(30) % 3
    sim = class_similarity(h, y, 3)
    hn = torch.nn.functional.normalize(h.double(), dim=1)
    for a in range(3):
        for b in range(3):
            naive = torch.stack([hn[i] @ hn[j] for i in range(30) for j in range(30) if y[i] == a and y[j] == b]).mean()
            assert abs(float(sim[a, b]) - float(naive)) < 1e-6
    assert torch.allclose(from_metrics(as_metrics(sim), 3), sim)
    assert from_metrics({}, 3) is None


def _export(tmp_path: Path, width: int = 8) -> tuple[torch.nn.Module, Path]:
    torch.manual_seed(1)
    enc = build_encoder("convnet", width, 8, 16)
    enc.save_pretrained(tmp_path / "run" / "export")
    return enc, tmp_path / "run"


def test_init_loads_a_run_folder_or_an_export(tmp_path: Path) -> None:
    enc, run = _export(tmp_path)
    for path in (run, run / "export"):
        torch.manual_seed(2)
        fresh = build_encoder("convnet", 8, 8, 16)
        load_init(fresh, path)
        for (k, v), w in zip(enc.state_dict().items(), fresh.state_dict().values()):
            assert torch.equal(v, w), k
    with pytest.raises(ValueError, match="width"):
        load_init(build_encoder("convnet", 16, 8, 16), run)
    with pytest.raises(ValueError, match="neither a finished run folder"):
        load_init(build_encoder("convnet", 8, 8, 16), tmp_path / "nowhere")
    with pytest.raises(ValueError, match="neither a finished run folder"):  # checked before any data is read
        check_config(PretrainConfig(init=str(tmp_path / "nowhere")))


def test_finetuning_starts_from_the_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from suite.registry import Registry

    monkeypatch.setenv("SUITE_CACHE", str(tmp_path / "cache"))
    reg = Registry(str(tmp_path / "r.sqlite"))
    base = dict(dataset="digits", encoder="convnet", width=8, batch_size=100, optimizer="adam", lr=3e-3,
                weight_decay=1e-6, registry=False, linear_probe=False, geometry_batches=0, seed=0, train_per_class=20)
    first = pretrain(PretrainConfig(**base, epochs=1, out=str(tmp_path / "a")))  # type: ignore[arg-type]
    # 0 epochs from the export: the evaluation sees the exported encoder, so kNN equals the first run's
    again = pretrain(PretrainConfig(**base, epochs=0, init=str(first.folder), out=str(tmp_path / "b"),  # type: ignore[arg-type]
                                    loss="xclr", text_model="random"))
    assert again.metrics["knn_acc"] == pytest.approx(first.metrics["knn_acc"])
    tuned = pretrain(PretrainConfig(**{**base, "registry": True}, epochs=1, init=str(first.folder),  # type: ignore[arg-type]
                                    out=str(tmp_path / "c"), loss="xclr", text_model="labels", class_similarity=5),
                     registry=reg)
    assert tuned.metrics["knn_acc"] > 0
    row = reg.runs(status="finished")[0]
    sims = {m["name"]: m["value"] for m in reg.metrics(row["id"]) if m["split"] == "class-sim"}
    assert len(sims) == 55 and from_metrics(sims, 10) is not None  # 10 digit classes, i <= j
    graph = {m["name"]: m["value"] for m in reg.metrics(row["id"]) if m["split"] == "class-graph"}
    assert torch.equal(from_metrics(graph, 10), torch.eye(10))  # the target graph beside it (labels: identity)
    assert experiment_config(PretrainConfig(init=str(first.folder)))["init"] == str(first.folder)
    assert dataclasses.replace(PretrainConfig(), init="x").init == "x"
