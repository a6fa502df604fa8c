"""Example inputs of a loss, made from what the loss declares: the one recipe every bench, ``make gpu-check`` and
the tests use to call a loss they know only by name.

A loss says how it is called through its class attributes (:class:`suite.losses.ContrastiveLoss`): ``multi_view``
(``forward(views)`` with views (V, N, d)) and ``requires`` (the keyword inputs it cannot run without). Each required
input has one maker here (:data:`MAKERS`):

- ``labels``: (N,) class labels drawn from ``classes`` classes;
- ``similarity``: X-CLR's graph, the class graph G = Ê Êᵀ of the unit rows of E = one_hot(labels) + 0.3, either as
  the (N, N) matrix (``graph="matrix"``) or as its (N, classes) embeddings (``graph="embeddings"``, given as
  ``similarity_embeddings``: never an (N, N) tensor, the tiled path's form). Both forms are the same graph.

The embeddings are drawn first, from ``generator`` on the CPU (the same values on every device), one (N, d) view
after another: a two-view loss gets the first two views as ``z_a`` and ``z_b``, so losses of either kind on the
same seed see the same samples. Then the labels, then nothing else.

Shapes: ``example_inputs("supcon", n, d).args``: (z_a (N, d), z_b (N, d)); a multi-view loss: (views (V, N, d),).
Example: >>> import suite.losses as L
>>> ex = example_inputs("xclr", 8, 16, generator=torch.Generator().manual_seed(0))
>>> ex.call(L.build("xclr"))().backward()
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

GRAPHS = ("matrix", "embeddings")
CLASS_GRAPH_OFFSET = 0.3  # E = one_hot(labels) + 0.3: same class 1, other classes about 0.4 after normalising


@dataclass
class Example:
    """One call's inputs: ``args`` the embeddings (``(z_a, z_b)`` or ``(views,)``, the leaves a backward reaches),
    ``extra`` the keyword inputs the loss requires."""
    args: tuple[Tensor, ...]
    extra: dict[str, Tensor] = field(default_factory=dict)

    @property
    def leaves(self) -> list[Tensor]:
        return list(self.args)

    def call(self, loss: Callable[..., Tensor]) -> Callable[[], Tensor]:
        """``loss`` on these inputs, as a function of nothing (what the timing kit times: :mod:`suite.measure`)."""
        return lambda: loss(*self.args, **self.extra)


def _spec(loss: Any) -> Any:
    """The class (or object) whose ``multi_view`` and ``requires`` describe ``loss`` (a registered name too)."""
    if isinstance(loss, str):
        from suite.losses import loss_class

        return loss_class(loss)
    return loss


def class_labels(n: int, classes: int, generator: torch.Generator | None = None) -> Tensor:
    """(N,) labels drawn uniformly from ``classes`` classes."""
    return torch.randint(0, classes, (n,), generator=generator)


def class_graph(labels: Tensor, classes: int, graph: str = "matrix", dtype: torch.dtype = torch.float32) -> Tensor:
    """The class graph of ``labels``: ``"embeddings"`` E = one_hot + 0.3, (N, classes); ``"matrix"`` G = Ê Êᵀ of its
    unit rows, (N, N), diagonal 1 (X-CLR's ``similarity``; the embeddings are its ``similarity_embeddings``)."""
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {GRAPHS}; got {graph!r}")
    emb = F.one_hot(labels, classes).to(dtype) + CLASS_GRAPH_OFFSET
    if graph == "embeddings":
        return emb
    unit = F.normalize(emb, dim=1)
    return unit @ unit.T


def _labels(n: int, classes: int, graph: str, labels: Tensor, dtype: torch.dtype) -> dict[str, Tensor]:
    return {"labels": labels}


def _similarity(n: int, classes: int, graph: str, labels: Tensor, dtype: torch.dtype) -> dict[str, Tensor]:
    key = "similarity" if graph == "matrix" else "similarity_embeddings"
    return {key: class_graph(labels, classes, graph, dtype)}


# a required input's maker: (N, classes, graph, the labels drawn, the floating dtype) -> its keyword inputs
MAKERS: dict[str, Callable[[int, int, str, Tensor, torch.dtype], dict[str, Tensor]]] = {
    "labels": _labels, "similarity": _similarity}


def example_extra(loss: Any, n: int, *, classes: int = 10, graph: str = "matrix",
                  generator: torch.Generator | None = None, device: torch.device | str | None = None,
                  dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """The keyword inputs ``loss`` (a name, a loss class or object) requires at batch size ``n`` (:data:`MAKERS`); the
    labels are drawn from ``generator`` whether or not the loss takes them, so the draws after them do not depend on
    the loss. Floating inputs in ``dtype``, all on ``device``."""
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {GRAPHS}; got {graph!r}")
    if classes < 1:
        raise ValueError(f"classes must be >= 1; got {classes}")
    spec = _spec(loss)
    labels = class_labels(n, classes, generator).to(device=device)  # drawn on the CPU, the graph made on `device`
    extra: dict[str, Tensor] = {}
    for kind in tuple(getattr(spec, "requires", ())):
        if kind not in MAKERS:
            name = getattr(spec, "name", "") or getattr(spec, "__name__", type(spec).__name__)
            raise ValueError(f"loss {name!r} requires {kind!r}, which suite.losses.examples cannot make (it makes: "
                             f"{', '.join(MAKERS)}); add a maker to MAKERS")
        extra.update(MAKERS[kind](n, classes, graph, labels, dtype))
    return extra


def example_inputs(loss: Any, n: int, d: int, *, views: int = 3, classes: int = 10, graph: str = "matrix",
                   generator: torch.Generator | None = None, device: torch.device | str | None = None,
                   dtype: torch.dtype = torch.float32, requires_grad: bool = True) -> Example:
    """Seeded inputs of one call of ``loss`` (a registered name, a loss class or object) with ``n`` samples of
    dimension ``d``: ``views`` views (V, N, d) for a multi-view loss, else ``z_a, z_b`` (the first two of the same
    seed's views), and :func:`example_extra`. The embeddings are leaves (``requires_grad``), in ``dtype`` on
    ``device``."""
    if n < 1 or d < 1 or views < 2:
        raise ValueError(f"example inputs need n >= 1, d >= 1 and views >= 2; got n={n}, d={d}, views={views}")
    spec = _spec(loss)
    multi = bool(getattr(spec, "multi_view", False))
    z = [torch.randn(n, d, generator=generator) for _ in range(views if multi else 2)]  # one draw a view
    drawn = (torch.stack(z),) if multi else tuple(z)
    args = tuple(t.to(device=device, dtype=dtype).requires_grad_(requires_grad) for t in drawn)
    extra = example_extra(spec, n, classes=classes, graph=graph, generator=generator, device=device, dtype=dtype)
    return Example(args, extra)


__all__ = ["Example", "GRAPHS", "MAKERS", "class_graph", "class_labels", "example_extra", "example_inputs"]
