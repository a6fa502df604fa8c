"""Issue 68: every GPU figure in the README and docs/ is a registry row quoted with its code version;
``suite bench report --check`` fails on one that is not (a planted figure) and passes on the committed docs."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.measurements import gpu_bench as gb
from benchmarks.report import gpu_figures as gf
from benchmarks.report.page import SNAPSHOT
from suite.registry import Registry, open_registry

H200 = {"device": "NVIDIA H200", "size": "full", "torch": "2.11", "cuda": "13.0", "plain": gb.PLAIN_VERSION}


def _registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Registry, str]:
    monkeypatch.setenv("SUITE_CODE_VERSION", "abcdef123456")
    reg = Registry(str(tmp_path / "r.sqlite"))
    gb._record(reg, gb.TASK, "vision-simclr", H200, {"suite_steps_per_s": 35.9, "plain_steps_per_s": 41.3,
                                                     "suite_examples_per_s": 18389.0, "plain_examples_per_s": 21158.0,
                                                     "ratio": 0.87, "batch": 512.0, "suite_peak_mb": 2377.0})
    return reg, reg.runs(task=gb.TASK)[0]["code_version"][:7]


def test_a_planted_figure_fails_and_a_quoted_row_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg, code = _registry(tmp_path, monkeypatch)
    doc = tmp_path / "page.md"
    doc.write_text(f"# GPU\n\nOn the H200 at code {code}, SimCLR ran 18,389 images/s, 0.87x its plain loop "
                   "(target 0.9), torch 2.11.0, CUDA 13.0, peak 2.3 GB.\n\n"
                   "```\nH200 0.12 ms\n```\n\n"
                   "*Unrecorded (before the fair plain loops):* on an H200 SimCSE read 1.52.\n")
    assert gf.unbacked(reg, [doc]) == []
    doc.write_text(doc.read_text() + "\nOn an H200 MoCo-v2 reached 0.95 of its plain loop.\n\n"
                   f"- at code {code} SimCLR's GPU ratio was 0.99\n")
    bad = gf.unbacked(reg, [doc])
    assert [(b.line, b.figure) for b in bad] == [(11, "0.95"), (13, "0.99")], bad
    assert "no code version" in bad[0].why and code in bad[1].why


def test_report_check_fails_on_a_planted_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``suite bench report --check`` runs the figure check on the docs (the tables' rebuild stubbed here: the
    figure check is what is under test)"""
    from benchmarks.report import page

    reg, code = _registry(tmp_path, monkeypatch)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(f"On an H200 at {code}: 35.9 steps/s.\n")
    (tmp_path / "docs" / "gpu.md").write_text("On an H200 SimCLR is 1.23x faster than anything.\n")
    monkeypatch.setattr(page, "check", lambda reg, out: [])
    monkeypatch.setattr(gf, "ROOT", tmp_path)
    monkeypatch.setattr(gf, "documents", lambda root=tmp_path: [tmp_path / "README.md", tmp_path / "docs" / "gpu.md"])
    parser = __import__("argparse").ArgumentParser()
    page.register(parser.add_subparsers())
    args = parser.parse_args(["report", "--check", "--registry", str(tmp_path / "r.sqlite")])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "docs/gpu.md:1: 1.23" in out and "README.md" not in out.split("docs/gpu.md")[0]


def test_the_committed_docs_are_backed() -> None:
    """Every GPU figure of the README and docs/ matches a row of the committed snapshot at the version it names, or
    is marked as kept history"""
    bad = gf.unbacked(open_registry(str(SNAPSHOT)))
    assert not bad, "\n".join(map(str, bad))
