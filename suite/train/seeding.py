"""Every random generator of the project: the one seed derivation (:func:`derive_seed`), a run's named streams
(:func:`seeded_generator`, what :meth:`suite.train.run.RunContext.generator` hands a task), the process seeding of a
run (:func:`seed_everything`), and the fixed generators of splits and samples that are the same for every run seed
(:func:`fixed_generator`, :func:`fixed_numpy_rng`, :func:`fixed_random_state`, :func:`forked_rng`): a front-end never
makes a generator of its own, so where randomness comes from is read here."""
from __future__ import annotations

import os
import random
import zlib
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch


def derive_seed(seed: int, *, rank: int = 0, epoch: int = 0, stream: str = "main") -> int:
    """The one seed derivation: a 32-bit seed (what every generator takes: python, NumPy, torch) from
    ``(seed, rank, epoch, stream)`` through NumPy's ``SeedSequence``: distinct inputs give independent streams
    (no collisions like ``seed + rank`` of seed 1 with ``seed + 1`` of seed 0). Every front-end seeds its process,
    its data order (stream ``batches``, :func:`suite.train.epoch_batches`) and its augmentation streams with it."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if rank < 0 or epoch < 0:
        raise ValueError(f"rank and epoch must be >= 0, got rank={rank}, epoch={epoch}")
    return int(np.random.SeedSequence([int(seed), int(rank), int(epoch), zlib.crc32(stream.encode())]).generate_state(1)[0])


def seeded_generator(seed: int, *, rank: int = 0, epoch: int = 0, stream: str = "main",
                     device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`derive_seed`."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, rank=rank, epoch=epoch, stream=stream))


def seed_everything(seed: int, deterministic: bool = False, rank: int = 0) -> torch.Generator:
    """Seed python, numpy and torch with stream ``main`` of ``(seed, rank)`` (:func:`derive_seed`); return a
    torch.Generator seeded likewise for data pipelines."""
    seed = derive_seed(seed, rank=rank)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def fixed_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with ``seed`` as given (no derivation): a split or sample that is part of a
    recorded setting and the same for every run seed (held-out sentences, class subsets, a data set's fixed
    augmentation). A run's own randomness is :meth:`suite.train.run.RunContext.generator`."""
    return torch.Generator(device=device).manual_seed(int(seed))


def fixed_numpy_rng(seed: int) -> np.random.Generator:
    """NumPy's ``default_rng(seed)`` for a fixed split or sample (see :func:`fixed_generator`)."""
    return np.random.default_rng(seed)


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The NumPy generator of one sample's augmentation in one epoch (a streaming loader's crops): a function of
    ``(seed, epoch, index)`` alone, so whichever worker or process decodes the sample, and a run resumed in the middle
    of an epoch, draws the same."""
    return np.random.default_rng([derive_seed(seed, epoch=epoch, stream="samples"), int(index)])


def fixed_random_state(seed: int) -> np.random.RandomState:
    """NumPy's legacy ``RandomState(seed)``, for the splits whose published definition draws from it (the scaffold
    and random splits of MoleculeNet); see :func:`fixed_generator`."""
    return np.random.RandomState(seed)


@contextmanager
def forked_rng(seed: int) -> Iterator[None]:
    """Inside: torch's global CPU generator seeded with ``seed``; outside, its state as before (an evaluation that
    draws through a library taking no generator, e.g. kornia's augmentations, the same at every call)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
