"""Objectives composed from the loss core that are not single registered losses.

:func:`sup_simcse_loss` is supervised SimCSE (Gao et al. 2021, Eq. 5): InfoNCE whose candidates are
the positives and the hard negatives, with gradients through both. It lives here (modality-neutral)
so that the text front-end and the sentence-transformers integration share one implementation.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from suite import distributed as sd
from suite.losses.core import normalize, pair_similarities


def sup_simcse_loss(z1: Tensor, z2: Tensor, z3: Tensor, temperature: float = 0.05, hard_negative_weight: float = 0.0,
                    negatives: str = "cross", symmetric: bool = False) -> Tensor:
    """Supervised SimCSE (Eq. 5 of Gao et al. 2021): anchor z1[i], positive z2[i], negatives z2[j]
    (j != i) and every hard negative z3[k] (gradients through all three; under torch.distributed the
    hard negatives of all ranks, as the released code gathers them). ``hard_negative_weight`` is added
    to the logit of the anchor's own hard negative (SimCSE's ``hard_negative_weight``; needs one hard
    negative per anchor). ``negatives``/``symmetric`` default to SimCSE's one-directional arrangement.

    Shapes: z1, z2 (N, d); z3 (K*N, d), K hard negatives per anchor, column-major -> ().
    Example: >>> sup_simcse_loss(torch.randn(8, 16), torch.randn(8, 16), torch.randn(8, 16))
    """
    n = z1.shape[0]
    if z3.dim() != 2 or z3.shape[1] != z1.shape[1] or z3.shape[0] % n:
        raise ValueError(f"hard negatives must have shape (K*{n}, {z1.shape[1]}); got {tuple(z3.shape)}")
    if hard_negative_weight and z3.shape[0] != n:
        raise ValueError(f"hard_negative_weight needs exactly one hard negative per anchor; got {z3.shape[0] // n}")
    hard = sd.gather(z3)  # (W*K*N, d), gradient kept
    ps = pair_similarities(normalize(z1), normalize(z2), negatives=negatives, symmetric=symmetric, queue=hard)
    logits = ps.sim / temperature  # (A, C + W*K*N)
    if hard_negative_weight:
        m = ps.sim.shape[1] - hard.shape[0]
        own = m + sd.rank() * n + torch.arange(n, device=z1.device)
        own = torch.cat([own, own]) if symmetric else own
        logits = logits + F.one_hot(own, logits.shape[1]).to(logits.dtype) * hard_negative_weight
    return F.cross_entropy(logits, ps.pos)
