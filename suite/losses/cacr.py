"""Contrastive Attraction and Contrastive Repulsion (Zheng et al., CACR; earlier CCT), Eq. (2)-(4)
with the costs and conditional distributions of Sec. 3.2, as in the authors' small-scale code.

Views ``(V, N, d)``, V = K + 1 (K positives per query); features L2-normalised inside;
cost c(x, y) = ||x - y||^2.

Attraction (CA): for query z_v,i the positives are z_u,i, u != v, weighted by the positive
conditional distribution pi^+(u | v, i) = softmax_u( t_pos * ||z_v,i - z_u,i||^2 ):

    L_CA = mean_{v, i} sum_{u != v} pi^+(u | v, i) ||z_v,i - z_u,i||^2

Repulsion (CR): for each view pair v < u the negatives of z_v,i are z_u,j, j != i (plus the queue),
weighted by pi^-(j | v, i) = softmax_j( -t_neg * ||z_v,i - z_u,j||^2 ):

    L_CR = - mean_{v<u, i} sum_j pi^-(j | v, i) ||z_v,i - z_u,j||^2

loss = L_CA + L_CR. The weights keep their gradient unless ``detach_weights=True``.
With V = 2 the single positive has attraction weight 1. ``uaur`` (CUT, the paper's ablation) is the
same objective with uniform weights, i.e. t_pos = t_neg = 0; ``cct`` is an alias of ``cacr``.
``diagnostics()`` reports both terms, the positive-weight entropy and H(X^-|X) of the negative
weights (CACR Eq. 8 estimate).

Shapes: views (V, N, d) or z_a, z_b (N, d); queue (Q, d) optional -> ().
Example: >>> CACR(t_pos=1.0, t_neg=2.0)(torch.randn(5, 8, 16))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss, as_views, check_queue, register_loss
from suite.losses.core import NEG_INF, gather_views, normalize, sq_dists_normalized


def _entropy(log_w: Tensor, dim: int = -1) -> Tensor:
    """Entropy of softmax weights given log-weights with -inf for excluded entries."""
    w = log_w.exp()
    return -(w * log_w.masked_fill(torch.isinf(log_w), 0.0)).sum(dim)


@register_loss("cacr", "cct")
class CACR(ContrastiveLoss):
    multi_view = True

    def __init__(self, t_pos: float = 1.0, t_neg: float = 2.0, detach_weights: bool = False) -> None:
        super().__init__()
        self.t_pos = float(t_pos)
        self.t_neg = float(t_neg)
        self.detach_weights = bool(detach_weights)

    def forward(self, z_a: Tensor, z_b: Tensor | None = None, queue: Tensor | None = None) -> Tensor:
        views = normalize(as_views(z_a, z_b))  # (V, N, d)
        queue = check_queue(queue, views.shape[2], views.dtype)
        v, n, _ = views.shape
        dev = views.device
        eye_v = torch.eye(v, dtype=torch.bool, device=dev)

        # attraction: d_pos[i, a, b] = ||z_a,i - z_b,i||^2, positives b != a
        d_pos = (2.0 - 2.0 * torch.einsum("and,bnd->nab", views, views)).clamp_min(0.0)  # (N, V, V)
        logit_pos = (self.t_pos * d_pos).masked_fill(eye_v, NEG_INF)
        log_w_pos = torch.log_softmax(logit_pos, dim=-1)  # (N, V, V)
        w_pos = log_w_pos.exp()
        if self.detach_weights:
            w_pos = w_pos.detach()
        attraction = (w_pos * d_pos).sum(-1).mean()

        # repulsion over view pairs a < b: anchors z_a (local), negatives z_b,j of all ranks, j != i
        gviews = gather_views(views)  # (V, M, d)
        ia, ib = torch.triu_indices(v, v, 1, device=dev)  # P pairs
        d_neg = sq_dists_normalized(views[ia], gviews[ib])  # (P, N, M)
        own = sd.rank() * n + torch.arange(n, device=dev)
        self_mask = torch.zeros(n, d_neg.shape[2], dtype=torch.bool, device=dev).scatter_(1, own[:, None], True)
        if queue is not None:
            d_q = sq_dists_normalized(views[ia], normalize(queue))  # (P, N, Q)
            d_neg = torch.cat([d_neg, d_q], dim=2)
            self_mask = torch.cat([self_mask, torch.zeros(n, d_q.shape[2], dtype=torch.bool, device=dev)], dim=1)
        logit_neg = (-self.t_neg * d_neg).masked_fill(self_mask, NEG_INF)
        log_w_neg = torch.log_softmax(logit_neg, dim=-1)  # (P, N, M[+Q])
        w_neg = log_w_neg.exp()
        if self.detach_weights:
            w_neg = w_neg.detach()
        repulsion = -(w_neg * d_neg.masked_fill(self_mask, 0.0)).sum(-1).mean()

        self._record(
            attraction=attraction,
            repulsion=repulsion,
            pos_weight_entropy=_entropy(log_w_pos.detach()).mean(),
            cond_entropy=_entropy(log_w_neg.detach()).mean(),
        )
        return attraction + repulsion


register_loss("uaur", "cut", t_pos=0.0, t_neg=0.0)(CACR)
