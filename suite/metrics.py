"""Representation diagnostics used by every front-end's logging.

- :func:`alignment` and :func:`uniformity` (Wang & Isola 2020, Eq. 4-5);
- :func:`conditional_entropy`: H(X^-|X) of CACR (Eq. 8) estimated on a batch with the negative
  conditional distribution pi^-(x^-|x) = softmax over the batch negatives of -t^- ||z - z^-||^2;
  its maximum is log(number of negatives);
- :func:`positive_weight_entropy`: entropy of CACR's positive weights pi^+ over K positives;
- :class:`TemperatureTrace`: effective temperature over steps (MACL's tau_a).
"""
from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import Tensor

from suite.losses.align_uniform import alignment as _alignment
from suite.losses.align_uniform import uniformity as _uniformity
from suite.losses.core import NEG_INF, sq_dists_normalized


@torch.no_grad()
def alignment(z_a: Tensor, z_b: Tensor, alpha: float = 2.0) -> float:
    return float(alignment_on_device(z_a, z_b, alpha))


@torch.no_grad()
def uniformity(z: Tensor, t: float = 2.0) -> float:
    return float(uniformity_on_device(z, t))


@torch.no_grad()
def alignment_on_device(z_a: Tensor, z_b: Tensor, alpha: float = 2.0) -> Tensor:
    """:func:`alignment` as a 0-d tensor on the embeddings' device (no host read: a training step's meter)."""
    return _alignment(F.normalize(z_a.float(), dim=1), F.normalize(z_b.float(), dim=1), alpha)


@torch.no_grad()
def uniformity_on_device(z: Tensor, t: float = 2.0) -> Tensor:
    """:func:`uniformity` as a 0-d tensor on the embeddings' device."""
    return _uniformity(F.normalize(z.float(), dim=1), t)


@torch.no_grad()
def conditional_entropy(z: Tensor, t_neg: float = 2.0, z_neg: Tensor | None = None) -> float:
    """Mean over anchors of H(pi^-(.|z_i)); negatives are the other rows of z (or ``z_neg`` rows).

    Returns nats; the maximum is log(M) with M negatives per anchor (uniform weights).
    """
    z = F.normalize(z.float(), dim=1)
    if z_neg is None:
        d = sq_dists_normalized(z, z)
        logits = (-t_neg * d).masked_fill(torch.eye(z.shape[0], dtype=torch.bool, device=z.device), NEG_INF)
    else:
        logits = -t_neg * sq_dists_normalized(z, F.normalize(z_neg.float(), dim=1))
    log_w = torch.log_softmax(logits, dim=1)
    ent = -(log_w.exp() * log_w.masked_fill(torch.isinf(log_w), 0.0)).sum(1)
    return float(ent.mean())


@torch.no_grad()
def positive_weight_entropy(views: Tensor, t_pos: float = 1.0) -> float:
    """Mean entropy of CACR's positive weights softmax_u(t_pos ||z_v,i - z_u,i||^2) for (V, N, d) views."""
    v = F.normalize(views.float(), dim=-1)
    d = (2 - 2 * torch.einsum("and,bnd->nab", v, v)).clamp_min(0)
    logits = (t_pos * d).masked_fill(torch.eye(v.shape[0], dtype=torch.bool, device=v.device), NEG_INF)
    log_w = torch.log_softmax(logits, dim=-1)
    return float(-(log_w.exp() * log_w.masked_fill(torch.isinf(log_w), 0.0)).sum(-1).mean())


class TemperatureTrace:
    """Records (step, temperature) pairs, e.g. MACL's adaptive tau_a each step."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.values: list[float] = []

    def update(self, step: int, value: float) -> None:
        self.steps.append(step)
        self.values.append(float(value))

    def summary(self) -> dict[str, float]:
        if not self.values:
            return {}
        return {"tau_first": self.values[0], "tau_last": self.values[-1], "tau_min": min(self.values),
                "tau_max": max(self.values), "tau_mean": sum(self.values) / len(self.values)}
