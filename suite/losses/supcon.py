"""Supervised contrastive loss (Khosla et al. 2020, SupCon Eq. 2, L_out).

Over the 2N embeddings (two views of N labelled samples), anchor i has positives P(i) = all k != i
with the same label and candidates A(i) = all k != i:

    l_i = -1/|P(i)| sum_{p in P(i)} log( exp(s_ip / tau) / sum_{a in A(i)} exp(s_ia / tau) )

Inputs are L2-normalised inside. ``queue`` (Q, d) with ``queue_labels`` (Q,) adds candidates
(and positives where labels match).

Shapes: z_a, z_b (N, d), labels (N,) -> ().
Example: >>> SupCon()(torch.randn(8, 16), torch.randn(8, 16), torch.randint(0, 3, (8,)))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss, check_labels, check_pair, check_positive, check_queue, register_loss
from suite.losses.core import normalize, pair_similarities


@register_loss("supcon")
class SupCon(ContrastiveLoss):
    requires = ("labels",)

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")

    def forward(
        self, z_a: Tensor, z_b: Tensor, labels: Tensor, queue: Tensor | None = None, queue_labels: Tensor | None = None
    ) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        labels = check_labels(labels, z_a.shape[0])
        queue = check_queue(queue, z_a.shape[1], z_a.dtype)
        ps = pair_similarities(normalize(z_a), normalize(z_b), negatives="all", symmetric=True, queue=queue,
                               scale=1.0 / self.temperature, mask_value=-1e9)  # finite: 0 * mask == 0
        gl = sd.gather_nograd(labels)
        anchor_y = torch.cat([labels, labels])  # (2N,)
        cand_y = torch.cat([gl, gl])  # (2M,)
        if queue is not None:
            if queue_labels is None:
                raise ValueError("supcon with a queue needs queue_labels of shape (Q,)")
            cand_y = torch.cat([cand_y, check_labels(queue_labels, queue.shape[0], "queue_labels")])
        pos_mask = (anchor_y[:, None] == cand_y[None, :]).to(ps.sim.dtype)  # (2N, C)
        rows = torch.arange(pos_mask.shape[0], device=pos_mask.device)
        m = cand_y.shape[0] if queue is None else cand_y.shape[0] - queue.shape[0]
        self_col = sd.rank() * labels.shape[0] + rows % labels.shape[0] + (rows >= labels.shape[0]) * (m // 2)
        pos_mask[rows, self_col] = 0.0  # an anchor is not its own positive
        # mean over P(i) of log p_ip = (sum_p logit_ip) / |P(i)| - logsumexp_a logit_ia
        per_anchor = torch.logsumexp(ps.sim, 1) - (pos_mask * ps.sim).sum(1) / pos_mask.sum(1)
        return per_anchor.mean()
