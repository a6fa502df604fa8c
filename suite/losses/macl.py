"""Model-aware contrastive loss, Eq. (7) and Eq. (11) of Huang et al. 2023 (MACL), Algorithm 1.

The temperature adapts to the batch alignment A = mean cosine similarity of the positive pairs
(detached; over all ranks under torch.distributed):

    tau_a = tau0 * (1 + alpha * (A - A0))                                   (Eq. 7)
    P_i   = exp(s_i,p(i) / tau_a) / sum_{k in {p(i)} U N(i)} exp(s_ik / tau_a)
    V_i   = sg[1 / (1 - P_i)]          (reweighting by the upper bound of W_i, Eq. 11)
    loss  = mean_i ( -V_i * log P_i )

With ``alpha=0`` and ``reweight=False`` it is InfoNCE with temperature ``tau0``. ``negatives`` and
``symmetric`` select anchors and negatives as in :mod:`suite.losses.core`. After each call the
attributes ``tau_a`` and ``alignment`` hold the values used (also in ``diagnostics()``).
tau_a is clamped to at least ``tau_min`` (never reached with the papers' settings; counted in
``diagnostics()["tau_clamped"]``). Inputs are L2-normalised inside.

Defaults are the image setting of the paper (tau0 = 0.1, alpha = 0.5, A0 = 0; App. B.3); text uses
tau0 = 0.05, alpha = 2, A0 = 0.8, reweight off (App. B.4); graphs tau0 = 0.2 / 0.1, alpha = 0.5, A0 = 0.

Shapes: z_a, z_b (N, d); queue (Q, d) optional -> ().
Example: >>> MACL(tau0=0.1, alpha=0.5, a0=0.0)(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite import distributed as sd
from suite.losses.base import ContrastiveLoss, check_choice, check_pair, check_positive, check_queue, register_loss
from suite.losses.core import NEGATIVES, normalize, pair_similarities


@register_loss("macl")
class MACL(ContrastiveLoss):
    def __init__(
        self,
        tau0: float = 0.1,
        alpha: float = 0.5,
        a0: float = 0.0,
        reweight: bool = True,
        negatives: str = "all",
        symmetric: bool = True,
        tau_min: float = 1e-3,
    ) -> None:
        super().__init__()
        self.tau0 = check_positive(tau0, "tau0")
        self.alpha = float(alpha)
        self.a0 = float(a0)
        self.reweight = bool(reweight)
        self.negatives = check_choice(negatives, "negatives", NEGATIVES)
        self.symmetric = bool(symmetric)
        self.tau_min = check_positive(tau_min, "tau_min")
        self.tau_a: Tensor = torch.tensor(self.tau0)
        self.alignment: Tensor = torch.tensor(float("nan"))

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None) -> Tensor:
        z_a, z_b = check_pair(z_a, z_b)
        queue = check_queue(queue, z_a.shape[1], z_a.dtype)
        z_a, z_b = normalize(z_a), normalize(z_b)
        pos = (z_a * z_b).sum(-1)  # (N,)
        align = sd.all_reduce_mean(pos.detach().mean())  # A, Eq. 6 (batch estimate)
        tau_raw = self.tau0 * (1.0 + self.alpha * (align - self.a0))
        tau = tau_raw.clamp_min(self.tau_min)
        ps = pair_similarities(z_a, z_b, negatives=self.negatives, symmetric=self.symmetric, queue=queue, scale=1.0 / tau)
        pos = torch.cat([pos, pos]) if self.symmetric else pos  # (A,)
        log_p = pos / tau - torch.logsumexp(ps.sim, dim=1)  # (A,) log P_i
        if self.reweight:
            v = 1.0 / (-torch.expm1(log_p)).detach().clamp_min(torch.finfo(log_p.dtype).tiny)  # 1/(1-P_i)
            loss = -(v * log_p).mean()
        else:
            loss = -log_p.mean()
        self.tau_a, self.alignment = tau.detach(), align.detach()
        self._record(tau=tau, alignment=align, tau_clamped=(tau_raw < self.tau_min).float())
        return loss
