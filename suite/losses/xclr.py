"""X-Sample contrastive loss (Sevilla-Lara et al. 2024, X-CLR, Sec. 2.2).

A soft similarity graph G between the N samples (diagonal 1) replaces the one-hot positive.
Over the 2N embeddings (two views), embedding k belongs to sample k mod N and

    s_i = softmax_{k != i}( G_{i,k} / tau_s )      targets
    p_i = softmax_{k != i}( cos(z_i, z_k) / tau )  predictions
    loss = mean_i H(s_i, p_i) = mean_i -sum_{k != i} s_ik log p_ik

With the identity graph and tau_s -> 0 this is InfoNCE (``negatives="all"``); with a label graph
(G = 1 within a class) and tau_s -> 0 it is SupCon. Inputs are L2-normalised inside. Graph helpers:
:mod:`suite.losses.graphs`.

Queue: ``queue`` (Q, d) adds Q candidates to every anchor; their graph values with the batch
samples are ``queue_similarity`` (N, Q) (default 0: pure negatives).
Under torch.distributed, ``similarity`` is (N, W*N) (local samples x all samples, rank order) or the
global (W*N, W*N) graph.

Shapes: z_a, z_b (N, d), similarity (N, N) -> ().
Example: >>> XCLR()(torch.randn(8, 16), torch.randn(8, 16), torch.eye(8))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss, _check_float, check_pair, check_positive, check_queue, register_loss
from suite.losses.core import NEG_INF, normalize, pair_similarities


def soft_cross_entropy(logits: Tensor, target_logits: Tensor) -> Tensor:
    """Mean over rows of H(softmax(target_logits), softmax(logits)); -inf entries are excluded."""
    log_p = torch.log_softmax(logits, dim=1)
    s = torch.softmax(target_logits, dim=1)
    return -(s * log_p.masked_fill(torch.isinf(log_p), 0.0)).sum(1).mean()


@register_loss("xclr", "x_clr")
class XCLR(ContrastiveLoss):
    requires = ("similarity",)

    def __init__(self, temperature: float = 0.1, target_temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.target_temperature = check_positive(target_temperature, "target_temperature")

    def forward(
        self,
        z_a: Tensor,
        z_b: Tensor,
        similarity: Tensor,
        queue: Tensor | None = None,
        queue_similarity: Tensor | None = None,
    ) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        n = z_a.shape[0]
        w = sd.world_size()
        g = _local_graph(similarity, n, w).to(z_a.dtype)  # (N, W*N)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype)
        ps = pair_similarities(normalize(z_a), normalize(z_b), negatives="all", symmetric=True, queue=queue)
        # target graph over anchors (2N local) x candidates (2M gathered [+ Q])
        target = torch.cat([g, g], dim=1)  # (N, 2M)
        target = torch.cat([target, target])  # (2N, 2M)
        if queue is not None:
            qs = torch.zeros(n, queue.shape[0], dtype=z_a.dtype, device=z_a.device) if queue_similarity is None else queue_similarity
            _check_float(qs, "queue_similarity")
            if qs.shape != (n, queue.shape[0]):
                raise ValueError(f"queue_similarity must have shape ({n}, {queue.shape[0]}); got {tuple(qs.shape)}")
            target = torch.cat([target, torch.cat([qs, qs]).to(z_a.dtype)], dim=1)
        target = (target / self.target_temperature).masked_fill(torch.isinf(ps.sim), NEG_INF)
        return soft_cross_entropy(ps.sim / self.temperature, target)


def _local_graph(similarity: Tensor, n: int, w: int) -> Tensor:
    if not isinstance(similarity, Tensor):
        raise ValueError(f"similarity must be a torch.Tensor of shape ({n}, {n}), got {type(similarity).__name__}")
    _check_float(similarity, "similarity")
    if similarity.dim() != 2:
        raise ValueError(f"similarity must be a 2-D (N, N) graph; got shape {tuple(similarity.shape)}")
    if tuple(similarity.shape) == (n, n * w):
        return similarity
    if w > 1 and tuple(similarity.shape) == (n * w, n * w):
        r = sd.rank()
        return similarity[r * n : (r + 1) * n]
    want = f"({n}, {n})" if w == 1 else f"({n}, {n * w}) or ({n * w}, {n * w})"
    raise ValueError(f"similarity graph must have shape {want} for a batch of N = {n}; got {tuple(similarity.shape)}")
