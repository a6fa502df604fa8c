"""Tiny synthetic TU datasets written in TU raw format (no network)."""
from __future__ import annotations

from pathlib import Path

import torch

from graph.tu.data import write_tu_raw


def synthetic_graphs(n_graphs: int = 40, seed: int = 0, node_labels: int = 3) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Class 0: rings, class 1: stars (both directions of each edge), 6-14 nodes."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n_graphs):
        n = int(torch.randint(6, 15, (1,), generator=g))
        label = i % 2
        idx = torch.arange(n)
        if label == 0:
            ei = torch.stack([idx, (idx + 1) % n])
        else:
            ei = torch.stack([torch.zeros(n - 1, dtype=torch.long), idx[1:]])
        ei = torch.cat([ei, ei.flip(0)], 1)
        nl = torch.randint(0, node_labels, (n,), generator=g)
        out.append((ei, nl, label))
    return out


def write_synthetic_tu(root: Path, name: str = "SYNTH", n_graphs: int = 40, seed: int = 0) -> Path:
    """Write the synthetic dataset under ``root/name/raw``; returns ``root``."""
    write_tu_raw(root, name, synthetic_graphs(n_graphs, seed))
    return root
