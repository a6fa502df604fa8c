"""Train/valid/test splits for MoleculeNet: scaffold (Bemis-Murcko), random, random-scaffold; a user's own split.

As in pretrain-gnns ``splitters.py``: scaffold sets (with chirality) sorted largest first (ties by
first index, the larger first), filled into train until 80 %, then valid until 90 %, the rest test; deterministic.
``random_scaffold`` shuffles the scaffold sets with ``seed`` instead of sorting them. ``given`` (a user's own CSV,
:func:`given_split`) takes each molecule's part from a column of the file.

Example: >>> train, valid, test = split(smiles, "scaffold")
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from suite.train.seeding import fixed_random_state

SPLITS = ("scaffold", "random", "random_scaffold")
GIVEN = "given"  # a user's own data: the part of every molecule named in a column (train / valid / test)


def scaffold_of(smiles: str, include_chirality: bool = True) -> str:
    """Bemis-Murcko scaffold SMILES ('' for acyclic molecules, the input itself if it does not parse)."""
    from rdkit import RDLogger
    from rdkit.Chem.Scaffolds import MurckoScaffold

    RDLogger.DisableLog("rdApp.*")
    try:
        return MurckoScaffold.MurckoScaffoldSmiles(smiles=smiles, includeChirality=include_chirality)
    except Exception:  # unparsable: its own singleton scaffold
        return f"<invalid>{smiles}"


def scaffold_sets(smiles: Sequence[str]) -> list[list[int]]:
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(smiles):
        groups.setdefault(scaffold_of(s), []).append(i)
    return list(groups.values())  # each list is in increasing index order


def _check(frac: tuple[float, float, float]) -> None:
    if len(frac) != 3 or min(frac) < 0 or abs(sum(frac) - 1.0) > 1e-6:
        raise ValueError(f"split fractions must be three non-negative numbers summing to 1, got {frac}")


def _fill(sets: list[list[int]], n: int, frac: tuple[float, float, float]) -> tuple[Tensor, Tensor, Tensor]:
    train_cut, valid_cut = frac[0] * n, (frac[0] + frac[1]) * n
    tr: list[int] = []
    va: list[int] = []
    te: list[int] = []
    for s in sets:
        if len(tr) + len(s) > train_cut:
            if len(tr) + len(va) + len(s) > valid_cut:
                te.extend(s)
            else:
                va.extend(s)
        else:
            tr.extend(s)
    return _nonempty(tuple(torch.tensor(sorted(p), dtype=torch.long) for p in (tr, va, te)), n, frac)  # type: ignore[arg-type]


def _nonempty(parts: tuple[Tensor, Tensor, Tensor], n: int, frac: tuple[float, float, float]) -> tuple[Tensor, Tensor, Tensor]:
    """An empty split part (too few molecules or scaffolds) is an error naming the sizes, not a silent
    evaluation on nothing."""
    for name, part, f in zip(("train", "valid", "test"), parts, frac):
        if f > 0 and part.numel() == 0:
            sizes = ", ".join(f"{k} {p.numel()}" for k, p in zip(("train", "valid", "test"), parts))
            raise ValueError(f"the {frac} split of {n} molecules left {name} empty ({sizes}): too few molecules or "
                             "scaffold sets for this split")
    return parts


def scaffold_split(smiles: Sequence[str], frac: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor, Tensor]:
    """Deterministic scaffold split: largest scaffold sets first (ties: the set whose first index is larger
    first, as pretrain-gnns' ``sorted(..., key=(len, first index), reverse=True)``)."""
    _check(frac)
    sets = sorted(scaffold_sets(smiles), key=lambda s: (len(s), s[0]), reverse=True)
    return _fill(sets, len(smiles), frac)


def random_scaffold_split(smiles: Sequence[str], seed: int = 0,
                          frac: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor, Tensor]:
    """Scaffold sets in a seeded random order (pretrain-gnns ``random_scaffold_split``)."""
    _check(frac)
    sets = scaffold_sets(smiles)
    order = fixed_random_state(seed).permutation(len(sets))
    return _fill([sets[i] for i in order], len(smiles), frac)


def random_split(n: int, seed: int = 0, frac: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor, Tensor]:
    _check(frac)
    perm = torch.from_numpy(fixed_random_state(seed).permutation(n))
    a, b = int(frac[0] * n), int((frac[0] + frac[1]) * n)
    return perm[:a].sort().values, perm[a:b].sort().values, perm[b:].sort().values


def split(smiles: Sequence[str], method: str = "scaffold", seed: int = 0,
          frac: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor, Tensor]:
    """Indices (train, valid, test) by ``method`` in {scaffold, random, random_scaffold}."""
    if method == "scaffold":
        return scaffold_split(smiles, frac)
    if method == "random":
        return random_split(len(smiles), seed, frac)
    if method == "random_scaffold":
        return random_scaffold_split(smiles, seed, frac)
    raise ValueError(f"unknown split {method!r}; choose from {SPLITS}")


def given_split(parts: Sequence[str], what: str = "the split column") -> tuple[Tensor, Tensor, Tensor]:
    """Indices (train, valid, test) of ``parts`` (each ``"train"``, ``"valid"`` or ``"test"``); an empty part is a
    ``ValueError`` naming ``what`` and the sizes."""
    out = tuple(torch.tensor([i for i, p in enumerate(parts) if p == name], dtype=torch.long)
                for name in ("train", "valid", "test"))
    if bad := sorted({p for p in parts} - {"train", "valid", "test"}):
        raise ValueError(f"{what}: parts {bad} are not train, valid or test")
    if any(p.numel() == 0 for p in out):
        sizes = ", ".join(f"{k} {p.numel()}" for k, p in zip(("train", "valid", "test"), out))
        raise ValueError(f"{what} leaves a part empty ({sizes}): every part needs molecules")
    return out  # type: ignore[return-value]
