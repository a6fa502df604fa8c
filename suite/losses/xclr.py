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

import math

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses import fused
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import _check_float, _fails, check_device, check_pair, check_positive, check_queue
from suite.losses.core import normalize, normalize_pair, pair_lse, pair_row_lse, pair_setup
from suite.losses.registry import register_loss
from suite.losses.tiling import weighted_cross


@register_loss("xclr", "x_clr")
class XCLR(ContrastiveLoss):
    # the log-sum-exps fused, and the target term with the graph as embeddings (an attention of E on the candidates); an
    # (N, N) graph given, or a queue with its own targets, keeps that term on PyTorch tiles
    fused_tiles = "part"
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
            check_device(similarity, "similarity", z_a.device)
            g = _local_graph(similarity, n, w).detach().to(z_a.dtype)  # (N, W*N); targets carry no gradient
            graph_rows = lambda i0, i1: g[i0:i1]  # noqa: E731
        else:  # G = E E^T with unit rows (diagonal 1), built per tile: never an (N, N) tensor
            _check_float(similarity_embeddings, "similarity_embeddings")
            if similarity_embeddings.dim() != 2 or similarity_embeddings.shape[0] != n:
                raise ValueError(f"similarity_embeddings must have shape ({n}, d_t); got {tuple(similarity_embeddings.shape)}")
            check_device(similarity_embeddings, "similarity_embeddings", z_a.device)
            e_loc = normalize(similarity_embeddings.detach().to(z_a.dtype), "similarity_embeddings")
            e_all = sd.gather_nograd(e_loc)
            graph_rows = lambda i0, i1: e_loc[i0:i1] @ e_all.T  # noqa: E731
        queue = check_queue(queue, z_a.shape[1], z_a.dtype, z_a.device)
        qs = None  # target logits of the queue entries; None: all pure negatives (zero mass, no (N, Q) tensor)
        if queue is not None and queue_similarity is not None:
            qs = _queue_graph(queue_similarity, n, queue.shape[0]).to(z_a.dtype) / self.target_temperature
        # logits (2N, 2M[+Q]) = cos / tau, -inf at each anchor's own entry
        za_n, zb_n = normalize_pair(z_a, z_b)
        ps = pair_setup(za_n, zb_n, negatives="all", symmetric=True, queue=queue, scale=1.0 / self.temperature)
        m = ps.cand.shape[0] // 2
        ga, gb = ps.cand[:m], ps.cand[m:]  # (M, d) candidates of all ranks (gathered once)
        off = sd.rank() * n  # sample i's column in the (N, M) graph: off + i
        self_w = torch.empty(n, dtype=z_a.dtype, device=z_a.device)  # s_i at the other view of the same sample

        def weights(i0: int, i1: int) -> list[Tensor]:
            """Target weights of samples [i0, i1): W (rows, M) on the candidates of either view with the sample's
            own column 0, then the queue's (rows, Q); fills ``self_w[i0:i1]``. The targets depend on the sample
            only: both views of sample i put s_ik on sample k's two candidates (its own same-view entry excluded),
            normalised by Z_i = 2 sum_{k != i} e^{t_ik} + e^{t_ii} + sum_q e^{t_iq} (a sum of positive terms,
            over the row max: no cancellation)."""
            t = graph_rows(i0, i1) / self.target_temperature  # (rows, M)
            mx = t.amax(1, keepdim=True)
            if qs is not None:
                mx = torch.maximum(mx, qs[i0:i1].amax(1, keepdim=True))
            e = t.sub_(mx).exp_()  # t is this call's own
            own = e.diagonal(off + i0)  # (rows,) each sample's own column: a view, no index
            e_self = own.clone()
            own.zero_()
            z = torch.add(e_self, e.sum(1), alpha=2.0)
            eq = (qs[i0:i1] - mx).exp_() if qs is not None else None
            if eq is not None:
                z = z + eq.sum(1)
            torch.div(e_self, z, out=self_w[i0:i1])
            return [e.div_(z[:, None])] + ([eq.div_(z[:, None])] if eq is not None else [])

        # H(s_i, p_i) = logsumexp_k logit_ik - sum_k s_ik logit_ik (sum_k s_ik = 1), and since both views of sample i
        # share its targets: sum over its two anchors of sum_k s_ik logit_ik
        #   = (z_a,i + z_b,i) . (W_i @ (g_a + g_b) + Wq_i @ queue) / tau + w_ii (z_a,i . g_b,i + z_b,i . g_a,i) / tau
        # (W_i excludes the own column, w_ii = s at the other view's own entry): one (N, M) @ (M, d) product, a
        # quarter of the (2N, 2M) weighted sum.
        both = za_n + zb_n
        cand_sum = both if m == n else ga + gb  # on one rank the candidates are the views themselves
        chunk = self._tile(ps.n_rows, ps.n_cols)
        if chunk is None:
            ws = weights(0, n)
            mix = ws[0] @ cand_sum if qs is None else torch.addmm(ws[0] @ cand_sum, ws[1], ps.queue)
            lse, cross = pair_row_lse(ps), (both * mix).sum()
        else:  # tiled: the fused log-sum-exps; the weighted term on the kernels too where the graph is embeddings and
            # the queue has no targets, else with its weights made per tile of samples
            lse = pair_lse(ps, chunk, uniform=True)
            cross = None if similarity_embeddings is None or qs is not None else fused.attempt(
                (e_loc, e_all, cand_sum), _fused_cross, both, cand_sum, e_loc, e_all, off, self.target_temperature,
                self_w)
            if cross is None:
                cross = weighted_cross(both, [cand_sum], ps.queue, weights, chunk)
        # the other view's own entries: z_a,i . g_b,i + z_b,i . g_a,i (on one rank g_a = z_a, g_b = z_b: 2 z_a,i . z_b,i)
        if m == n:
            cross = cross + 2.0 * (self_w @ (za_n * zb_n).sum(1))
        else:
            cross = cross + self_w @ ((za_n * gb[off:off + n]).sum(1) + (zb_n * ga[off:off + n]).sum(1))
        return (lse.sum() - cross / self.temperature) / ps.n_rows


def _fused_cross(both: Tensor, cand_sum: Tensor, e_loc: Tensor, e_all: Tensor, off: int, tau_s: float,
                 self_w: Tensor) -> Tensor:
    """The target term sum_i (z_a,i + z_b,i) . W_i @ (g_a + g_b) on the fused kernels
    (:func:`suite.losses.fused.soft_mix`): with t = E E^T / tau_s, S'_i = sum_{k != i} e^{t_ik} and delta_i = t_ii -
    log S'_i, the weights are W_ik = p_ik r_i, p_i = softmax_{k != i} t_ik, r_i = 1 / (2 + e^delta_i), and the own
    entry's s_i = e^delta_i r_i (``self_w``): the attention of E on the candidates' sum, O_i = sum_k p_ik cand_sum_k,
    scaled by r. Neither E E^T nor W is formed; the gradient reaches the candidates through O."""
    n = e_loc.shape[0]
    own = off + torch.arange(n, device=e_loc.device)
    lse_t, o = fused.soft_mix(e_loc, e_all, cand_sum, own[None], c1=1.0 / tau_s)
    delta = (e_loc * e_loc).sum(1) / tau_s - lse_t
    log_z = torch.logaddexp(delta, torch.full_like(delta, math.log(2.0)))  # log(2 + e^delta), no overflow
    self_w.copy_(torch.exp(delta - log_z))
    return torch.exp(-log_z) @ (both * o).sum(1)


def _queue_graph(qs: Tensor, n: int, q: int) -> Tensor:
    if not isinstance(qs, Tensor) or not qs.dtype.is_floating_point:
        raise ValueError(f"queue_similarity must be a floating-point tensor of shape ({n}, {q})")
    if qs.shape != (n, q):
        raise ValueError(f"queue_similarity must have shape ({n}, {q}); got {tuple(qs.shape)}")
    msg = "queue_similarity may hold finite values or -inf (pure negative); found NaN or +inf"
    if _fails(torch.isnan(qs).any() | (qs == float("inf")).any(), msg):
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
