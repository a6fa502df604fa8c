"""NT-Xent / InfoNCE (Oord et al. 2018; Chen et al. 2020, SimCLR Eq. 1).

For anchor i with positive p(i) and negative set N(i), cosine similarities s and temperature tau:

    l_i = -log( exp(s_i,p(i) / tau) / sum_{k in {p(i)} U N(i)} exp(s_ik / tau) )

and the loss is the mean of l_i over the anchors (2N with ``negatives="all"``, ``symmetric=True``).
Inputs are L2-normalised inside. MoCo v2 is ``InfoNCE(negatives="none", symmetric=False)`` called
with ``queue=``.

``weights`` (N,) weights positive pair i (both of its anchors) as in t-SimCLR Sec. 4.1 / Fig. 2a,
(1/2N) sum_i p_ii' (l(x_i, x_i') + l(x_i', x_i)), p scaled to mean 1 (``iou_weights``).

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional -> ().
Example: >>> InfoNCE(temperature=0.1)(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

from torch import Tensor

from suite.losses.core import pair_lse, pair_row_lse
from suite.losses.pair import PairLoss
from suite.losses.registry import register_loss


@register_loss("infonce", "ntxent", "nt_xent", "simclr")
class InfoNCE(PairLoss):
    fused_tiles = "yes"
    def __init__(self, temperature: float = 0.1, negatives: str = "all", symmetric: bool = True) -> None:
        super().__init__()
        self._arrangement(negatives, symmetric, temperature)

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        (z_a, z_b, queue, weights), ps = self.arrange(z_a, z_b, queue, weights, 1.0 / self.temperature)

        chunk = self._tile(ps.n_rows, ps.n_cols)
        # l_i = logsumexp_k s_ik / tau - s_ip / tau: the row statistics dense (one autograd Function) or by the fused path
        pos = self.per_anchor((z_a * z_b).sum(-1)) / self.temperature  # (A,)
        lse = pair_row_lse(ps) if chunk is None else pair_lse(ps, chunk, uniform=weights is None)
        per = lse - pos
        return self.mean(per, weights)
