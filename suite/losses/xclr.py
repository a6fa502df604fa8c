"""X-Sample contrastive loss (Sobal et al. 2024, "X-Sample Contrastive Loss: Improving Contrastive
Learning with Sample Similarity Graphs", X-CLR, Sec. 2.2).

A soft similarity graph G between the N samples (diagonal 1) replaces the one-hot positive.
Over the 2N embeddings (two views), embedding k belongs to sample k mod N and

    s_i = softmax_{k != i}( G_{i,k} / tau_s )      targets
    p_i = softmax_{k != i}( cos(z_i, z_k) / tau )  predictions
    loss = mean_i H(s_i, p_i) = mean_i -sum_{k != i} s_ik log p_ik

With the identity graph and tau_s -> 0 this is InfoNCE (``negatives="all"``); with a label graph
(G = 1 within a class) and tau_s -> 0 it is SupCon. Inputs are L2-normalised inside. Graph helpers:
:mod:`suite.losses.graphs`.

Queue: ``queue`` (Q, d) adds Q candidates to every anchor. Their graph values with the batch samples
are ``queue_similarity`` (N, Q); an entry of ``-inf`` (and every entry when ``queue_similarity`` is
None) marks a pure negative with zero target mass. (A graph value 0 is not "no similarity": it is
target logit 0, weight e^0 in the target softmax; with G = I, N = 256, tau_s = 0.1 such entries took
15 % of the target mass at Q = 4096 and 74 % at Q = 65,536.)
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
        # logits (2N, 2M[+Q]) = cos / tau, -inf at each anchor's own entry
        za_n, zb_n = normalize(z_a), normalize(z_b)
        ps = pair_similarities(za_n, zb_n, negatives="all", symmetric=True, queue=queue, scale=1.0 / self.temperature)
        m = g.shape[1]
        # targets from the (N, M) sample graph: the same weights for both views of a sample, the anchor's
        # own entry excluded; never tiled to (2N, 2M)
        t = g / self.target_temperature  # (N, M)
        own = (sd.rank() * n + torch.arange(n, device=g.device))[:, None]
        t_excl = t.scatter(1, own, NEG_INF)
        parts = [t_excl, t]
        if queue is not None:
            if queue_similarity is None:
                qs = torch.full((n, queue.shape[0]), NEG_INF, dtype=z_a.dtype, device=z_a.device)
            else:
                qs = _queue_graph(queue_similarity, n, queue.shape[0]).to(z_a.dtype)
            parts.append(qs / self.target_temperature)
        log_z = torch.logsumexp(torch.cat(parts, 1), 1, keepdim=True)  # (N, 1) target normaliser
        w_excl, w = (t_excl - log_z).exp(), (t - log_z).exp()  # (N, M) target weights
        # sum_k s_ik * logit_ik = z_i / tau . sum_k s_ik c_k: weighted candidate sums by (N, M) @ (M, d)
        # products, never an elementwise pass over the (2N, 2M) logits (the self entry has weight 0)
        ga, gb = ps.cand[:m], ps.cand[m:]  # (M, d) candidates of all ranks (gathered once, by pair_similarities)
        mix_a = w_excl @ ga + w @ gb  # (N, d) target-weighted candidates of the view-a anchors
        mix_b = w @ ga + w_excl @ gb
        if queue is not None:
            wq = (parts[2] - log_z).exp()  # (N, Q)
            qn = normalize(queue)
            mix_a, mix_b = mix_a + wq @ qn, mix_b + wq @ qn
        cross = torch.cat([(za_n * mix_a).sum(1), (zb_n * mix_b).sum(1)]) / self.temperature  # (2N,)
        # H(s_i, p_i) = logsumexp_k logit_ik - sum_k s_ik logit_ik  (sum_k s_ik = 1)
        return (torch.logsumexp(ps.sim, 1) - cross).mean()


def _queue_graph(qs: Tensor, n: int, q: int) -> Tensor:
    if not isinstance(qs, Tensor) or not qs.dtype.is_floating_point:
        raise ValueError(f"queue_similarity must be a floating-point tensor of shape ({n}, {q})")
    if qs.shape != (n, q):
        raise ValueError(f"queue_similarity must have shape ({n}, {q}); got {tuple(qs.shape)}")
    if bool(torch.isnan(qs).any()) or bool((qs == float("inf")).any()):
        raise ValueError("queue_similarity may hold finite values or -inf (pure negative); found NaN or +inf")
    return qs


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
