"""The reliability table is rendered from the probes' docstrings and outcomes, not typed."""
from __future__ import annotations

from benchmarks.measurements.reliability import probe_docs, render


def test_every_probe_has_a_tried_arrow_must_line():
    docs = probe_docs()
    assert len(docs) >= 54
    bad = [k for k, d in docs.items() if "->" not in d]
    assert not bad, bad


def test_render_counts_and_marks():
    docs = {("test_a", "test_x"): "x tried -> refused", ("test_a", "test_y"): "y tried -> counted",
            ("test_b", "test_z"): "z tried -> kept"}
    text = render(docs, {("test_a", "test_x"): "passed", ("test_a", "test_y"): "failed", ("test_b", "test_z"): "skipped"})
    assert "**1 of 2 probes handled** (1 skipped)" in text
    assert "| a | y tried -> counted | **NOT handled** |" in text
