"""The loss API on bad input: every hyper-parameter, shape and option is checked and named."""
from __future__ import annotations

import pytest
import torch

import suite.losses as L


@pytest.mark.parametrize("name,hp,arg", [
    ("cacr", {"t_pos": float("nan")}, "t_pos"), ("cacr", {"t_neg": float("nan")}, "t_neg"),
    ("macl", {"alpha": float("nan")}, "alpha"), ("hard_negative", {"beta": float("nan")}, "beta"),
    ("infonce", {"temperature": float("inf")}, "temperature"), ("macl", {"tau0": float("-inf")}, "tau0"),
    ("tsimclr", {"t_df": float("inf")}, "t_df"), ("xclr", {"target_temperature": float("nan")}, "target_temperature"),
    ("align_uniform", {"uniform_weight": float("nan")}, "uniform_weight"), ("cmc", {"temperature": "warm"}, "temperature"),
])
def test_bad_hyperparameters_name_the_argument(name, hp, arg):
    """a NaN, infinite or non-numeric loss hyper-parameter -> ValueError naming the argument"""
    with pytest.raises(ValueError, match=arg):
        L.build(name, **hp)


def test_bad_calls_name_the_problem():
    """build(None), d = 0 embeddings or a bad chunk_size -> ValueError naming the value"""
    with pytest.raises(ValueError, match="loss name"):
        L.build(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d >= 1"):
        L.build("infonce")(torch.randn(4, 0), torch.randn(4, 0))
    with pytest.raises(ValueError, match="d >= 1"):
        L.build("cacr")(torch.randn(3, 4, 0))
    for bad in (0, -3, 2.5, "big", True):
        with pytest.raises(ValueError, match="chunk_size"):
            L.build("infonce", chunk_size=bad)


def test_non_finite_embeddings_named():
    """embeddings holding NaN or inf -> ValueError saying which input and how many"""
    za = torch.randn(4, 3)
    za[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"z_a contains non-finite values \(1 NaN"):
        L.build("infonce")(za, torch.randn(4, 3))


def test_macl_tau0_below_floor():
    """MACL tau0 below the temperature floor -> ValueError (no silent raise of the temperature)"""
    with pytest.raises(ValueError, match="below the temperature floor"):
        L.build("macl", tau0=1e-4)


def test_negative_pair_weights():
    """negative or all-zero pair weights -> ValueError naming weights"""
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    for w in (torch.tensor([1.0, -1.0, 1.0, 1.0]), torch.zeros(4)):
        with pytest.raises(ValueError, match="weights"):
            L.build("infonce")(a, b, weights=w)
