"""Gradient caching in the graph front-end (issue 14): chunks of graphs (`split_graphs`), exactness of the cached
gradient where no layer mixes samples, and runs whose chunk equals the batch (GIN's BatchNorm then sees the same
batch) equal the uncached runs, for TU GraphCL and molecular pretraining."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Batch, Data

from graph.augment import build_augmentation, chunk_views, split_graphs
from graph.mol.data import featurize
from graph.mol.model import load_mol_encoder as load_encoder
from graph.mol.pretrain import PretrainMolConfig, pretrain
from graph.tu.data import load_tu
from graph.tu.graphcl import MultiViewModel, TUConfig, make_views, train
from graph.tu.model import GraphCLModel
from suite.config import experiment_config
from suite.losses import apply_loss, build
from suite.train import CachedStep, Engine
from tests.graph.synthetic import write_synthetic_tu
from tests.graph.test_mol_train import CORPUS, TINY, _corpus


def _random_batch(n_graphs: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(n_graphs):
        n = int(torch.randint(1, 7, (1,), generator=g))
        graphs.append(Data(x=torch.randn(n, 3, generator=g), edge_index=torch.randint(0, n, (2, 2 * n), generator=g),
                           edge_attr=torch.randn(2 * n, 2, generator=g), y=torch.tensor([i])))
    return Batch.from_data_list(graphs)


@pytest.mark.parametrize("size", [1, 3, 7, 50])
def test_split_graphs_gives_the_same_graphs_in_order(size: int) -> None:
    """chunks of a PyG batch and of an augmented one -> the same graphs (x, edges, edge_attr, y) in order, chunk
    sizes `size` then the rest"""
    batch = _random_batch(11)
    for src in (batch, build_augmentation("random4", 0.3)(batch, torch.Generator().manual_seed(1))):
        parts = split_graphs(src, size)
        assert [p.num_graphs for p in parts] == [min(size, 11 - a) for a in range(0, 11, size)]
        got = [d for p in parts for d in p.to_data_list()]
        for want, have in zip(src.to_data_list(), got, strict=True):
            for key in ("x", "edge_index", "edge_attr", "y"):
                assert torch.equal(want[key], have[key]), key


def test_split_graphs_of_a_molecule_batch_equals_the_batch_of_the_chunk() -> None:
    """a molecular batch (packed, no PyG slice bookkeeping) -> each chunk equals the batch built from its molecules"""
    mols = featurize(CORPUS[:10])
    whole = mols.batch(torch.arange(10)).to_pyg()
    for a, part in zip(range(0, 10, 4), split_graphs(whole, 4), strict=True):
        ref = mols.batch(torch.arange(a, min(a + 4, 10))).to_pyg()
        assert part.num_graphs == ref.num_graphs
        for key in ("x", "edge_index", "edge_attr", "batch", "ptr"):
            assert torch.equal(part[key], ref[key]), key


def test_split_graphs_refuses_bad_input() -> None:
    batch = _random_batch(4)
    with pytest.raises(ValueError, match="chunk size must be >= 1"):
        split_graphs(batch, 0)
    shuffled = copy.copy(batch)
    shuffled.edge_index = batch.edge_index.flip(1)  # edges of the last graph first
    with pytest.raises(ValueError, match="not grouped by graph"):
        split_graphs(shuffled, 2)


def test_cached_gradient_equals_the_full_batch_gradient_when_no_layer_mixes_samples() -> None:
    """GIN in eval mode (BatchNorm on its running statistics: no layer mixes samples) -> one engine step with the
    batch encoded in chunks of 5 graphs gives the parameters of the full-batch step (float64)"""
    torch.manual_seed(0)
    views = make_views(_random_batch(13), "orig+aug", build_augmentation("drop_nodes", 0.2), torch.Generator().manual_seed(2))
    loss = build("infonce", temperature=0.2)
    models = []
    for cached in (False, True):
        torch.manual_seed(0)
        mv = MultiViewModel(GraphCLModel(3, 8, 2)).double().eval()
        for v in views:
            v.x = v.x.double()
        eng = Engine(mv, torch.optim.SGD(mv.parameters(), lr=1.0), device="cpu")
        if cached:
            eng.backward(CachedStep(lambda c: mv(list(c)), chunk_views(views, 5), lambda z: apply_loss(loss, z), dim=1))
        else:
            eng.backward(apply_loss(loss, mv(views)))
        models.append(mv.state_dict())
    for k in models[0]:
        assert torch.allclose(models[0][k], models[1][k], rtol=1e-10, atol=1e-12), k


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_tu(tmp_path_factory.mktemp("tu"), n_graphs=40)


def test_tu_chunk_equal_to_the_batch_is_the_uncached_run(synth_root: Path) -> None:
    """`suite graph tu --grad-cache-chunk B` with B = the batch: BatchNorm sees the same batch, so the trained
    encoder equals the uncached run's; a smaller chunk trains and is a different experiment (recorded in the config;
    the default 0 leaves the config, and so the setting's hash, as before)"""
    data = load_tu("SYNTH", synth_root)
    base = dict(dataset="SYNTH", loss="graphcl", epochs=2, batch_size=16, eval_epochs=[], svm_folds=4,
                svm_inner_folds=2, aug="drop_nodes")
    plain = train(TUConfig(**base), data, seed=0)
    cached = train(TUConfig(grad_cache_chunk=16, **base), data, seed=0)
    a, b = plain.model.state_dict(), cached.model.state_dict()
    for k in a:
        assert torch.allclose(a[k].float(), b[k].float(), rtol=1e-4, atol=1e-5), k
    assert [s["loss"] for s in plain.epoch_stats] == pytest.approx([s["loss"] for s in cached.epoch_stats], rel=1e-5)
    small = train(TUConfig(grad_cache_chunk=5, **base), data, seed=0)
    assert all(torch.isfinite(torch.tensor(s["loss"])) for s in small.epoch_stats)
    assert "grad_cache_chunk" not in experiment_config(TUConfig(**base))
    assert experiment_config(TUConfig(grad_cache_chunk=5, **base))["grad_cache_chunk"] == 5
    with pytest.raises(ValueError, match="grad_cache_chunk must be >= 0"):
        TUConfig(grad_cache_chunk=-1, **base)


def test_mol_pretraining_chunk_equal_to_the_batch_is_the_uncached_run(tmp_path: Path) -> None:
    """`suite graph mol pretrain --grad-cache-chunk B` with B = the batch -> the same losses and encoder as the
    uncached run; chunk 3 trains to a finite loss"""
    corpus = _corpus(tmp_path)
    base = dict(corpus=str(corpus), epochs=2, loss="graphcl", registry=False, keep_checkpoints=0, device="cpu", **TINY)
    plain = pretrain(PretrainMolConfig(out=str(tmp_path / "a"), **base))
    cached = pretrain(PretrainMolConfig(out=str(tmp_path / "b"), grad_cache_chunk=TINY["batch_size"], **base))
    assert [h["loss"] for h in cached.info["history"]] == pytest.approx([h["loss"] for h in plain.info["history"]], rel=1e-5)
    ea, _ = load_encoder(tmp_path / "a")
    eb, _ = load_encoder(tmp_path / "b")
    for (k, va), (_, vb) in zip(ea.state_dict().items(), eb.state_dict().items()):
        assert torch.allclose(va, vb, rtol=1e-4, atol=1e-5), k
    small = pretrain(PretrainMolConfig(out=str(tmp_path / "c"), grad_cache_chunk=3, **base))
    assert torch.isfinite(torch.tensor(small.info["final_loss"]))
    with pytest.raises(ValueError, match=r"grad_cache_chunk must be > 0 \(or 0"):
        pretrain(PretrainMolConfig(out=str(tmp_path / "d"), grad_cache_chunk=-2, **base))
