"""The pair losses of the InfoNCE family (``infonce``, ``dcl``, ``macl``, ``hard_negative``, ``simclr_l2``): the base
class for what their forward calls share, so that each loss file holds only its own objective.

A pair loss takes two views ``z_a, z_b`` (N, d), an optional ``queue`` (Q, d) of extra negatives and optional pair
``weights`` (N,), and arranges anchors and candidates by its ``negatives`` ("all", "cross", "none") and
``symmetric`` settings (:mod:`suite.losses.core`). In ``forward``:

- :meth:`PairLoss.pair_inputs` validates the inputs (:func:`check_pair`, :func:`check_queue`,
  :func:`check_weights`) and L2-normalises the views of a hypersphere loss;
- :meth:`PairLoss.setup` builds the anchors x candidates arrangement (:func:`suite.losses.core.pair_setup`);
- :meth:`PairLoss.per_anchor` gives a per-pair term (N,) to each of the pair's anchors (A,);
- :meth:`PairLoss.negatives_lse` is each anchor's log-sum-exp over its negatives, dense or tiled;
- :meth:`PairLoss.mean` averages the per-anchor losses with the pair weights.

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional -> ().
Example (a loss written on it)::

    class Alignment(PairLoss):  # -mean positive similarity / tau
        def forward(self, z_a, z_b, queue=None, weights=None):
            z_a, z_b, queue, weights = self.pair_inputs(z_a, z_b, queue, weights)
            return self.mean(-self.per_anchor((z_a * z_b).sum(-1)) / 0.1, weights)
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from suite.losses.base import ContrastiveLoss
from suite.losses.checks import check_choice, check_pair, check_positive, check_queue, check_weights, weighted_rows
from suite.losses.core import NEGATIVES, PairSetup, normalize_pair, pair_lse, pair_row_lse, pair_setup


class PairInputs(NamedTuple):
    z_a: Tensor  # (N, d), validated (float32 / float64), L2-normalised for a hypersphere loss
    z_b: Tensor  # (N, d)
    queue: Tensor | None  # (Q, d), detached, not normalised (pair_setup normalises it)
    weights: Tensor | None  # (N,), detached, mean 1 over all ranks


class PairLoss(ContrastiveLoss):
    """Base of the two-view losses with an anchors x candidates arrangement (``negatives``, ``symmetric``)."""

    negatives: str
    symmetric: bool

    def _arrangement(self, negatives: str, symmetric: bool, temperature: float | None = None) -> None:
        """Set (and check) the arrangement settings, and the temperature of a loss that has one; called by the
        subclass's ``__init__``."""
        if temperature is not None:
            self.temperature = check_positive(temperature, "temperature")
        self.negatives = check_choice(negatives, "negatives", NEGATIVES)
        self.symmetric = bool(symmetric)

    def arrange(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None, weights: Tensor | None,
                scale: float | Tensor) -> tuple[PairInputs, PairSetup]:
        """:meth:`pair_inputs` then :meth:`setup` at ``scale``: the opening of a loss with a fixed temperature."""
        inputs = self.pair_inputs(z_a, z_b, queue, weights)
        return inputs, self.setup(inputs.z_a, inputs.z_b, inputs.queue, scale)

    def pair_inputs(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None, weights: Tensor | None) -> PairInputs:
        """The validated inputs; the views L2-normalised when the loss is a hypersphere loss."""
        z_a, z_b = check_pair(z_a, z_b)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype, z_a.device)
        weights = check_weights(weights, z_a.shape[0], z_a.device)
        if self.hypersphere:
            z_a, z_b = normalize_pair(z_a, z_b)
        return PairInputs(z_a, z_b, queue, weights)

    def setup(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None, scale: float | Tensor) -> PairSetup:
        """Anchors (scaled by ``scale``, 1/tau), candidates and positive columns in this loss's arrangement."""
        return pair_setup(z_a, z_b, negatives=self.negatives, symmetric=self.symmetric, queue=queue, scale=scale)

    def per_anchor(self, per_pair: Tensor) -> Tensor:
        """(N,) -> (A,): pair i's term for each of its anchors (z_a[i], and z_b[i] when symmetric)."""
        return torch.cat([per_pair, per_pair]) if self.symmetric else per_pair

    def negatives_lse(self, ps: PairSetup, uniform: bool = False) -> Tensor:
        """(A,) log-sum-exp of each anchor's scaled similarities to its negatives (self and positive excluded):
        dense, or in row tiles (:func:`suite.losses.core.pair_lse`) when the batch calls for them."""
        chunk = self._tile(ps.n_rows, ps.n_cols)
        if chunk is None:
            return pair_row_lse(ps, exclude_positive=True)
        return pair_lse(ps, chunk, exclude_positive=True, uniform=uniform)

    @staticmethod
    def mean(per_anchor: Tensor, weights: Tensor | None) -> Tensor:
        """(A,) -> (): the mean of the per-anchor losses, anchor a weighted by its pair's weight (a mod N)."""
        return weighted_rows(per_anchor, weights, 0) / per_anchor.shape[0]
