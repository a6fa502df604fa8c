"""benchmarks.parallel.run_cells: every task runs once in a worker, results keep their task index."""
from __future__ import annotations

import math
import os

import pytest

from benchmarks.parallel import run_cells


def _cell(x: int, y: int) -> tuple[int, int]:
    return x * y, os.getpid()


def test_run_cells_returns_each_result_with_its_index() -> None:
    tasks = [(k, k + 1) for k in range(6)]
    out = dict(run_cells(_cell, tasks, jobs=2))
    assert sorted(out) == list(range(6))
    assert all(out[k][0] == x * y for k, (x, y) in enumerate(tasks))
    assert os.getpid() not in {pid for _, pid in out.values()}  # ran in worker processes


def test_run_cells_propagates_worker_errors() -> None:
    with pytest.raises(ValueError, match="math domain error"):
        list(run_cells(math.sqrt, [(4.0,), (-1.0,)], jobs=1))
