"""The reliability table is rendered from the probes' docstrings and outcomes as the registry records them, not typed."""
from __future__ import annotations

from benchmarks.measurements.reliability import probe_docs, record_outcomes, render, table


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


def test_outcomes_recorded_then_rendered_from_the_registry(tmp_path):
    """a probe run recorded in a registry -> reliability.md rebuilds from it alone (`suite bench report --check`
    covers it): the docstrings and outcomes are the recorded ones, a later recorded run replaces them, and a
    registry without a run says so (the committed page said 'NOT handled' for a probe that held for weeks:
    nothing rebuilt it)"""
    from suite.registry import Registry

    reg = Registry(str(tmp_path / "r.sqlite"))
    assert "No committed `reliability` run" in table(reg, allow_dirty=True)
    docs = {("test_a", "test_x"): "x tried -> refused", ("test_b", "test_z"): "z tried -> kept",
            ("test_b", "test_w"): "w tried -> counted"}
    record_outcomes(reg, docs, {("test_a", "test_x"): "failed", ("test_b", "test_z"): "skipped"})
    first = table(reg, allow_dirty=True)
    assert "**0 of 2 probes handled** (1 skipped)" in first and "| a | x tried -> refused | **NOT handled** |" in first
    assert "| b | w tried -> counted | not run |" in first and "Code versions of these runs" in first
    record_outcomes(reg, docs, {k: "passed" for k in docs})
    again = table(reg, allow_dirty=True)
    assert "**3 of 3 probes handled**." in again and "NOT handled" not in again
