"""`suite bench grad-cache`: cells measured in fresh processes under an address-space limit; a cell that does not
fit is reported as such, not as a crash."""
from __future__ import annotations

import json

import pytest

from benchmarks.measurements.grad_cache import run


@pytest.mark.slow  # four fresh processes that import torch and build a ResNet-18 (~20 s idle)
def test_table_rows_and_a_cell_that_does_not_fit(tmp_path):
    """a tiny ResNet-18 step with and without caching -> both measured, ratios written, both cells recorded in the
    registry before the table; the same under a 1 GiB address-space limit -> 'does not fit in 1 GiB' in both cells,
    no ratio"""
    from suite.registry import Registry

    out = tmp_path / "gc.md"
    reg = Registry(str(tmp_path / "r.sqlite"))
    text = run(("resnet18",), (4,), 2, 1, 18.0, out, reg)
    rows = {json.loads(r["config"])["chunk"]: reg.final_metrics(r["id"]) for r in reg.runs(task="grad-cache")}
    assert sorted(rows) == [0, 2] and all(m[("fits", "bench")] == 1.0 for m in rows.values())
    assert f"| {rows[0][('rss_growth_mib', 'bench')]:.0f} |" in text
    row = next(line for line in text.splitlines() if line.startswith("| 4 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1]) > 0 and float(cells[2]) > 0 and float(cells[4]) > 0 and cells[3] != "-"
    assert out.read_text() == text
    small = run(("resnet18",), (4,), 2, 1, 1.0, tmp_path / "small.md")
    assert small.count("does not fit in 1 GiB") == 4  # memory and time of both cells
