"""Scaffold / random / random-scaffold splits."""
from __future__ import annotations

import pytest
import torch

from graph.mol.splits import random_scaffold_split, random_split, scaffold_of, scaffold_split, split

RINGS = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCNCC1", "c1ccc2ccccc2c1", "C1CCOC1", "c1ccsc1", "C1CC1"]
SMILES = [f"{r}{tail}" for r in RINGS for tail in ["", "C", "CC", "O", "N", "CCO", "Cl", "F", "CN"][: 3 + len(r) % 7]]
SMILES += ["CCO", "CCCC", "CC(=O)O"]  # acyclic: the empty scaffold


def test_scaffold_split_deterministic_disjoint_complete() -> None:
    a = scaffold_split(SMILES)
    b = scaffold_split(list(SMILES))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    allidx = torch.cat(a)
    assert allidx.numel() == len(SMILES) and allidx.unique().numel() == len(SMILES)


def test_every_scaffold_in_one_split_and_largest_first() -> None:
    parts = scaffold_split(SMILES)
    where: dict[str, set[int]] = {}
    for k, idx in enumerate(parts):
        for i in idx.tolist():
            where.setdefault(scaffold_of(SMILES[i]), set()).add(k)
    assert all(len(v) == 1 for v in where.values())
    sizes: dict[str, int] = {}
    for s in SMILES:
        sizes[scaffold_of(s)] = sizes.get(scaffold_of(s), 0) + 1
    largest = max(sizes, key=lambda k: sizes[k])
    assert where[largest] == {0}
    assert len(parts[0]) <= 0.8 * len(SMILES) + 1e-9 and len(parts[0]) + len(parts[1]) <= 0.9 * len(SMILES) + 1e-9


def test_random_scaffold_and_random() -> None:
    a, b = random_scaffold_split(SMILES, seed=0), random_scaffold_split(SMILES, seed=0)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = random_scaffold_split(SMILES, seed=3)
    assert torch.cat(c).unique().numel() == len(SMILES)
    r = random_split(100, seed=1)
    assert [len(p) for p in r] == [80, 10, 10] and torch.cat(r).unique().numel() == 100
    assert not torch.equal(random_split(100, seed=2)[0], r[0])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown split"):
        split(SMILES, "stratified")
    with pytest.raises(ValueError, match="fractions"):
        scaffold_split(SMILES, (0.5, 0.5, 0.5))
