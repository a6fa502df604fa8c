"""Contrastive Attraction and Contrastive Repulsion (Zheng, Chen et al., "Contrastive Attraction and
Contrastive Repulsion for Representation Learning", CACR; its earlier form is CCT, Zheng, Chen et al.
"Contrastive Conditional Transport for Representation Learning").

Views ``(V, N, d)``, V = K + 1 (K positives per query); features L2-normalised inside;
cost c(x, y) = ||x - y||^2. Every view in turn is the query (CACR App. Algorithm 3), and both terms
are averaged over the V views and the N queries.

Attraction (CA, Eq. 5's estimate of Eq. 3): the positives of query z_v,i are z_u,i, u != v, weighted
by the positive conditional distribution pi^+(u | v, i) = softmax_u( t_pos * ||z_v,i - z_u,i||^2 ):

    L_CA = mean_{v, i} sum_{u != v} pi^+(u | v, i) ||z_v,i - z_u,i||^2

Repulsion (CR, Eq. 5's estimate of Eq. 4). ``negatives=`` selects the support of p(x_i^-):

- ``"same_view"`` (default; the paper: CACR Sec. 3.2 Eq. 5, CCT Eq. 9, App. Algorithm 3): the
  negatives of z_v,i are the OTHER QUERIES of its own view, z_v,j with j != i, plus the queue;
- ``"cross_view"`` (the authors' released small-scale code): for each view pair v < u the negatives
  of z_v,i are z_u,j, j != i, plus the queue, averaged over the V(V-1)/2 pairs.

    L_CR = - mean_{v, i} sum_j pi^-(j | v, i) ||z_v,i - x_j||^2,
    pi^-(j | v, i) = softmax_j( -t_neg * ||z_v,i - x_j||^2 )

loss = L_CA + L_CR. Eq. 5 has no stop-gradient: the weights keep their gradient unless
``detach_weights=True``. With V = 2 the single positive has attraction weight 1.

MoCo form (App. Algorithm 3): ``keys=`` (V, N, d), the momentum encoder's embeddings of the same V
views. Then the positives of query z_v,i are the keys k_u,i, u != v, with weights computed without
gradient (the keys come from the momentum encoder); the negatives are the queue plus the same-view
queries z_v,j (j != i), whose weights keep their gradient. Only ``negatives="same_view"``.

``uaur`` (the paper's ablation, Eq. 11) is the same objective with uniform weights, t_pos = t_neg = 0;
``cct`` is an alias of ``cacr``. ``diagnostics()`` reports both terms, the positive-weight entropy and
H(X^-|X) of the negative weights (CACR Eq. 8 estimate).

Shapes: views (V, N, d) or z_a, z_b (N, d); queue (Q, d), keys (V, N, d) optional -> ().
Example: >>> CACR(t_pos=1.0, t_neg=2.0)(torch.randn(5, 8, 16))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import _check_float, as_views, check_device, check_choice, check_finite, check_queue
from suite.losses.core import NEG_INF, gather_views, normalize, sq_dists_normalized, view_gram
from suite.losses.registry import register_loss
from suite.losses.tiling import softmin_cost

ARRANGEMENTS = ("same_view", "cross_view")


def _entropy(log_w: Tensor, dim: int = -1) -> Tensor:
    """Entropy of softmax weights given log-weights with -inf for excluded entries."""
    w = log_w.exp()
    return -(w * log_w.masked_fill(torch.isinf(log_w), 0.0)).sum(dim)


@register_loss("cacr", "cct")
class CACR(ContrastiveLoss):
    fused_tiles = "yes"  # the repulsion's rows: fused.soft_cost (the attraction is (N, V, V))
    multi_view = True

    def __init__(self, t_pos: float = 1.0, t_neg: float = 2.0, detach_weights: bool = False,
                 negatives: str = "same_view") -> None:
        super().__init__()
        self.t_pos = check_finite(t_pos, "t_pos", 0.0)
        self.t_neg = check_finite(t_neg, "t_neg", 0.0)
        self.detach_weights = bool(detach_weights)
        self.negatives = check_choice(negatives, "negatives", ARRANGEMENTS)

    def forward(self, z_a: Tensor, z_b: Tensor | None = None, queue: Tensor | None = None,
                keys: Tensor | None = None) -> Tensor:
        views = normalize(as_views(z_a, z_b), "views")  # (V, N, d)
        queue = check_queue(queue, views.shape[2], views.dtype, views.device)
        v, n, _ = views.shape
        dev = views.device
        if keys is not None:
            if self.negatives != "same_view":
                raise ValueError('keys= (the MoCo form, CACR Algorithm 3) needs negatives="same_view"')
            check_device(keys, "keys", views.device, "the views")
            _check_float(keys, "keys")
            if keys.shape != views.shape:
                raise ValueError(f"keys must have the shape of the views {tuple(views.shape)}; got {tuple(keys.shape)}")
            keys = normalize(keys.detach().to(views.dtype), "keys")

        # attraction: d_pos[i, a, b] = ||q_a,i - x_b,i||^2, positives b != a (x = keys or the views)
        d_pos = (2.0 - 2.0 * view_gram(views, keys)).clamp_min(0.0)  # (N, V, V)
        eye_v = torch.eye(v, dtype=torch.bool, device=dev)
        logit_pos = self.t_pos * (d_pos if keys is None else d_pos.detach())
        log_w_pos = torch.log_softmax(logit_pos.masked_fill(eye_v, NEG_INF), dim=-1)  # (N, V, V)
        w_pos = log_w_pos.exp()
        if self.detach_weights:
            w_pos = w_pos.detach()
        attraction = (w_pos * d_pos.masked_fill(eye_v, 0.0)).sum(-1).mean()

        gviews = gather_views(views)  # (V, M, d) all ranks
        if self.negatives == "same_view":  # query z_v,i vs z_v,j (+ queue)
            anchors, cands = views, gviews
        else:  # view pairs a < b: anchors z_a (local), negatives z_b,j of all ranks, j != i
            ia, ib = torch.triu_indices(v, v, 1, device=dev)
            anchors, cands = views[ia], gviews[ib]  # (P, N, d), (P, M, d)
        groups, m = anchors.shape[0], cands.shape[1]
        qn = normalize(queue, "queue") if queue is not None else None
        own = sd.rank() * n

        cols = m + (0 if queue is None else queue.shape[0])
        chunk = self._tile(groups * n, cols)
        if chunk is not None:  # fused tiles per view (pair): the weighted costs' row statistics only
            own_cols = own + torch.arange(n, device=dev)
            same = cands is anchors  # each view's queries against themselves (one rank, same_view)
            rows = anchors.unbind(0)  # (its backward stacks the views' gradients once; indexing would zero-fill
            # a (V, N, d) gradient per view)
            parts = [softmin_cost(a, a if same else c, qn, own_cols, self.t_neg, self.detach_weights, chunk,
                                  self_scale=1.0 if same else None)
                     for a, c in zip(rows, rows if same else cands.unbind(0))]  # a loop over V views (or pairs)
            repulsion = torch.cat([p[0] for p in parts]).mean()
            cond_entropy = torch.cat([p[1] for p in parts]).mean()
        else:
            d_neg = sq_dists_normalized(anchors, cands)  # (G, N, M)
            k = torch.arange(n, device=dev)
            self_mask = torch.zeros(n, m, dtype=torch.bool, device=dev).index_put_((k, own + k), torch.tensor(True))
            if qn is not None:
                d_neg = torch.cat([d_neg, sq_dists_normalized(anchors, qn)], dim=2)
                self_mask = torch.cat([self_mask, torch.zeros(n, qn.shape[0], dtype=torch.bool, device=dev)], 1)
            log_w = torch.log_softmax((-self.t_neg * d_neg).masked_fill(self_mask, NEG_INF), dim=-1)
            w_neg = log_w.exp()
            if self.detach_weights:
                w_neg = w_neg.detach()
            repulsion = -(w_neg * d_neg.masked_fill(self_mask, 0.0)).sum(-1).mean()
            cond_entropy = _entropy(log_w.detach()).mean()

        self._record(
            attraction=attraction,
            repulsion=repulsion,
            pos_weight_entropy=_entropy(log_w_pos.detach()).mean(),
            cond_entropy=cond_entropy,
        )
        return attraction + repulsion


register_loss("uaur", "cut", t_pos=0.0, t_neg=0.0)(CACR)
