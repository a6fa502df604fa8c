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

from suite.losses.base import ContrastiveLoss, as_views, check_positive, check_queue, register_loss
from suite.losses.core import gather_views, normalize


@register_loss("cmc")
class CMC(ContrastiveLoss):
    multi_view = True

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")

    def forward(self, z_a: Tensor, z_b: Tensor | None = None, queue: Tensor | None = None) -> Tensor:
        views = normalize(as_views(z_a, z_b))  # (V, N, d)
        queue = check_queue(queue, views.shape[2], views.dtype)
        v = views.shape[0]
        t = self.temperature
        gviews = gather_views(views)  # (V, M, d)
        lse = torch.logsumexp(torch.einsum("and,bmd->anbm", views, gviews) / t, dim=-1)  # (V, N, V)
        if queue is not None:
            lse_q = torch.logsumexp(views @ normalize(queue).T / t, dim=-1)  # (V, N)
            lse = torch.logaddexp(lse, lse_q[:, :, None])
        pos = torch.einsum("and,bnd->anb", views, views) / t  # (V, N, V)
        off = ~torch.eye(v, dtype=torch.bool, device=views.device)  # ordered pairs v != u
        per_pair = (lse - pos).mean(dim=1)  # (V, V) mean over anchors
        return per_pair[off].sum()
