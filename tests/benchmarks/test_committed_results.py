"""Nothing a newcomer runs damages the committed results (issue 80): a file of ``benchmarks/results`` is written only
from the committed snapshot. A bare ``suite bench report`` on a fresh clone's local registry writes its report into
``results/report/`` (ignored by git), a table command into ``results/tables/``; an ``--out`` inside the committed
folder from another registry is refused with one line, before any work."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from benchmarks.paths import LOCAL, RESULTS, SNAPSHOT, is_snapshot, results_target
from suite.cli import main
from suite.registry import Registry, open_registry


def _digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(RESULTS.iterdir()) if p.is_file()}


def _cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["suite", *argv])  # the bench plugin reads sys.argv
    return main(argv)


def test_the_rule(tmp_path: Path) -> None:
    local = Registry(str(tmp_path / "r.sqlite"))
    assert is_snapshot(str(SNAPSHOT)) and is_snapshot(open_registry(str(SNAPSHOT)))
    assert not is_snapshot(local) and not is_snapshot(None) and not is_snapshot("postgresql://h/db")
    committed = RESULTS / "graph_tu.md"
    assert results_target(None, committed, str(SNAPSHOT)) == committed
    assert results_target(None, committed, local) == LOCAL / "graph_tu.md"
    assert results_target(tmp_path / "t.md", committed, local) == tmp_path / "t.md"
    with pytest.raises(ValueError, match="refusing to overwrite committed benchmarks/results/graph_tu.md"):
        results_target(committed, committed, local)
    with pytest.raises(ValueError, match="refusing"):  # the folder itself (the report's --out-dir)
        results_target(RESULTS, RESULTS, local)


def test_bare_report_leaves_the_committed_results_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SUITE_REGISTRY", raising=False)  # a fresh clone's default: ./results/registry.sqlite
    before = _digest()
    assert _cli(["bench", "report"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert _digest() == before
    assert (tmp_path / "results" / "report" / "README.md").is_file() and (tmp_path / "results/report/report.html").is_file()
    assert "built from its snapshot only" in out
    # asked to write the committed folder from the local registry: one line, exit 2, nothing written
    assert _cli(["bench", "report", "--out-dir", str(RESULTS)], monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to overwrite committed benchmarks/results" in err[0]
    assert _digest() == before


def test_a_table_command_from_a_local_registry_writes_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SUITE_REGISTRY", raising=False)
    before = _digest()
    assert _cli(["bench", "graph-tu", "--table-only"], monkeypatch) == 0
    assert (tmp_path / LOCAL / "graph_tu.md").read_text().startswith("#")
    assert _cli(["bench", "graph-tu", "--table-only", "--out", str(RESULTS / "graph_tu.md")], monkeypatch) == 2
    assert "refusing" in capsys.readouterr().err
    assert _digest() == before
