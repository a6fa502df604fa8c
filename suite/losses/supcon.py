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
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import check_labels, check_pair, check_positive, check_queue
from suite.losses.core import normalize, normalize_pair, pair_lse, pair_row_lse, pair_setup
from suite.losses.registry import register_loss


@register_loss("supcon")
class SupCon(ContrastiveLoss):
    fused_tiles = "yes"
    requires = ("labels",)

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")

    def forward(
        self, z_a: Tensor, z_b: Tensor, labels: Tensor, queue: Tensor | None = None, queue_labels: Tensor | None = None
    ) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        labels = check_labels(labels, z_a.shape[0], device=z_a.device)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype, z_a.device)
        za_n, zb_n = normalize_pair(z_a, z_b)
        ps = pair_setup(za_n, zb_n, negatives="all", symmetric=True, queue=queue, scale=1.0 / self.temperature)
        gl = sd.gather_nograd(labels)
        cand = ps.cand  # (2M, d), gathered once by pair_setup
        cand_y = torch.cat([gl, gl])  # (2M,)
        if queue is not None:
            if queue_labels is None:
                raise ValueError("supcon with a queue needs queue_labels of shape (Q,)")
            cand = torch.cat([cand, normalize(queue, "queue")])
            cand_y = torch.cat([cand_y, check_labels(queue_labels, queue.shape[0], "queue_labels", z_a.device)])
        # sum_{p in P(i)} s_ip = z_i . (sum of the candidates of class y_i) - z_i . z_i: per-class sums of
        # the candidates (index_add, O(M d)) instead of a mask over the (2N, 2M) logits
        a = ps.anchors  # (2N, d): [z_a; z_b] / tau, kept by pair_setup (no second copy)
        chunk = self._tile(ps.n_rows, ps.n_cols)
        own, count = _own_class(a, cand, cand_y, ps.self_col, dense=chunk is None)
        # |a_i|^2 by its norm: one (2N, d) gradient in the backward, where a * a's makes three
        pos_sum = own - torch.linalg.vector_norm(a, dim=1).square() * self.temperature
        pos_mean = pos_sum / (count - 1)  # |P(i)| >= 1: the partner view

        # mean over P(i) of log p_ip = (sum_p logit_ip) / |P(i)| - logsumexp_a logit_ia
        lse = pair_row_lse(ps) if chunk is None else pair_lse(ps, chunk, uniform=True)
        return (lse - pos_mean).mean()


def _own_class(a: Tensor, cand: Tensor, cand_y: Tensor, own_col: Tensor, dense: bool) -> tuple[Tensor, Tensor]:
    """For each anchor a_i (its own column ``own_col[i]`` among the candidates): a_i . (sum of the candidates of its
    class) and that class's number of candidates. ``dense`` (the (A, C) logits exist, and a (C, d) buffer is small
    beside them): each class named by where its label first stands in the sorted labels (two searchsorted give that
    and the class's size), sums in a (C, d) buffer, no host read (on a GPU
    torch.unique and bincount each wait for the device: in a training step, for the encoder's forward). Tiled (where a
    (C, d) buffer counts: 2N = 2^20): torch.unique's K classes (one host read), a (K, d) buffer, and with K <= d
    (2N, K) products, so nothing (2N, d) is kept for the backward."""
    if dense:
        labels = torch.sort(cand_y).values
        cls = torch.searchsorted(labels, cand_y)  # each candidate's class: where its label first stands in the sort
        count = torch.searchsorted(labels, cand_y, right=True) - cls  # and how many candidates have it
        sums = torch.zeros_like(cand).index_add_(0, cls, cand)  # the rows no label starts at stay 0
        if sd.world_size() == 1:  # one rank: anchor i is candidate i
            mine, count = cls[: a.shape[0]], count[: a.shape[0]]
        else:
            mine, count = cls[own_col], count[own_col]
        return (a * sums[mine]).sum(1), count.to(a.dtype)
    classes, cls = torch.unique(cand_y, return_inverse=True)
    k = classes.shape[0]
    sums = torch.zeros(k, cand.shape[1], dtype=cand.dtype, device=cand.device).index_add_(0, cls, cand)  # (K, d)
    mine = cls[own_col]
    own = (a @ sums.T).gather(1, mine[:, None]).squeeze(1) if k <= a.shape[1] else (a * sums[mine]).sum(1)
    return own, torch.bincount(cls, minlength=k)[mine].to(a.dtype)
