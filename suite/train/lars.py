"""LARS, layer-wise adaptive rate scaling (You et al. 2017), as SimCLR (Chen et al. 2020, its ImageNet optimiser)
and solo-learn use it for contrastive pretraining at large batches.

For each parameter ``p`` with gradient ``g`` in a step of learning rate ``lr``:

- adapted parameters (weights of convolutions and linear layers, ``p.ndim > 1``)::

      d     = g + wd * p
      trust = eta * ||p|| / ||d||        (1 where ||p|| or ||d|| is 0)
      d     = trust * d

  ``denominator="sum"`` takes solo-learn's ``||g|| + wd * ||p||`` for ``||d||`` (an upper bound of it);
  ``clip=True`` takes ``min(trust, lr) / lr`` for ``trust`` (LARC's clipping, solo-learn's ``clip_lr``);
- excluded parameters (BatchNorm's weights and biases, every bias: ``p.ndim <= 1``): ``d = g``, neither weight decay
  nor adaptation (SimCLR's ``exclude_from_weight_decay`` and ``exclude_from_layer_adaptation``);
- then momentum as torch's SGD: ``v = momentum * v + d`` (``v = d`` at the first step), ``p -= lr * v`` (Nesterov:
  ``p -= lr * (d + momentum * v)``).

SimCLR's TensorFlow code keeps ``lr * d`` in its momentum buffer; with a learning rate that changes each step the two
differ by the schedule's step-to-step ratio, and this one is torch's (and solo-learn's) convention. SimCLR's defaults:
``eta`` 0.001, momentum 0.9, weight decay 1e-6, learning rate ``0.3 x batch / 256`` (or ``0.075 x sqrt(batch)``,
:func:`scaled_lr`) with a 10-epoch linear warm-up and cosine decay.

Every norm stays on the device: a step makes no host read.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import torch
from torch import Tensor

LR_SCALINGS = ("none", "linear", "sqrt")


def scaled_lr(base: float, batch_size: int, rule: str) -> float:
    """The learning rate of a global batch of ``batch_size`` under ``rule``: "linear" ``base x batch / 256``
    (Goyal et al. 2017; SimCLR, MACL App. B.1), "sqrt" ``base x sqrt(batch)`` (SimCLR App. B.1: 0.075), "none"
    ``base``."""
    if rule == "linear":
        return base * batch_size / 256
    if rule == "sqrt":
        return base * math.sqrt(batch_size)
    if rule == "none":
        return base
    raise ValueError(f"lr_scaling must be one of {LR_SCALINGS}, got {rule!r}")


class LARS(torch.optim.Optimizer):
    """LARS (see the module docstring). ``params`` as for any torch optimiser; parameters with ``ndim <= 1`` are
    excluded from weight decay and adaptation unless ``exclude_1d=False``."""

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.9, weight_decay: float = 1e-6,
                 eta: float = 1e-3, nesterov: bool = False, clip: bool = False, denominator: str = "update",
                 exclude_1d: bool = True, eps: float = 0.0) -> None:
        for name, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay), ("eta", eta),
                        ("eps", eps)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0) or (name in ("lr", "eta") and v == 0):
                raise ValueError(f"LARS {name} must be a finite number {'> 0' if name in ('lr', 'eta') else '>= 0'}, "
                                 f"got {v!r}")
        if denominator not in ("update", "sum"):
            raise ValueError(f"LARS denominator must be 'update' (SimCLR) or 'sum' (solo-learn), got {denominator!r}")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta, nesterov=nesterov,
                                      clip=clip, denominator=denominator, exclude_1d=exclude_1d, eps=eps))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mom, wd, eta = group["lr"], group["momentum"], group["weight_decay"], group["eta"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if not (group["exclude_1d"] and p.ndim <= 1):
                    d = g.add(p, alpha=wd) if wd else g.clone()
                    w_norm = torch.linalg.vector_norm(p)
                    d_norm = (torch.linalg.vector_norm(g) + wd * w_norm if group["denominator"] == "sum"
                              else torch.linalg.vector_norm(d))
                    trust = torch.where((w_norm > 0) & (d_norm > 0), eta * w_norm / (d_norm + group["eps"]),
                                        torch.ones_like(w_norm))
                    if group["clip"]:
                        trust = trust.clamp(max=lr) / lr
                    d.mul_(trust)
                else:
                    d = g
                if mom:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = d.clone()
                    else:
                        buf.mul_(mom).add_(d)
                    d = d.add(buf, alpha=mom) if group["nesterov"] else buf
                p.add_(d, alpha=-lr)
        return loss
