"""LARS against the equations written out per parameter in float64 (SimCLR's trust ratio, solo-learn's denominator
and clipping), BatchNorm and biases excluded from adaptation and weight decay, the learning-rate scaling rules."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from suite.train.lars import LARS, scaled_lr


def _reference(params, grads, bufs, *, lr, momentum, wd, eta, nesterov=False, clip=False, denominator="update"):
    """One LARS step written from the equations, in float64, one parameter at a time."""
    out, new_bufs = [], []
    for p, g, buf in zip(params, grads, bufs):
        p, g = p.double(), g.double()
        if p.ndim > 1:
            d = g + wd * p
            w = math.sqrt(float((p * p).sum()))
            dn = (math.sqrt(float((g * g).sum())) + wd * w) if denominator == "sum" else math.sqrt(float((d * d).sum()))
            trust = eta * w / dn if w > 0 and dn > 0 else 1.0
            if clip:
                trust = min(trust / lr, 1.0)
            d = trust * d
        else:
            d = g
        buf = d.clone() if buf is None else momentum * buf + d
        upd = d + momentum * buf if nesterov else buf
        out.append(p - lr * upd)
        new_bufs.append(buf)
    return out, new_bufs


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


@pytest.mark.parametrize("kw", [dict(), dict(nesterov=True), dict(clip=True), dict(denominator="sum"),
                                dict(momentum=0.0)])
def test_lars_matches_the_equations_over_steps(kw):
    model = _model()
    hp = dict(lr=0.7, momentum=0.9, weight_decay=1e-3, eta=0.02)
    hp.update({k: v for k, v in kw.items() if k == "momentum"})
    opt = LARS(model.parameters(), **hp, **{k: v for k, v in kw.items() if k != "momentum"})
    params = [p.detach().double().clone() for p in model.parameters()]
    bufs = [None] * len(params)
    x = torch.randn(8, 3, 6, 6)
    for step in range(4):
        for group in opt.param_groups:  # a schedule: the learning rate changes each step
            group["lr"] = hp["lr"] * (1 + step) / 4
        opt.zero_grad()
        model(x).square().mean().backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        params, bufs = _reference(params, grads, bufs, lr=hp["lr"] * (1 + step) / 4, momentum=hp["momentum"],
                                  wd=hp["weight_decay"], eta=hp["eta"], nesterov=kw.get("nesterov", False),
                                  clip=kw.get("clip", False), denominator=kw.get("denominator", "update"))
        opt.step()
        for p, ref in zip(model.parameters(), params):
            torch.testing.assert_close(p.detach().double(), ref, rtol=1e-5, atol=1e-6)


def test_batchnorm_and_biases_get_no_weight_decay_nor_adaptation():
    """a 1-D parameter moves by exactly lr x grad (plain SGD) however large the weight decay; a weight's step is the
    trust ratio's: ||step|| = lr x eta x ||p|| at the first step"""
    bn, lin = nn.BatchNorm1d(5), nn.Linear(5, 5)
    nn.init.normal_(bn.weight)
    params = [bn.weight, bn.bias, lin.weight, lin.bias]
    before = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.randn_like(p)
    grads = [p.grad.clone() for p in params]
    LARS(params, lr=0.5, momentum=0.9, weight_decay=10.0, eta=1e-3).step()
    for i in (0, 1, 3):
        torch.testing.assert_close(params[i].detach(), before[i] - 0.5 * grads[i])
    step = (params[2].detach() - before[2]).norm()
    torch.testing.assert_close(step, 0.5 * 1e-3 * before[2].norm(), rtol=1e-5, atol=0)


def test_zero_weights_or_gradients_take_a_trust_of_one():
    w = nn.Parameter(torch.zeros(3, 3))
    w.grad = torch.ones(3, 3)
    LARS([w], lr=0.1, momentum=0.0, weight_decay=0.0).step()  # ||p|| = 0: the plain step
    torch.testing.assert_close(w.detach(), torch.full((3, 3), -0.1))


def test_bad_settings_are_refused_naming_them():
    p = [nn.Parameter(torch.ones(2, 2))]
    for kw, name in ((dict(lr=0.0), "lr"), (dict(lr=float("nan")), "lr"), (dict(lr=1.0, eta=-1.0), "eta"),
                     (dict(lr=1.0, momentum=float("inf")), "momentum")):
        with pytest.raises(ValueError, match=name):
            LARS(p, **kw)
    with pytest.raises(ValueError, match="denominator"):
        LARS(p, lr=1.0, denominator="max")


def test_learning_rate_scaling_rules():
    """SimCLR / MACL App. B.1: 0.3 x B / 256 linear, 0.075 x sqrt(B); at B = 256 the sqrt rule gives 1.2"""
    assert scaled_lr(0.3, 4096, "linear") == pytest.approx(4.8)
    assert scaled_lr(0.075, 256, "sqrt") == pytest.approx(1.2)
    assert scaled_lr(0.5, 999, "none") == 0.5
    with pytest.raises(ValueError, match="lr_scaling"):
        scaled_lr(0.3, 256, "cubic")
