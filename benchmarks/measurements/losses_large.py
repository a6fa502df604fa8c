"""``benchmarks/results/losses_large.md``: the tiled path's tables (``suite bench losses --large``), rendered from the
registry by :func:`benchmarks.measurements.loss_tables.table_large`. A module of its own so that the report's table list holds one
(module, output file) per rendered file."""
from __future__ import annotations

from benchmarks.measurements.loss_tables import RESULTS_LARGE as OUT
from benchmarks.measurements.loss_tables import table_large as table

__all__ = ["OUT", "table"]
