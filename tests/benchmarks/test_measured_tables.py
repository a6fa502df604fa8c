"""losses.md, losses_large.md and grad_cache.md are rendered from registry rows alone: every number a table shows
is a recorded metric (or computed from recorded metrics), the newest run of a cell wins, and runs from uncommitted
code (code version ending ``-dirty``) never stand in a cell."""
from __future__ import annotations

import re

import pytest

import suite.registry.store as store
from benchmarks.measurements import grad_cache, loss_tables, losses, losses_large
from benchmarks.measurements.measured import Measurement, record
from suite.registry import Registry


@pytest.fixture
def reg(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_ALLOW_DIRTY", raising=False)  # the tables' own rule, not the tests' try-out switch
    monkeypatch.setattr(store, "code_version", lambda: "abc123")
    return Registry(str(tmp_path / "r.sqlite"))


def _dirty(monkeypatch):
    monkeypatch.setattr(store, "code_version", lambda: "def456-dirty")


def _loss(reg, name, path, two_n, ms, ratio, peak=None, views=2, threads=1):
    record(reg, Measurement("loss-bench", f"random-2N{two_n}-d128", name,
                            {"two_n": two_n, "d": 128, "views": views, "threads": threads, "path": path, "repeats": 3},
                            {"fwd_bwd_ms": ms, "ratio_infonce": ratio, **({"peak_mib": peak} if peak else {})},
                            "fwd_bwd_ms"))


def _row(text, *first):
    """The cells of the table row starting with ``first``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[:len(first)] == [str(f) for f in first]:
            return cells
    raise AssertionError(f"no row {first} in\n{text}")


def test_losses_table_shows_the_recorded_numbers(reg, monkeypatch):
    for two_n, scale in ((16, 1.0), (32, 4.0)):
        _loss(reg, "floor", "dense", two_n, 0.5 * scale, 0.25, peak=1.0 * scale)
        _loss(reg, "infonce", "dense", two_n, 2.0 * scale, 1.0, peak=2.0 * scale)
        _loss(reg, "infonce", "tiled", two_n, 3.0 * scale, 1.5)
        _loss(reg, "macl", "tiled", two_n, 5.0 * scale, 2.5)
        _loss(reg, "cmc", "dense", two_n, 9.0 * scale, 4.5, peak=8.0 * scale, views=5)
        _loss(reg, "cmc", "tiled", two_n, 7.0 * scale, 3.5, views=5)
    _loss(reg, "macl", "dense", 16, 9.99, 9.99, peak=9.99)  # superseded by the newer run below
    _loss(reg, "macl", "dense", 16, 2.4, 1.2, peak=2.5)
    _loss(reg, "macl", "dense", 32, 10.0, 1.6, peak=10.0)
    record(reg, Measurement("loss-bench-pml", "random-N128-d128", "infonce", {"n": 128, "d": 128, "threads": 1},
                            {"ours": 5.5, "pml": 5.5, "abs_diff": 0.0, "t_ours_ms": 3.25, "t_pml_ms": 400.5}, "abs_diff"))
    _dirty(monkeypatch)
    _loss(reg, "macl", "dense", 16, 77.7, 7.7, peak=7.7, threads=2)  # newest, but from uncommitted code

    text = losses.table(reg)
    assert _row(text, "bare e@e.T (floor)", "-", 32) == ["bare e@e.T (floor)", "-", "32", "2.00", "-", "-", "-", "-",
                                                          "-", "4.0"]
    # infonce: dense 2.0 ms, tiled 3.0 ms, ratio 1.00, faster path dense, 1 / 0.25 = 4x the floor -> missed
    assert _row(text, "infonce", "V=2", 16) == ["infonce", "V=2", "16", "2.00", "3.00", "1.00", "dense", "4.00x floor",
                                                "**no**", "2.0"]
    # macl at 16: the newest committed run (2.4 ms, 1.2x); its faster path dense 1.2 against infonce's 1.0 -> met
    assert _row(text, "macl", "V=2", 16) == ["macl", "V=2", "16", "2.40", "5.00", "1.20", "dense", "1.20x infonce",
                                             "yes", "2.5"]
    # macl at 32: dense 1.6 against infonce 1.0 -> missed, and named with its operation counts
    assert _row(text, "macl", "V=2", 32)[6:9] == ["dense", "1.60x infonce", "**no**"]
    assert _row(text, "cmc", "V=5", 32) == ["cmc", "V=5", "32", "36.00", "28.00", "4.50", "tiled",
                                            "(multi-view reference)", "yes", "32.0"]
    assert "Torch threads: 1." in text and "abc123: 15" in text and "dirty" not in text
    for gone in ("9.99", "77.70", "7.7"):
        assert gone not in text
    # peak-memory exponent between 2N = 16 and 32 from the recorded peaks: log(4) / log(2) = 2.00
    assert "infonce 2.00" in text and "macl 2.00" in text
    assert "ours 5.500000, theirs 5.500000, |diff| = 0.00e+00; fwd+bwd 3.25 ms vs 400.50 ms" in text
    assert "Targets met: 3/6." in text and "infonce at 2N=32 (4.00x floor)" in text and "macl at 2N=32 (1.60x infonce)" in text and "- `macl`:" in text
    assert loss_tables.OUT.name == "losses.md"


def test_losses_large_table_shows_the_recorded_numbers(reg, monkeypatch):
    T = losses.LARGE_TASKS

    def m(task, name, two_n, config, metrics, primary):
        record(reg, Measurement(task, f"random-2N{two_n}-d128", name,
                                {"two_n": two_n, "d": 128, "threads": 1, **config}, metrics, primary))

    m(T["speed"], "infonce", 64, {"n": 32, "views": 2, "chunk_size": 16},
      {"dense_ms": 4.25, "tiled_ms": 2.5, "tiled_over_dense": 0.59}, "tiled_over_dense")
    m(T["speed"], "cmc", 64, {"n": 32, "views": 5, "chunk_size": 8},
      {"dense_ms": 4.0, "tiled_ms": 6.0, "tiled_over_dense": 1.5}, "tiled_over_dense")
    m(T["auto"], "infonce", 64, {"n": 32, "views": 2}, {"auto_is_dense": 1.0}, "auto_is_dense")
    m(T["auto"], "infonce", 128, {"n": 64, "views": 2},
      {"auto_is_dense": 0.0, "dense_ms": 1.0, "auto_ms": 1.07, "auto_over_dense": 1.07}, "auto_over_dense")
    for two_n, n, mib, s in ((64, 32, 10.0, 4096e-9), (128, 64, 20.0, 2 * 16384e-9)):
        m(T["rss"], "infonce", two_n, {"n": n, "views": 2, "entries": two_n ** 2},
          {"ok": 1.0, "rss_growth_mib": mib, "s": s, "s_warm": s}, "rss_growth_mib")
    for two_n, ok in ((64, 1.0), (128, 1.0)):  # a multi-view loss at its N cap: the 128 row repeats the 64 one
        m(T["rss"], "cmc", two_n, {"n": 32, "views": 5, "entries": 160 ** 2, **({"measured_at_two_n": 64} if two_n > 64 else {})},
          {"ok": ok, "rss_growth_mib": 600.0, "s": 0.1, "s_warm": 160 ** 2 * 3e-9}, "rss_growth_mib")
    _dirty(monkeypatch)
    m(T["speed"], "infonce", 64, {"n": 32, "views": 2, "chunk_size": 16},
      {"dense_ms": 99.0, "tiled_ms": 99.0, "tiled_over_dense": 9.99}, "tiled_over_dense")

    text = losses_large.table(reg)
    assert "## Speed at 2N = 64" in text
    assert _row(text, "infonce", 64) == ["infonce", "64", "16", "4.2", "2.5", "0.59", "yes"]
    assert _row(text, "cmc", 64) == ["cmc", "64", "8", "4.0", "6.0", "1.50", "**no**"]
    assert "Worst ratio measured: 1.07 (target met)" in text
    assert _row(text, "infonce", "1.00 (dense)") == ["infonce", "1.00 (dense)", "1.07"]
    assert "| cmc | 1.00" not in text  # no auto rows recorded for cmc: no row
    # RSS: 10 -> 20 MiB as N doubles: exponent 1.00; time per entry 1.00 and 2.00 ns: max / min 2.00 -> missed
    assert _row(text, "infonce", "V=2") == ["infonce", "V=2", "10", "20", "1.00", "yes"]
    assert _row(text, "infonce", "1.00") == ["infonce", "1.00", "2.00", "2.00", "**no**"]
    assert _row(text, "cmc", "V=5") == ["cmc", "V=5", "600", "600", "nan", "**no**"]  # over 512 MiB
    assert "torch threads 1," in text and "abc123: 8" in text and "9.99" not in text and "99.0" not in text
    assert losses_large.OUT.name == "losses_large.md"


def test_grad_cache_table_shows_the_recorded_numbers(reg, monkeypatch):
    def m(model, batch, chunk, metrics):
        record(reg, Measurement("grad-cache", f"{model}-batch{batch}", "infonce",
                                {"model": model, "batch": batch, "chunk": chunk, "threads": 1, "limit_gib": 18.0},
                                metrics, "rss_growth_mib" if metrics["fits"] else "fits"))

    m("simcse", 256, 0, {"fits": 1.0, "oom": 0.0, "rss_growth_mib": 2000.0, "s": 10.0})
    m("simcse", 256, 64, {"fits": 1.0, "oom": 0.0, "rss_growth_mib": 500.0, "s": 12.5})
    m("simcse", 4096, 0, {"fits": 0.0, "oom": 1.0})
    m("simcse", 4096, 64, {"fits": 1.0, "oom": 0.0, "rss_growth_mib": 1269.0, "s": 260.34})
    m("resnet18", 256, 0, {"fits": 0.0, "oom": 0.0})  # failed for another reason than memory
    _dirty(monkeypatch)
    m("simcse", 256, 64, {"fits": 1.0, "oom": 0.0, "rss_growth_mib": 12345.0, "s": 99.9})

    text = grad_cache.table(reg)
    assert _row(text, 256, "2000") == ["256", "2000", "500", "0.25", "10.0", "12.5", "1.25"]
    assert _row(text, 4096) == ["4096", "does not fit in 18 GiB", "1269", "-", "does not fit in 18 GiB", "260.3", "-"]
    assert _row(text, 256, "failed") == ["256", "failed", "not run", "-", "failed", "not run", "-"]
    assert text.index("## simcse") < text.index("## resnet18")
    assert "torch threads 1, chunk = 64 samples" in text and "18 GiB address-space limit" in text
    assert "abc123: 5" in text and "12345" not in text and "99.9" not in text
    assert grad_cache.OUT.name == "grad_cache.md"


def test_empty_registry_renders_a_pointer_to_the_suite(reg):
    for table, suite in ((losses.table, "losses"), (losses_large.table, "losses"), (grad_cache.table, "grad-cache")):
        assert re.search(rf"`suite bench run {suite}` records them", table(reg))


def test_the_report_renders_the_three_tables():
    from benchmarks.report import TABLES

    assert {("benchmarks.measurements.loss_tables", "OUT"), ("benchmarks.measurements.losses_large", "OUT"), ("benchmarks.measurements.grad_cache", "OUT")} <= set(TABLES)
