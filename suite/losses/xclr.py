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

Graph as embeddings: ``similarity_embeddings`` (N, d_t) instead of ``similarity`` gives G = E E^T of the
L2-normalised rows (diagonal 1), built tile by tile, so neither the graph nor the logits need be N x N
(with ``chunk_size``).

Shapes: z_a, z_b (N, d), similarity (N, N) or similarity_embeddings (N, d_t) -> ().
Example: >>> XCLR()(torch.randn(8, 16), torch.randn(8, 16), torch.eye(8))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss, _check_float, check_pair, check_positive, check_queue, register_loss
from suite.losses.core import NEG_INF, normalize, pair_lse, pair_rows, pair_setup
from suite.losses.tiling import weighted_cross


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
        similarity: Tensor | None = None,
        queue: Tensor | None = None,
        queue_similarity: Tensor | None = None,
        similarity_embeddings: Tensor | None = None,
    ) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        n = z_a.shape[0]
        w = sd.world_size()
        if (similarity is None) == (similarity_embeddings is None):
            raise ValueError("xclr needs exactly one of similarity (N, N) and similarity_embeddings (N, d_t)")
        if similarity is not None:
            g = _local_graph(similarity, n, w).to(z_a.dtype)  # (N, W*N)
            graph_rows = lambda i: g[i]  # noqa: E731
        else:  # G = E E^T with unit rows (diagonal 1), built per tile: never an (N, N) tensor
            _check_float(similarity_embeddings, "similarity_embeddings")
            if similarity_embeddings.dim() != 2 or similarity_embeddings.shape[0] != n:
                raise ValueError(f"similarity_embeddings must have shape ({n}, d_t); got {tuple(similarity_embeddings.shape)}")
            e_loc = normalize(similarity_embeddings.detach().to(z_a.dtype))
            e_all = sd.gather_nograd(e_loc)
            graph_rows = lambda i: e_loc[i] @ e_all.T  # noqa: E731
        queue = check_queue(queue, z_a.shape[1], z_a.dtype)
        qs = None
        if queue is not None:
            qs = (torch.full((n, queue.shape[0]), NEG_INF, dtype=z_a.dtype, device=z_a.device) if queue_similarity is None
                  else _queue_graph(queue_similarity, n, queue.shape[0]).to(z_a.dtype)) / self.target_temperature
        # logits (2N, 2M[+Q]) = cos / tau, -inf at each anchor's own entry
        za_n, zb_n = normalize(z_a), normalize(z_b)
        ps = pair_setup(za_n, zb_n, negatives="all", symmetric=True, queue=queue, scale=1.0 / self.temperature)
        m = ps.cand.shape[0] // 2
        ga, gb = ps.cand[:m], ps.cand[m:]  # (M, d) candidates of all ranks (gathered once)
        anchors_n = torch.cat([za_n, zb_n])
        qn = ps.queue
        off = sd.rank() * n

        def targets(i0: int, i1: int) -> tuple[Tensor, Tensor, Tensor | None]:
            """Target weights of samples [i0, i1): on the same view (own entry 0), the other view, the queue."""
            # targets from the (N, M) sample graph: the same weights for both views of a sample, the anchor's
            # own entry excluded
            idx = torch.arange(i0, i1, device=z_a.device)
            t = graph_rows(idx) / self.target_temperature  # (rows, M)
            t_excl = t.scatter(1, (off + idx)[:, None], NEG_INF)
            parts = [t_excl, t] + ([qs[i0:i1]] if qs is not None else [])
            log_z = torch.logsumexp(torch.cat(parts, 1), 1, keepdim=True)  # (rows, 1) target normaliser
            wq = (qs[i0:i1] - log_z).exp() if qs is not None else None
            return (t_excl - log_z).exp(), (t - log_z).exp(), wq

        def targets_mix(i0: int, i1: int, view: int) -> Tensor:
            """Target-weighted candidate sums (rows, d) of anchors of samples [i0, i1) in ``view``:
            sum_k s_ik logit_ik = z_i / tau . sum_k s_ik c_k by (rows, M) @ (M, d) products, never an
            elementwise pass over the logits (the self entry has weight 0)."""
            w_excl, w_other, wq = targets(i0, i1)
            same, other = (ga, gb) if view == 0 else (gb, ga)
            mix = w_excl @ same + w_other @ other
            return mix + wq @ qn if wq is not None else mix

        def cross_rows(s: int, e: int) -> Tensor:  # sum over anchors [s, e) of sum_k s_ik logit_ik
            mixes = [targets_mix(max(s, v * n) - v * n, min(e, (v + 1) * n) - v * n, v)
                     for v in (0, 1) if max(s, v * n) < min(e, (v + 1) * n)]  # the tile's view-a and view-b parts
            return (anchors_n[s:e] * torch.cat(mixes)).sum() / self.temperature

        # H(s_i, p_i) = logsumexp_k logit_ik - sum_k s_ik logit_ik  (sum_k s_ik = 1)
        chunk = self._tile(ps.n_rows, ps.n_cols)
        if chunk is None:
            return (torch.logsumexp(pair_rows(ps, 0, ps.n_rows), 1).sum() - cross_rows(0, ps.n_rows)) / ps.n_rows

        def weights(s: int, e: int) -> list[Tensor]:  # target weights of anchors [s, e) on (ga, gb[, queue])
            parts = []
            for v in (0, 1):
                i0, i1 = max(s, v * n) - v * n, min(e, (v + 1) * n) - v * n
                if i0 < i1:
                    w_excl, w_other, wq = targets(i0, i1)
                    parts.append((w_excl, w_other, wq) if v == 0 else (w_other, w_excl, wq))
            out = [torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])]
            return out + ([torch.cat([p[2] for p in parts])] if qs is not None else [])

        # tiled: the log-sum-exps by the fused path, the target-weighted term with its weights recomputed per tile
        cross = weighted_cross(anchors_n, [ga, gb], qn, weights, chunk) / self.temperature
        return (pair_lse(ps, chunk).sum() - cross) / ps.n_rows


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
