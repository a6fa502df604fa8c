"""Graph tests run with one torch thread (restored afterwards): the sparse scatter/gather kernels of
small GNN batches are far slower with 2 threads on shared cores than with 1."""
from __future__ import annotations

from typing import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)
