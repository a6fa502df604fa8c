"""GraphCL augmentations on a whole torch_geometric ``Batch`` at once (You et al. 2020, Sec. 3.1).

Every augmentation is a function ``aug(batch, ratio, generator, **opts) -> Batch`` built from tensor
operations only: no Python loop over graphs, nodes or edges (the random-walk subgraph loops over
*expansion steps*, each a tensor op over the whole batch). Guarantees, for every augmentation:

- every graph keeps at least one node, ``batch.batch`` stays sorted and consistent with ``ptr``;
- ``edge_index`` is valid and every edge stays inside its graph; ``edge_attr`` (when present)
  stays aligned with ``edge_index``; graph-level attributes (``y``, ...) are untouched;
- the result depends only on the input and on ``generator`` (deterministic under a seed);
- ``to_data_list()`` works on the result (slice bookkeeping is updated).

``ratio`` (a float, or a tensor (B,) of per-graph ratios) is the fraction of each graph that is
perturbed, rounded down as in GraphCL's code (``int(n * ratio)``):

============== ==================================================================================
drop_nodes     removes ``int(n * ratio)`` nodes (at most n - 1) and their edges
perturb_edges  removes ``int(E * ratio)`` directed edges; with ``add=True`` adds as many random
               ones (GraphCL's released TU code only removes, which is the default here)
mask_attributes replaces the features of ``int(n * ratio)`` nodes by a mask: ``"gaussian"``
               (N(0.5, 0.5), GraphCL's TU code), ``"mean"`` (the graph's mean feature),
               ``"zero"``, a number, or a token tensor of shape (F,) (required for integer x,
               e.g. molecule atom types)
subgraph       keeps ``n - int(n * ratio)`` nodes grown from a random start node by random
               neighbourhood expansion (GraphCL's "subgraph by random walk"); ``keep_ratio=``
               overrides the kept fraction (GraphCL's released TU code keeps int(0.2 n) + 1)
random4        one of the four above, drawn once per batch (issue 3); ``random4_graph`` draws
               one per graph, as GraphCL's released TU code does
============== ==================================================================================

Shapes: batch.x (n, F) float or long, batch.edge_index (2, E), batch.edge_attr (E, ...) optional,
batch.batch (n,), batch.ptr (B + 1,) -> a new ``Batch`` with n' <= n (n' = n for masking/edges).

Example:
    >>> g = torch.Generator().manual_seed(0)
    >>> view = drop_nodes(batch, 0.2, g)
    >>> view = AUGMENTATIONS["random4"](batch, 0.2, g)
    >>> aug = build_augmentation("mask_attributes", 0.15, mask_value=torch.tensor([119, 0]))
    >>> view = aug(batch, g)
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Protocol, Sequence, Union

import torch
from torch import Tensor
from torch_geometric.data import Batch

MaskValue = Union[str, float, int, Tensor]
Ratio = Union[float, Tensor]  # one ratio for the batch, or one per graph (B,)


class Augmentation(Protocol):
    def __call__(self, batch: Batch, ratio: float, generator: torch.Generator | None = None, **opts: Any) -> Batch: ...


# ----------------------------------------------------------------------------- helpers

def _check(batch: Batch, ratio: Ratio, what: str) -> Ratio:
    """Validate; return the ratio as a float or a float64 tensor (B,) on the batch's device."""
    if not isinstance(batch, Batch):
        raise ValueError(f"{what} expects a torch_geometric Batch, got {type(batch).__name__}")
    if batch.edge_index is None or batch.batch is None:
        raise ValueError(f"{what}: batch needs edge_index and batch vectors")
    if isinstance(ratio, Tensor):
        if ratio.shape != (batch.num_graphs,):
            raise ValueError(f"{what}: a per-graph ratio must have shape ({batch.num_graphs},), got {tuple(ratio.shape)}")
        if bool(((ratio < 0) | (ratio >= 1)).any()):
            raise ValueError(f"{what}: ratios must be in [0, 1)")
        return ratio.to(torch.float64).to(batch.batch.device)
    if not 0.0 <= float(ratio) < 1.0:
        raise ValueError(f"{what}: ratio must be in [0, 1), got {ratio}")
    return float(ratio)


def _rand(n: int, generator: torch.Generator | None, device: torch.device) -> Tensor:
    """Uniform [0, 1) numbers drawn on the generator's device, moved to ``device``."""
    gdev = generator.device if generator is not None else torch.device("cpu")
    return torch.rand(n, generator=generator, device=gdev).to(device)


def _randperm(n: int, generator: torch.Generator | None, device: torch.device) -> Tensor:
    gdev = generator.device if generator is not None else torch.device("cpu")
    return torch.randperm(n, generator=generator, device=gdev).to(device)


def _sel(t: Tensor, idx: Tensor, dim: int = 0) -> Tensor:
    """``t.index_select(dim, idx)``: far faster on CPU than advanced indexing ``t[idx]``."""
    return t.index_select(dim, idx)


def _where(mask: Tensor) -> Tensor:
    """Indices (k,) of the True entries of a 1-D mask (instead of boolean-mask indexing)."""
    return mask.nonzero().view(-1)


def _counts(group: Tensor, num_groups: int) -> Tensor:
    return torch.bincount(group, minlength=num_groups)


def random_rank(group: Tensor, num_groups: int, generator: torch.Generator | None) -> Tensor:
    """Rank of every item inside its group under an independent uniform random permutation.

    Shapes: group (M,) long in [0, num_groups) -> (M,) long, a permutation of 0..m_g-1 per group.
    """
    m = group.numel()
    if m == 0:
        return group.new_zeros(0)
    perm = _randperm(m, generator, group.device)                                   # (M,)
    order = _sel(perm, torch.argsort(_sel(group, perm), stable=True))              # items grouped, random within
    counts = _counts(group, num_groups)
    start = torch.cumsum(counts, 0) - counts                                       # (G,)
    rank = torch.empty_like(order)
    rank.index_copy_(0, order, torch.arange(m, device=group.device) - _sel(start, _sel(group, order)))
    return rank


def _graph_sizes(batch: Batch) -> Tensor:
    return _counts(batch.batch, batch.num_graphs)                                  # (B,)


def _rebuild(batch: Batch, x: Tensor | None, node_batch: Tensor, edge_index: Tensor, edge_attr: Tensor | None) -> Batch:
    """A shallow copy of ``batch`` with new node/edge tensors and consistent ptr/slice bookkeeping.

    ``edge_index`` must be grouped by graph (edges of graph 0 first, ...)."""
    out = copy.copy(batch)
    num_graphs = batch.num_graphs
    sizes = _counts(node_batch, num_graphs)
    ptr = torch.zeros(num_graphs + 1, dtype=torch.long, device=node_batch.device)
    ptr[1:] = torch.cumsum(sizes, 0)
    out.x = x
    out.batch = node_batch
    out.ptr = ptr
    out.edge_index = edge_index
    if edge_attr is not None or "edge_attr" in batch:
        out.edge_attr = edge_attr
    e_sizes = _counts(_sel(node_batch, edge_index[0]), num_graphs) if edge_index.numel() else torch.zeros_like(sizes)
    e_ptr = torch.zeros_like(ptr)
    e_ptr[1:] = torch.cumsum(e_sizes, 0)
    slices = dict(getattr(batch, "_slice_dict", None) or {})
    incs = dict(getattr(batch, "_inc_dict", None) or {})
    if slices:
        if "x" in slices:
            slices["x"] = ptr.cpu()
        for key in ("edge_index", "edge_attr"):
            if key in slices:
                slices[key] = e_ptr.cpu()
        if "edge_index" in incs:
            incs["edge_index"] = ptr[:-1].cpu()
        out._slice_dict = slices
        out._inc_dict = incs
    if "num_nodes" in batch:  # explicitly stored node counts (featureless graphs)
        out.num_nodes = int(node_batch.numel())
    return out


def split_graphs(batch: Batch, size: int) -> list[Batch]:
    """``batch`` cut into consecutive batches of ``size`` graphs (the last may be smaller), each a
    self-contained ``Batch`` (local node ids, ``batch`` from 0, ``ptr``): the chunks of gradient caching.
    Node attributes (``x``, ...), edge attributes (``edge_attr``, ...) and graph attributes (``y``, ...)
    are sliced with their graphs; edges must be grouped by graph, as in every PyG batch and every
    augmentation here. Tensor slicing per chunk: no loop over graphs."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1 graph, got {size}")
    num_graphs = batch.num_graphs
    node_batch, edge_index = batch.batch, batch.edge_index
    n, e = int(node_batch.numel()), int(edge_index.shape[1])
    ptr = torch.zeros(num_graphs + 1, dtype=torch.long, device=node_batch.device)
    ptr[1:] = torch.cumsum(_counts(node_batch, num_graphs), 0)
    edge_graph = _sel(node_batch, edge_index[0]) if e else node_batch.new_zeros(0)
    if e and bool((edge_graph[1:] < edge_graph[:-1]).any()):
        raise ValueError("split_graphs: the batch's edges are not grouped by graph")
    e_ptr = torch.zeros_like(ptr)
    e_ptr[1:] = torch.cumsum(_counts(edge_graph, num_graphs), 0)
    kinds: dict[str, str] = {}
    for key in batch.keys():
        if key in ("batch", "ptr", "edge_index"):
            continue
        value = batch[key]
        if not isinstance(value, Tensor) or value.dim() == 0:
            raise ValueError(f"split_graphs: cannot split the batch attribute {key!r} (not a per-node, per-edge or "
                             f"per-graph tensor)")
        if key == "y" or (key not in ("x", "edge_attr") and value.shape[0] == num_graphs != n):
            kinds[key] = "graph"
        elif key == "edge_attr" or (key != "x" and batch.is_edge_attr(key) and value.shape[0] == e):
            kinds[key] = "edge"
        elif value.shape[0] == n:
            kinds[key] = "node"
        else:
            raise ValueError(f"split_graphs: batch attribute {key!r} has {value.shape[0]} rows: not one per node "
                             f"({n}), edge ({e}) or graph ({num_graphs})")
    bounds = ptr.tolist(), e_ptr.tolist()
    slices = dict(getattr(batch, "_slice_dict", None) or {})
    incs = dict(getattr(batch, "_inc_dict", None) or {})
    out = []
    for a in range(0, num_graphs, size):
        b = min(a + size, num_graphs)
        (n0, n1), (e0, e1) = (bounds[0][a], bounds[0][b]), (bounds[1][a], bounds[1][b])
        piece = Batch(edge_index=edge_index[:, e0:e1] - n0, batch=node_batch[n0:n1] - a, ptr=ptr[a:b + 1] - n0)
        for key, kind in kinds.items():
            lo, hi = {"node": (n0, n1), "edge": (e0, e1), "graph": (a, b)}[kind]
            piece[key] = batch[key][lo:hi]
        if "x" not in kinds:
            piece.num_nodes = n1 - n0
        piece._num_graphs = b - a
        if slices:  # keep to_data_list() working
            piece._slice_dict = {k: v[a:b + 1] - v[a] for k, v in slices.items()}
            piece._inc_dict = {k: (ptr[a:b] - n0).cpu() if k == "edge_index" else v[a:b] for k, v in incs.items()}
        out.append(piece)
    return out


def chunk_views(views: Sequence[Batch], size: int) -> list[tuple[Batch, ...]]:
    """Gradient caching's chunks: the same ``size`` graphs of every view, chunk by chunk."""
    return list(zip(*(split_graphs(v, size) for v in views)))


def induced_subgraph(batch: Batch, keep: Tensor) -> Batch:
    """Keep the nodes where ``keep`` (n,) is True and the edges between them (ids relabelled).

    Shapes: keep (n,) bool -> Batch with keep.sum() nodes."""
    new_id = torch.cumsum(keep.long(), 0) - 1                                      # (n,)
    src, dst = batch.edge_index
    e_idx = _where(_sel(keep, src) & _sel(keep, dst))                              # (E',) kept edges
    edge_index = _sel(new_id, _sel(batch.edge_index, e_idx, 1).reshape(-1)).view(2, -1)   # (2, E')
    edge_attr = _sel(batch.edge_attr, e_idx) if batch.edge_attr is not None else None
    n_idx = _where(keep)                                                           # (n',)
    x = _sel(batch.x, n_idx) if batch.x is not None else None
    return _rebuild(batch, x, _sel(batch.batch, n_idx), edge_index, edge_attr)


# ----------------------------------------------------------------------------- augmentations

def drop_nodes(batch: Batch, ratio: Ratio = 0.2, generator: torch.Generator | None = None) -> Batch:
    """Node dropping: remove ``int(n_g * ratio)`` random nodes of every graph (at most n_g - 1)."""
    ratio = _check(batch, ratio, "drop_nodes")
    sizes = _graph_sizes(batch)                                                    # (B,)
    n_drop = torch.minimum(torch.floor(sizes.double() * ratio).long(), (sizes - 1).clamp(min=0))
    rank = random_rank(batch.batch, batch.num_graphs, generator)                   # (n,)
    return induced_subgraph(batch, rank >= _sel(n_drop, batch.batch))


def perturb_edges(batch: Batch, ratio: Ratio = 0.2, generator: torch.Generator | None = None, *,
                  add: bool = False, edge_fill: Tensor | float | None = None) -> Batch:
    """Edge perturbation: remove ``int(E_g * ratio)`` random (directed) edges of every graph; with
    ``add=True`` add as many uniformly random non-self-loop edges inside the same graph, whose
    ``edge_attr`` is ``edge_fill`` (a token of the edge-attribute shape; zeros by default)."""
    ratio = _check(batch, ratio, "perturb_edges")
    B = batch.num_graphs
    ei = batch.edge_index
    e_graph = _sel(batch.batch, ei[0])                                             # (E,)
    e_sizes = _counts(e_graph, B)
    n_perm = torch.floor(e_sizes.double() * ratio).long()                          # (B,)
    keep = _where(random_rank(e_graph, B, generator) >= _sel(n_perm, e_graph))     # (E',)
    edge_index = _sel(ei, keep, 1)
    edge_attr = _sel(batch.edge_attr, keep) if batch.edge_attr is not None else None
    if add:
        sizes = _graph_sizes(batch)
        n_add = torch.where(sizes >= 2, n_perm, torch.zeros_like(n_perm))          # no edges in 1-node graphs
        gid = torch.repeat_interleave(torch.arange(B, device=ei.device), n_add)    # (K,)
        k = gid.numel()
        if k:
            n_g = _sel(sizes, gid).double()
            src = torch.floor(_rand(k, generator, ei.device).double() * n_g).long()
            dst = torch.floor(_rand(k, generator, ei.device).double() * (n_g - 1)).long()
            dst = dst + (dst >= src).long()                                        # skip self loops
            base = _sel(batch.ptr, gid)
            new = torch.stack([src + base, dst + base])                            # (2, K)
            edge_index = torch.cat([edge_index, new], 1)
            if edge_attr is not None:
                fill = torch.zeros_like(edge_attr[:1]) if edge_fill is None else torch.as_tensor(
                    edge_fill, dtype=edge_attr.dtype, device=edge_attr.device).expand_as(edge_attr[:1])
                edge_attr = torch.cat([edge_attr, fill.expand(k, *edge_attr.shape[1:])], 0)
            order = torch.argsort(_sel(batch.batch, edge_index[0]), stable=True)   # regroup by graph
            edge_index = _sel(edge_index, order, 1)
            edge_attr = _sel(edge_attr, order) if edge_attr is not None else None
    return _rebuild(batch, batch.x, batch.batch, edge_index, edge_attr)


def mask_attributes(batch: Batch, ratio: Ratio = 0.2, generator: torch.Generator | None = None, *,
                    mask_value: MaskValue = "gaussian") -> Batch:
    """Attribute masking: the features of ``int(n_g * ratio)`` random nodes per graph are replaced.

    ``mask_value``: ``"gaussian"`` (N(0.5, 0.5) noise, GraphCL's TU code), ``"mean"`` (mean feature
    of the node's graph), ``"zero"``, a number, or a token tensor (F,). Integer features (e.g.
    molecule atom/chirality ids) need a number or a token (the mask token of the vocabulary)."""
    ratio = _check(batch, ratio, "mask_attributes")
    x = batch.x
    if x is None:
        raise ValueError("mask_attributes: batch has no node features x")
    sizes = _graph_sizes(batch)
    n_mask = torch.floor(sizes.double() * ratio).long()
    idx = _where(random_rank(batch.batch, batch.num_graphs, generator) < _sel(n_mask, batch.batch))   # (m,)
    m = idx.numel()
    x = x.clone()
    if m == 0:
        return _rebuild(batch, x, batch.batch, batch.edge_index, batch.edge_attr)
    if isinstance(mask_value, str):
        if not x.is_floating_point():
            raise ValueError(f"mask_attributes: x has integer dtype {x.dtype}; mask_value={mask_value!r} needs float "
                             "features; pass a mask token (number or tensor of shape (F,)) instead")
        if mask_value == "gaussian":
            gdev = generator.device if generator is not None else torch.device("cpu")
            noise = torch.randn(m, *x.shape[1:], generator=generator, device=gdev).to(x.device, x.dtype)
            x.index_copy_(0, idx, 0.5 + 0.5 * noise)
        elif mask_value == "mean":
            mean = torch.zeros(batch.num_graphs, *x.shape[1:], dtype=x.dtype, device=x.device)
            mean.index_add_(0, batch.batch, x)
            mean = mean / sizes.clamp(min=1).to(x.dtype).view(-1, *([1] * (x.dim() - 1)))
            x.index_copy_(0, idx, _sel(mean, _sel(batch.batch, idx)))
        elif mask_value == "zero":
            x.index_fill_(0, idx, 0)
        else:
            raise ValueError(f"mask_attributes: unknown mask_value {mask_value!r}; use 'gaussian', 'mean', 'zero', "
                             "a number or a token tensor")
    else:
        token = (mask_value.to(x.device) if isinstance(mask_value, Tensor)  # a number: no copy from the host
                 else torch.full((), mask_value, device=x.device))
        if token.dim() > 0 and tuple(token.shape) != tuple(x.shape[1:]):
            raise ValueError(f"mask_attributes: mask token has shape {tuple(token.shape)}, features have "
                             f"{tuple(x.shape[1:])}")
        if token.is_floating_point() and not x.is_floating_point():
            raise ValueError(f"mask_attributes: float mask token for integer features (dtype {x.dtype})")
        x.index_copy_(0, idx, token.to(x.dtype).expand(m, *x.shape[1:]).contiguous())
    return _rebuild(batch, x, batch.batch, batch.edge_index, batch.edge_attr)


def subgraph(batch: Batch, ratio: Ratio = 0.2, generator: torch.Generator | None = None, *,
             keep_ratio: float | None = None, expand_fraction: float = 1.0, jump_fraction: float = 0.25,
             max_steps: int | None = None) -> Batch:
    """Subgraph by random neighbourhood expansion ("random walk" in GraphCL).

    From one random start node per graph, the node set grows in steps: each step every graph adds
    a random ``expand_fraction`` (at least one) of its frontier (neighbours outside the set), capped
    by what it still needs, until it holds ``n_g - int(n_g * ratio)`` nodes (or ``keep_ratio``
    of them, rounded down, at least 1). The default ``expand_fraction=1`` adds whole frontier
    shells in random order (a random breadth-first ball: about radius-many steps); smaller values
    grow more irregular shapes in more steps. A graph whose reachable part is exhausted restarts
    from ``ceil(jump_fraction * still_needed)`` random unvisited nodes, so the size is always met
    (GraphCL stops early there). Edges are undirected for the expansion; the induced subgraph keeps
    the original edges among kept nodes."""
    ratio = _check(batch, ratio, "subgraph")
    if keep_ratio is not None and not 0.0 < keep_ratio <= 1.0:
        raise ValueError(f"subgraph: keep_ratio must be in (0, 1], got {keep_ratio}")
    for nm, v in (("expand_fraction", expand_fraction), ("jump_fraction", jump_fraction)):
        if not 0.0 < v <= 1.0:
            raise ValueError(f"subgraph: {nm} must be in (0, 1], got {v}")
    B, n = batch.num_graphs, batch.batch.numel()
    nb = batch.batch                                                               # (n,)
    sizes = _graph_sizes(batch)
    if keep_ratio is None:
        target = sizes - torch.floor(sizes.double() * ratio).long()
    else:
        target = torch.floor(sizes.double() * keep_ratio).long()
    if isinstance(ratio, Tensor):  # per-graph ratios: graphs with ratio 0 stay whole
        target = torch.where(ratio > 0, target, sizes)
    target = torch.minimum(target.clamp(min=1), sizes)                             # (B,)
    full = _sel(target >= sizes, nb)                                               # (n,) graphs kept whole
    in_set = (random_rank(nb, B, generator) == 0) | full                           # one start node per graph
    have = _counts(_sel(nb, _where(in_set)), B)
    src, dst = batch.edge_index
    steps = int(max_steps) if max_steps is not None else int(sizes.max()) if sizes.numel() else 0
    for _ in range(steps):
        need = target - have                                                       # (B,)
        if int(need.max()) <= 0:
            break
        # drop edges that can no longer grow anything: both ends inside, or their graph is complete
        live = _where(~(_sel(in_set, src) & _sel(in_set, dst)) & _sel(need > 0, _sel(nb, src)))
        src, dst = _sel(src, live), _sel(dst, live)
        w = in_set.to(torch.float32)
        hits = torch.bincount(dst, _sel(w, src), minlength=n) + torch.bincount(src, _sel(w, dst), minlength=n)
        frontier = (hits > 0) & ~in_set & (_sel(need, nb) > 0)                     # (n,)
        stalled = (need > 0) & (_counts(_sel(nb, _where(frontier)), B) == 0)       # (B,) component exhausted
        if bool(stalled.any()):                                                    # restart from random unvisited nodes
            cand = (~in_set) & _sel(stalled, nb)
            n_jump = torch.ceil(need.clamp(min=0).double() * jump_fraction).long().clamp(min=1)   # (B,)
            frontier = frontier | (cand & (_rank_subset(cand, nb, B, generator) < _sel(n_jump, nb)))
        idx = _where(frontier)                                                     # (f,)
        g_f = _sel(nb, idx)
        f_cnt = _counts(g_f, B)
        frac = torch.where(stalled, torch.ones_like(need, dtype=torch.double), torch.full_like(need, expand_fraction, dtype=torch.double))
        quota = torch.minimum(need.clamp(min=0), torch.ceil(f_cnt.double() * frac).long().clamp(min=1))
        take = _where(random_rank(g_f, B, generator) < _sel(quota, g_f))
        in_set.index_fill_(0, _sel(idx, take), True)
        have = have + _counts(_sel(g_f, take), B)
    return induced_subgraph(batch, in_set)


def _rank_subset(sel: Tensor, group: Tensor, num_groups: int, generator: torch.Generator | None) -> Tensor:
    """Random within-group rank of the selected items (n,) bool; unselected items get a large rank."""
    idx = _where(sel)
    out = torch.full_like(group, torch.iinfo(torch.long).max)
    out.index_copy_(0, idx, random_rank(_sel(group, idx), num_groups, generator))
    return out


def identity(batch: Batch, ratio: float = 0.0, generator: torch.Generator | None = None) -> Batch:
    """No augmentation (the original graph)."""
    return batch


BASE_AUGMENTATIONS: dict[str, Callable[..., Batch]] = {
    "drop_nodes": drop_nodes, "perturb_edges": perturb_edges, "mask_attributes": mask_attributes, "subgraph": subgraph,
}
_ALIASES = {"dnodes": "drop_nodes", "pedges": "perturb_edges", "mask_nodes": "mask_attributes", "none": "identity",
            "attr_mask": "mask_attributes", "edge_perturb": "perturb_edges", "node_drop": "drop_nodes"}


def random_choice(batch: Batch, ratio: float = 0.2, generator: torch.Generator | None = None, *,
                  choices: tuple[str, ...] = ("drop_nodes", "perturb_edges", "subgraph", "mask_attributes"),
                  per_graph: bool = False, **opts: Any) -> Batch:
    """Apply one augmentation drawn uniformly from ``choices``: once for the whole batch, or with
    ``per_graph=True`` one draw per graph (GraphCL's released TU code): every choice is then
    applied with the ratio on its graphs and 0 on the others (a loop over the <= 4 choices).

    ``opts`` are forwarded to the augmentations that accept them (e.g. ``mask_value`` goes to
    ``mask_attributes`` only, ``add``/``edge_fill`` to ``perturb_edges``)."""
    if not choices:
        raise ValueError("random_choice: empty choices")
    gdev = generator.device if generator is not None else torch.device("cpu")
    names = [canonical(c) for c in choices]
    if not per_graph:
        i = int(torch.randint(len(names), (1,), generator=generator, device=gdev))
        return AUGMENTATIONS[names[i]](batch, ratio, generator, **_opts_for(names[i], opts))
    pick = torch.randint(len(names), (batch.num_graphs,), generator=generator, device=gdev).to(batch.batch.device)
    out = batch
    for k, name in enumerate(names):
        r = (pick == k).to(torch.float64) * float(ratio)                          # (B,)
        if bool((r > 0).any()):
            out = AUGMENTATIONS[name](out, r, generator, **_opts_for(name, opts))
    return out


_OPTS = {"perturb_edges": {"add", "edge_fill"}, "mask_attributes": {"mask_value"},
         "subgraph": {"keep_ratio", "expand_fraction", "jump_fraction", "max_steps"}, "drop_nodes": set(), "identity": set()}


def _opts_for(name: str, opts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if k in _OPTS.get(name, set())}


random4 = functools.partial(random_choice, choices=("drop_nodes", "perturb_edges", "subgraph", "mask_attributes"))
random3 = functools.partial(random_choice, choices=("drop_nodes", "perturb_edges", "subgraph"))
random2 = functools.partial(random_choice, choices=("drop_nodes", "subgraph"))
random4_graph = functools.partial(random4, per_graph=True)

AUGMENTATIONS: dict[str, Callable[..., Batch]] = {
    **BASE_AUGMENTATIONS, "identity": identity, "random2": random2, "random3": random3, "random4": random4,
    "random4_graph": random4_graph,
}


def canonical(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {name!r}; available: {sorted(AUGMENTATIONS)} (aliases {sorted(_ALIASES)})")
    return key


def build_augmentation(name: str, ratio: float = 0.2, **opts: Any) -> Callable[[Batch, torch.Generator | None], Batch]:
    """``aug(batch, generator) -> Batch`` with the ratio and options bound.

    Options not accepted by the named augmentation raise ``ValueError`` (``random*`` accept the
    union and route each option to the augmentations that take it)."""
    key = canonical(name)
    if not 0.0 <= float(ratio) < 1.0:
        raise ValueError(f"augmentation ratio must be in [0, 1), got {ratio}")
    if not key.startswith("random"):
        bad = set(opts) - _OPTS[key]
        if bad:
            raise ValueError(f"augmentation {key!r} takes no option(s) {sorted(bad)}; valid: {sorted(_OPTS[key])}")
    else:
        bad = set(opts) - set().union(*_OPTS.values())
        if bad:
            raise ValueError(f"augmentation {key!r} takes no option(s) {sorted(bad)}")
    fn = AUGMENTATIONS[key]

    def aug(batch: Batch, generator: torch.Generator | None = None) -> Batch:
        return fn(batch, ratio, generator, **opts)

    aug.__name__ = f"{key}({ratio})"
    return aug
