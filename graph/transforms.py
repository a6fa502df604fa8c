"""GraphCL augmentations as ``torch_geometric.transforms.BaseTransform`` classes.

Each transform wraps the batched functional augmentation of :mod:`graph.augment` (one implementation:
the transform only binds the ratio, the options and the random source), so it works on a ``Batch``
(the whole batch at once, as in training) and on a single ``Data`` (as a dataset transform), and
composes with ``T.Compose``. A ``Data`` comes back as a ``Data``; graph-level attributes are untouched.

=================== ======================================= ============================
transform           functional form (graph.augment)          options
=================== ======================================= ============================
``DropNodes``       ``drop_nodes``                           --
``PerturbEdges``    ``perturb_edges``                        ``add``, ``edge_fill``
``MaskAttributes``  ``mask_attributes``                      ``mask_value``
``Subgraph``        ``subgraph``                             ``keep_ratio``, ...
``Random4``         ``random4`` (``per_graph=True``: per     options of all four
                    graph, GraphCL's released TU code)
``Augment(name)``   any name of ``graph.augment.AUGMENTATIONS``
=================== ======================================= ============================

Random source: ``seed=`` (or ``generator=``) gives the transform its own ``torch.Generator``, so a
sequence of calls is reproducible. Without either, the global torch RNG is used; prefer that inside a
``DataLoader`` with ``num_workers > 0``: every worker holds a copy of a transform's own generator and
would repeat the same draws, whereas PyTorch seeds each worker's global RNG differently.

Example:
    >>> import torch_geometric.transforms as T
    >>> view = T.Compose([DropNodes(0.2, seed=0), MaskAttributes(0.2, seed=1)])(data)
    >>> dataset = TUDataset(root, "MUTAG", transform=Random4(0.2))
"""
from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch_geometric.data import Batch, Data
from torch_geometric.transforms import BaseTransform

from graph.augment import build_augmentation, canonical
from suite.train.seeding import fixed_generator

__all__ = ["Augment", "DropNodes", "PerturbEdges", "MaskAttributes", "Subgraph", "Random4"]


class Augment(BaseTransform):
    """The augmentation ``name`` (see :data:`graph.augment.AUGMENTATIONS`) as a PyG transform.

    Shapes: Data or Batch with x (n, F), edge_index (2, E) [, edge_attr (E, ...)] -> the same type
    with n' <= n nodes (n' = n for masking and edge perturbation).
    """

    def __init__(self, name: str, ratio: float = 0.2, *, seed: int | None = None,
                 generator: torch.Generator | None = None, **opts: Any) -> None:
        if seed is not None and generator is not None:
            raise ValueError("give seed= or generator=, not both")
        self.name = canonical(name)
        self.ratio = float(ratio)
        self.opts = dict(opts)
        self._aug = build_augmentation(self.name, self.ratio, **opts)  # validates ratio and options
        self.generator = fixed_generator(int(seed)) if seed is not None else generator

    def forward(self, data: Any) -> Any:
        if isinstance(data, Batch):
            return self._aug(data, self.generator)
        if isinstance(data, Data):
            if data.edge_index is None:
                raise ValueError(f"{type(self).__name__}: the graph has no edge_index")
            out = self._aug(Batch.from_data_list([data]), self.generator)
            return out.get_example(0)
        raise ValueError(f"{type(self).__name__} expects a torch_geometric Data or Batch, got {type(data).__name__}")

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.opts.items())
        return f"{type(self).__name__}({self.ratio}{opts})"


class _Named(Augment):
    augmentation: ClassVar[str] = ""

    def __init__(self, ratio: float = 0.2, *, seed: int | None = None, generator: torch.Generator | None = None,
                 **opts: Any) -> None:
        super().__init__(self.augmentation, ratio, seed=seed, generator=generator, **opts)


class DropNodes(_Named):
    """Node dropping: removes ``int(n * ratio)`` random nodes (at most n - 1) and their edges."""
    augmentation = "drop_nodes"


class PerturbEdges(_Named):
    """Edge perturbation: removes ``int(E * ratio)`` random directed edges (``add=True``: adds as many)."""
    augmentation = "perturb_edges"


class MaskAttributes(_Named):
    """Attribute masking of ``int(n * ratio)`` nodes (``mask_value``: gaussian, mean, zero, number, token)."""
    augmentation = "mask_attributes"


class Subgraph(_Named):
    """Subgraph by random neighbourhood expansion, keeping ``n - int(n * ratio)`` nodes."""
    augmentation = "subgraph"


class Random4(Augment):
    """One of the four augmentations drawn per call (``per_graph=True``: one draw per graph of a Batch,
    GraphCL's released TU code); options go to the augmentations that take them."""

    def __init__(self, ratio: float = 0.2, *, per_graph: bool = False, seed: int | None = None,
                 generator: torch.Generator | None = None, **opts: Any) -> None:
        super().__init__("random4_graph" if per_graph else "random4", ratio, seed=seed, generator=generator, **opts)
