"""GraphCL augmentations: ratios, validity, non-empty graphs, batch consistency, determinism."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch, Data

from graph.augment import AUGMENTATIONS, build_augmentation, drop_nodes, mask_attributes, perturb_edges, subgraph


def _ring(n: int, feat: int = 3, long_x: bool = False) -> Data:
    idx = torch.arange(n)
    ei = torch.stack([idx, (idx + 1) % n]) if n > 1 else torch.zeros(2, 0, dtype=torch.long)
    ei = torch.cat([ei, ei.flip(0)], 1)
    x = torch.randint(0, 5, (n, 2)) if long_x else torch.randn(n, feat)
    return Data(x=x, edge_index=ei, edge_attr=torch.randint(0, 4, (ei.shape[1], 2)), y=torch.tensor([n % 2]))


@pytest.fixture
def batch() -> Batch:
    torch.manual_seed(0)
    return Batch.from_data_list([_ring(n) for n in (1, 2, 5, 10, 20, 40, 7, 3)])


def _check_valid(b: Batch, num_graphs: int) -> None:
    assert b.num_graphs == num_graphs
    sizes = torch.bincount(b.batch, minlength=num_graphs)
    assert (sizes >= 1).all(), "a graph was emptied"
    assert torch.equal(b.ptr[1:] - b.ptr[:-1], sizes)
    assert (b.batch[1:] >= b.batch[:-1]).all(), "batch vector not sorted"
    assert b.x.shape[0] == b.batch.numel()
    if b.edge_index.numel():
        assert int(b.edge_index.min()) >= 0 and int(b.edge_index.max()) < b.x.shape[0]
        assert torch.equal(b.batch[b.edge_index[0]], b.batch[b.edge_index[1]]), "edge crosses graphs"
    assert b.edge_attr.shape[0] == b.edge_index.shape[1]
    parts = b.to_data_list()
    assert [p.num_nodes for p in parts] == sizes.tolist()


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_valid_and_deterministic(batch: Batch, name: str) -> None:
    aug = AUGMENTATIONS[name]
    a = aug(batch, 0.3, torch.Generator().manual_seed(3))
    b = aug(batch, 0.3, torch.Generator().manual_seed(3))
    _check_valid(a, batch.num_graphs)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert torch.equal(a.y, batch.y)


def test_ratios(batch: Batch) -> None:
    g = torch.Generator().manual_seed(0)
    sizes = torch.bincount(batch.batch)
    e_sizes = torch.bincount(batch.batch[batch.edge_index[0]], minlength=batch.num_graphs)
    for ratio in (0.1, 0.2, 0.5):
        expect = sizes - torch.minimum((sizes * ratio).floor().long(), sizes - 1)
        for fn in (drop_nodes, subgraph):
            out = fn(batch, ratio, g)
            assert torch.equal(torch.bincount(out.batch, minlength=batch.num_graphs), expect), fn.__name__
        out = perturb_edges(batch, ratio, g)
        got = torch.bincount(out.batch[out.edge_index[0]], minlength=batch.num_graphs)
        assert torch.equal(got, e_sizes - (e_sizes * ratio).floor().long())
        out = perturb_edges(batch, ratio, g, add=True)
        _check_valid(out, batch.num_graphs)
        assert out.edge_index.shape[1] == batch.edge_index.shape[1] - int(((sizes < 2) * (e_sizes * ratio).floor()).sum())
        out = mask_attributes(batch, ratio, g, mask_value=7.0)
        changed = torch.bincount(batch.batch[(out.x == 7.0).all(1)], minlength=batch.num_graphs)
        assert torch.equal(changed, (sizes * ratio).floor().long())


def test_subgraph_connected_on_ring() -> None:
    b = Batch.from_data_list([_ring(50)])
    out = subgraph(b, 0.5, torch.Generator().manual_seed(1))
    # a connected piece of a ring with k nodes has k-1 undirected edges (2(k-1) directed)
    assert out.edge_index.shape[1] == 2 * (out.num_nodes - 1)


def test_subgraph_disconnected_meets_size() -> None:
    comps = [_ring(4) for _ in range(5)]
    one = Batch.from_data_list(comps)
    g = Data(x=one.x, edge_index=one.edge_index, edge_attr=one.edge_attr, y=torch.tensor([0]))
    out = subgraph(Batch.from_data_list([g]), 0.2, torch.Generator().manual_seed(0))
    assert out.num_nodes == 16


def test_mask_long_features_need_token() -> None:
    b = Batch.from_data_list([_ring(10, long_x=True), _ring(6, long_x=True)])
    with pytest.raises(ValueError, match="integer"):
        mask_attributes(b, 0.2, torch.Generator().manual_seed(0))
    out = mask_attributes(b, 0.5, torch.Generator().manual_seed(0), mask_value=torch.tensor([119, 0]))
    assert out.x.dtype == torch.long and int((out.x[:, 0] == 119).sum()) == 8
    out = build_augmentation("random4", 0.5, mask_value=torch.tensor([119, 0]), add=True)(b, torch.Generator().manual_seed(0))
    _check_valid(out, 2)


def test_bad_inputs(batch: Batch) -> None:
    with pytest.raises(ValueError, match="ratio"):
        drop_nodes(batch, 1.5)
    with pytest.raises(ValueError, match="unknown augmentation"):
        build_augmentation("flip")
    with pytest.raises(ValueError, match="no option"):
        build_augmentation("drop_nodes", 0.2, mask_value=0)


def test_per_graph_ratio(batch: Batch) -> None:
    sizes = torch.bincount(batch.batch)
    r = torch.zeros(batch.num_graphs)
    r[3], r[5] = 0.5, 0.25
    expect = sizes - torch.minimum((sizes * r).floor().long(), sizes - 1)
    for fn in (drop_nodes, subgraph):
        out = fn(batch, r, torch.Generator().manual_seed(0))
        assert torch.equal(torch.bincount(out.batch, minlength=batch.num_graphs), expect)
    out = AUGMENTATIONS["random4_graph"](batch, 0.5, torch.Generator().manual_seed(0))
    _check_valid(out, batch.num_graphs)
    with pytest.raises(ValueError, match="per-graph"):
        drop_nodes(batch, torch.zeros(3))
