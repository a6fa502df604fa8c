"""The example package's loss (examples/barlow_twins) against a naive implementation of Zbontar et al. 2021, Eq. 1-2,
and the paper's invariances."""
from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "examples" / "barlow_twins" / "barlow_twins.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("example_barlow_twins", PATH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BarlowTwins = _module().BarlowTwins


def naive(za: torch.Tensor, zb: torch.Tensor, lambd: float) -> torch.Tensor:
    """Eq. 2 entry by entry on the batch-centred outputs, then Eq. 1, with Python loops."""
    n, d = za.shape
    a = [[za[b, i] - sum(za[k, i] for k in range(n)) / n for i in range(d)] for b in range(n)]
    c_b = [[zb[b, j] - sum(zb[k, j] for k in range(n)) / n for j in range(d)] for b in range(n)]
    loss = torch.zeros((), dtype=za.dtype)
    for i, j in itertools.product(range(d), range(d)):
        num = sum(a[b][i] * c_b[b][j] for b in range(n))
        den = torch.sqrt(sum(a[b][i] ** 2 for b in range(n))) * torch.sqrt(sum(c_b[b][j] ** 2 for b in range(n)))
        cij = num / den
        loss = loss + ((1 - cij) ** 2 if i == j else lambd * cij ** 2)
    return loss


@pytest.mark.parametrize("n,d,lambd", [(4, 3, 5e-3), (7, 5, 0.5), (5, 2, 0.0)])
def test_matches_naive_values_and_gradients(n: int, d: int, lambd: float) -> None:
    g = torch.Generator().manual_seed(n * 10 + d)
    za = torch.randn(n, d, generator=g, dtype=torch.float64, requires_grad=True)
    zb = torch.randn(n, d, generator=g, dtype=torch.float64, requires_grad=True)
    ours = BarlowTwins(lambd=lambd, eps=1e-300)(za, zb)
    ref = naive(za, zb, lambd)
    assert torch.allclose(ours, ref, rtol=1e-10, atol=1e-12)
    ga = torch.autograd.grad(ours, (za, zb))
    gr = torch.autograd.grad(ref, (za, zb))
    for x, y in zip(ga, gr):
        assert torch.allclose(x, y, rtol=1e-8, atol=1e-10)


def test_invariances_and_limits() -> None:
    g = torch.Generator().manual_seed(0)
    za, zb = torch.randn(64, 8, generator=g, dtype=torch.float64), torch.randn(64, 8, generator=g, dtype=torch.float64)
    loss = BarlowTwins(eps=1e-300)
    scale = torch.rand(8, generator=g, dtype=torch.float64) * 10 + 0.1
    shift = torch.randn(8, generator=g, dtype=torch.float64) * 5
    # a correlation: invariant to each dimension's positive scale and shift
    assert torch.allclose(loss(za * scale + shift, zb), loss(za, zb), rtol=1e-10)
    # identical views: the diagonal is 1, only lambda times the off-diagonal squares remain
    q, _ = torch.linalg.qr(torch.randn(64, 8, generator=g, dtype=torch.float64))
    white = q - q.mean(0)  # centred, almost decorrelated columns
    c = torch.corrcoef(za.T)
    expected = 5e-3 * (c.pow(2).sum() - c.diagonal().pow(2).sum())
    assert torch.allclose(loss(za, za), expected, rtol=1e-8)
    assert float(loss(white, white)) < 1e-2
    # the pseudocode's scaling: C times (N - 1) / N
    lam0 = BarlowTwins(lambd=0.0, variant="algorithm1", eps=1e-300)
    assert math.isclose(float(lam0(za, za)), 8 * (1 / 64) ** 2, rel_tol=1e-9)


def test_bad_settings_are_refused() -> None:
    for kw in ({"lambd": -1.0}, {"lambd": float("nan")}, {"variant": "nope"}, {"eps": 0.0}):
        with pytest.raises(ValueError):
            BarlowTwins(**kw)  # type: ignore[arg-type]


def test_passes_the_suites_self_check() -> None:
    from suite.losses.user import adopt, construct, self_check

    cls = adopt(BarlowTwins, "barlow_twins")
    loss = construct(cls, "barlow_twins", {"lambd": 0.01})
    self_check(loss, "barlow_twins")
    assert loss.hparams() == {"lambd": 0.01, "variant": "paper", "eps": 1e-12} and loss.name == "barlow_twins"
