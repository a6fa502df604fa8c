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
Numerics: with x_i = logsumexp_{k in N(i)} s_ik / tau_a - s_i,p(i) / tau_a (negatives only),
-log P_i = softplus(x_i) and V_i = 1 / (1 - P_i) = 1 + exp(-x_i), so nothing is computed as 1 - P_i.
The gradient of sg(V_i) * softplus(x_i) is (1 + e^{-x_i}) sigmoid(x_i) dx_i = dx_i exactly, and the
value (1 + e^{-x_i}) softplus(x_i) is evaluated in log space; the per-anchor loss tends to 1 as
P_i -> 1 (the non-vanishing gradient that is MACL's point), finite in float32 at any tau_a.

tau_a is clamped to at least ``tau_min`` (the paper gives no floor; Eq. 7 can reach 0 or below):
with the image and graph settings (alpha = 0.5, A0 = 0) tau_a >= tau0 / 2 and the clamp is never
reached, but the text setting (tau0 = 0.05, alpha = 2, A0 = 0.8) reaches tau_min = 1e-3 whenever the
alignment A < 0.31 (Eq. 7 gives tau_a <= 0 for A <= 0.3). Each clamped call is counted in
``diagnostics()["tau_clamped"]`` (1 for that call) and in the attribute ``n_clamped`` (running
count). ``tau0`` below ``tau_min`` is an error. Inputs are L2-normalised inside.

Defaults are the image setting of the paper (tau0 = 0.1, alpha = 0.5, A0 = 0; SimCLR, App. B.1/B.3);
MoCo v2 uses tau0 = 0.15, alpha = 0.5, A0 = 0.2 (App. B.2.1); text tau0 = 0.05, alpha = 2, A0 = 0.8,
reweight off, encoder dropout 0.2 (App. B.4); graphs tau0 = 0.2 (TU) / 0.1 (transfer), alpha = 0.5,
A0 = 0 (App. B.5).

Shapes: z_a, z_b (N, d); queue (Q, d), weights (N,) optional (pair weights, see infonce) -> ().
Example: >>> MACL(tau0=0.1, alpha=0.5, a0=0.0)(torch.randn(8, 16), torch.randn(8, 16))
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from suite import distributed as sd
from suite.losses.checks import check_finite, check_positive
from suite.losses.core import pair_outer_scales
from suite.losses.pair import PairLoss
from suite.losses.registry import register_loss


@register_loss("macl")
class MACL(PairLoss):
    fused_tiles = "yes"
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
        self.alpha = check_finite(alpha, "alpha")
        self.a0 = check_finite(a0, "a0")
        self.reweight = bool(reweight)
        self._arrangement(negatives, symmetric)
        self.tau_min = check_positive(tau_min, "tau_min")
        if self.tau0 < self.tau_min:
            raise ValueError(f"tau0 = {self.tau0} is below the temperature floor tau_min = {self.tau_min}; "
                             "lower tau_min or raise tau0")
        self.tau_a: Tensor = torch.tensor(self.tau0)
        self.alignment: Tensor = torch.tensor(float("nan"))
        # calls whose temperature was clamped, counted on the device (a tensor from the start: under torch.compile an
        # int that became a tensor made the second call compile again)
        self._clamped: Tensor = torch.zeros((), dtype=torch.long)

    @property
    def n_clamped(self) -> int:
        """How many calls clamped the temperature at ``tau_min`` (read from the device)."""
        return int(self._clamped)

    def forward(self, z_a: Tensor, z_b: Tensor, queue: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
        z_a, z_b, queue, weights = self.pair_inputs(z_a, z_b, queue, weights)
        pos = (z_a * z_b).sum(-1)  # (N,)
        align = sd.all_reduce_mean(pos.detach().mean())  # A, Eq. 6 (batch estimate)
        tau_raw = self.tau0 * (1.0 + self.alpha * (align - self.a0))
        clamped = (tau_raw < self.tau_min).detach()  # on the device: no host read per call
        tau = tau_raw.clamp_min(self.tau_min)
        ps = self.setup(z_a, z_b, queue, 1.0 / tau)
        pos = self.per_anchor(pos)  # (A,)
        chunk = self._tile(ps.n_rows, ps.n_cols)
        if self.reweight:
            # (A,) over the negatives; reweighted, every anchor's loss has gradient 1 in x_i (below), so with equal
            # pair weights the rows are summed uniformly (the tiles' candidates' gradient formed in the forward)
            x = self.negatives_lse(ps, uniform=weights is None) - pos / tau  # -log P_i = softplus(x_i)
            # V_i softplus(x_i) with V_i = sg(1 + e^{-x_i}); e^{-x} softplus(x) = exp(log softplus(x) - x) <= 1
            xd = x.detach()
            value = F.softplus(xd) + torch.exp(_log_softplus(xd) - xd)
            loss = self.mean(value + x - xd, weights)  # d/dx [sg(V) softplus(x)] = 1
        elif chunk is None:
            loss = self.mean(F.softplus(self.negatives_lse(ps) - pos / tau), weights)
        else:  # softplus(x_i) is row-wise: the tiles evaluate it tile by tile and form the gradient in the forward
            per = pair_outer_scales(ps, chunk, (1.0,), lambda lses, p: F.softplus(lses[0] - p), pos / tau,
                                    uniform=weights is None)
            loss = self.mean(per, weights)
        self.tau_a, self.alignment = tau.detach(), align.detach()
        self._clamped = self._clamped + clamped.long()  # a 0-d CPU count meets a CUDA flag as a scalar: on its device
        self._record(tau=tau, alignment=align, tau_clamped=clamped.float())
        return loss


def _log_softplus(x: Tensor) -> Tensor:
    """log(log(1 + e^x)) without underflow: for x < -15, log1p(e^x) = e^x (1 - e^x / 2 + ...)."""
    small = x < -15.0
    direct = torch.log(F.softplus(torch.where(small, torch.zeros_like(x), x)))
    return torch.where(small, x - 0.5 * torch.exp(x), direct)
