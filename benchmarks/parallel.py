"""Grid runs in worker processes, shared by the benchmarks that run many independent cells.

``spawn`` workers (no forked torch/OpenMP state); results come back as they finish, each with
the index of its task, so the caller can rewrite its table after every cell.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any, Callable, Iterator, Sequence


def run_cells(fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], jobs: int) -> Iterator[tuple[int, Any]]:
    """Yield ``(k, fn(*tasks[k]))`` in completion order, ``jobs`` worker processes at a time.
    ``fn`` must be a module-level function (it is pickled by name)."""
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(fn, *t): k for k, t in enumerate(tasks)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
