"""graph.transforms: the GraphCL augmentations as PyG BaseTransforms (Data and Batch, Compose, seeds)."""
from __future__ import annotations

import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data, HeteroData
from torch_geometric.loader import DataLoader

from graph.augment import drop_nodes, mask_attributes, perturb_edges, random4, subgraph
from graph.transforms import Augment, DropNodes, MaskAttributes, PerturbEdges, Random4, Subgraph

from .test_augment import _check_valid, _ring

CASES = [(DropNodes, drop_nodes), (PerturbEdges, perturb_edges), (MaskAttributes, mask_attributes),
         (Subgraph, subgraph), (Random4, random4)]


@pytest.fixture
def batch() -> Batch:
    torch.manual_seed(0)
    return Batch.from_data_list([_ring(n) for n in (1, 2, 5, 10, 20, 7)])


@pytest.mark.parametrize("cls,fn", CASES, ids=[c.__name__ for c, _ in CASES])
def test_batch_matches_functional_and_is_valid(cls, fn, batch):
    """A transform on a Batch with seed s -> exactly the functional augmentation with a generator seeded s; valid batch."""
    out = cls(0.3, seed=5)(batch)
    ref = fn(batch, 0.3, torch.Generator().manual_seed(5))
    assert isinstance(out, Batch)
    _check_valid(out, batch.num_graphs)
    for key in ("x", "edge_index", "edge_attr", "batch", "y"):
        assert torch.equal(out[key], ref[key]), key


@pytest.mark.parametrize("cls,fn", CASES, ids=[c.__name__ for c, _ in CASES])
def test_data_in_data_out(cls, fn):
    """A transform on a single Data -> a Data (no batch/ptr) equal to the functional result on the one-graph Batch."""
    torch.manual_seed(1)
    data = _ring(12)
    x_before = data.x.clone()
    out = cls(0.25, seed=3)(data)
    ref = fn(Batch.from_data_list([data]), 0.25, torch.Generator().manual_seed(3)).to_data_list()[0]
    assert type(out) is Data and "batch" not in out and "ptr" not in out
    for key in ("x", "edge_index", "edge_attr", "y"):
        assert torch.equal(out[key], ref[key]), key
    assert torch.equal(data.x, x_before), "the input was modified"


def test_drop_nodes_counts_and_input_untouched():
    """DropNodes(0.25) on a 12-node ring -> 9 nodes, edges only among them; the input Data unchanged."""
    torch.manual_seed(2)
    data = _ring(12)
    before = (data.x.clone(), data.edge_index.clone())
    out = DropNodes(0.25, seed=0)(data)
    assert out.num_nodes == 9 and out.x.shape[0] == 9
    assert int(out.edge_index.max()) < 9 and out.edge_attr.shape[0] == out.edge_index.shape[1]
    assert torch.equal(data.x, before[0]) and torch.equal(data.edge_index, before[1])


def test_compose_and_seeding():
    """T.Compose of two seeded transforms -> the sequential functional calls; same seed repeats, another seed differs."""
    torch.manual_seed(3)
    data = _ring(30)

    def pipeline(s: int) -> T.Compose:
        return T.Compose([DropNodes(0.2, seed=s), MaskAttributes(0.3, seed=s + 1, mask_value="zero")])

    a, b, c = pipeline(0)(data), pipeline(0)(data), pipeline(7)(data)
    g0, g1 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    ref = mask_attributes(drop_nodes(Batch.from_data_list([data]), 0.2, g0), 0.3, g1, mask_value="zero")
    assert torch.equal(a.x, ref.x) and torch.equal(a.edge_index, ref.edge_index)
    assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    assert not (a.x.shape == c.x.shape and torch.equal(a.x, c.x) and torch.equal(a.edge_index, c.edge_index))
    t = DropNodes(0.2, seed=0)  # its own generator advances: two calls give two different views
    assert not torch.equal(t(data).edge_index, t(data).edge_index)


def test_dataset_transform_with_loader():
    """A list dataset whose items go through Random4 -> a DataLoader batches the augmented graphs (valid Batch)."""
    torch.manual_seed(4)
    graphs = [_ring(n) for n in (4, 6, 9, 13, 5, 8)]
    tf = Random4(0.2, seed=0, mask_value="zero")
    loader = DataLoader([tf(g) for g in graphs], batch_size=3)
    for b in loader:
        _check_valid(b, 3)


def test_options_and_errors():
    """Options reach the augmentation (add=True adds edges); bad option, ratio, input type -> ValueError."""
    torch.manual_seed(5)
    data = _ring(20)
    out = PerturbEdges(0.25, seed=0, add=True)(data)
    assert out.edge_index.shape[1] == data.edge_index.shape[1]  # removed 10, added 10
    assert not torch.equal(out.edge_index, data.edge_index)
    per_graph = Random4(0.2, per_graph=True, seed=0)
    assert per_graph.name == "random4_graph" and "Random4(0.2" in repr(per_graph)
    assert Augment("dnodes", 0.1).name == "drop_nodes"
    with pytest.raises(ValueError, match="no option"):
        DropNodes(0.2, mask_value="zero")
    with pytest.raises(ValueError, match="ratio"):
        Subgraph(1.5)
    with pytest.raises(ValueError, match="seed= or generator="):
        DropNodes(0.2, seed=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="Data or Batch"):
        DropNodes(0.2)(HeteroData())
