"""Contrastive multiview coding (Tian et al. 2020, CMC Eq. 3-4), the multi-positive baseline of
the CACR tables (CMC with K = 4).

For views ``(V, N, d)`` (L2-normalised inside) InfoNCE is summed over all ordered view pairs
(v, u), v != u: the anchor z_v,i has positive z_u,i and negatives z_u,j, j != i (plus the queue):

    loss = sum_{v != u} mean_i [ -s(z_v,i, z_u,i)/tau + log sum_j exp(s(z_v,i, z_u,j)/tau) ]

With V = 2 this is ``InfoNCE(negatives="cross", symmetric=True)`` times 2 (two ordered pairs).

Shapes: views (V, N, d) or z_a, z_b (N, d); queue (Q, d) optional -> ().
Example: >>> CMC(temperature=0.1)(torch.randn(5, 8, 16))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite.losses.base import ContrastiveLoss
from suite.losses.checks import as_views, check_positive, check_queue
from suite.losses.core import gather_views, normalize, row_logsumexp
from suite.losses.registry import register_loss
from suite.losses.tiling import row_lse_pair, row_lse_sum


@register_loss("cmc")
class CMC(ContrastiveLoss):
    fused_tiles = "yes"
    multi_view = True

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")

    def forward(self, z_a: Tensor, z_b: Tensor | None = None, queue: Tensor | None = None) -> Tensor:
        views = normalize(as_views(z_a, z_b), "views")  # (V, N, d)
        queue = check_queue(queue, views.shape[2], views.dtype, views.device)
        v, n = views.shape[:2]
        t = self.temperature
        gviews = gather_views(views)  # (V, M, d)
        m = gviews.shape[1]
        flat, cand = views.reshape(v * n, -1), gviews.reshape(v * m, -1)  # rows (a, i); columns (b, j)
        qn = normalize(queue, "queue") if queue is not None else None
        cols = v * m + (0 if queue is None else queue.shape[0])
        chunk = self._tile(v * n, cols)
        if chunk is not None:  # tiles per anchor view, against each other view (a loop over views, not samples)
            # unbind, not views[a]: one gradient buffer per view, not a (V, N, d) one per pair in the backward
            vs = views.unbind(0)
            gs = vs if gviews is views else gviews.unbind(0)
            # one rank, no queue: each view pair's two directions from the same products (the fused kernels' pair
            # path; None on the PyTorch tiles)
            both = [row_lse_pair(vs[a], vs[b], scale=1.0 / t) for a in range(v) for b in range(a + 1, v)] if (
                qn is None and gs is vs) else []
            if both and both[0] is not None:
                lse = torch.stack([x.sum() + y.sum() for x, y in filter(None, both)]).sum()
            else:
                lse = torch.stack([row_lse_sum(vs[a], [gs[b] for b in range(v) if b != a], qn, chunk, scale=1.0 / t)
                                   for a in range(v)]).sum()
            # the positives' sum by unordered view pairs: an (N, d) gradient each in the backward, where the (V N, V)
            # einsum's makes two of (V, N, d)
            pos_sum = torch.stack([(vs[a] * vs[b]).sum() for a in range(v) for b in range(a + 1, v)]).sum()
            return (lse - 2.0 * pos_sum / t) / n
        pos = torch.einsum("and,bnd->anb", views, views).reshape(v * n, v) / t  # (V N, V) s(z_a,i, z_b,i) / t
        off = ~torch.eye(v, dtype=torch.bool, device=views.device)

        def rows(s: int, e: int) -> Tensor:
            # sum over the anchors z_a,i of rows [s, e) of sum_{b != a} (logsumexp_j s(z_a,i, z_b,j)/t - pos)
            lse = row_logsumexp((flat[s:e] @ cand.T / t).view(e - s, v, m))  # (rows, V)
            if qn is not None:
                lse = torch.logaddexp(lse, row_logsumexp(flat[s:e] @ qn.T / t)[:, None])
            a = torch.arange(s, e, device=views.device) // n
            return ((lse - pos[s:e]) * off[a]).sum()

        return rows(0, v * n) / n  # mean over anchors, summed over ordered pairs
