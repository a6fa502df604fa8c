"""A run's code version names code that exists: results files and prose changing under a running grid do not make
it ``-dirty``, a code change does, and the runner refuses benchmark runs from uncommitted code."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from suite.registry.schema import code_version


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_only_code_changes_make_a_checkout_dirty(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "suite").mkdir()
    for f in ("suite/core.py", "benchmarks/results/registry.jsonl", "README.md"):
        (tmp_path / f).write_text("a\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "x")
    clean = code_version(tmp_path)
    assert len(clean) == 12
    (tmp_path / "benchmarks" / "results" / "registry.jsonl").write_text("b\n")  # a grid adding runs
    (tmp_path / "README.md").write_text("b\n")
    assert code_version(tmp_path) == clean
    (tmp_path / "suite" / "core.py").write_text("b\n")
    assert code_version(tmp_path) == clean + "-dirty"


def test_the_runner_refuses_uncommitted_code(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from suite.cli import main
    from suite.registry import schema

    monkeypatch.delenv("SUITE_ALLOW_DIRTY", raising=False)
    monkeypatch.setattr(schema, "code_version", lambda root=None: "0123456789ab-dirty")
    assert main(["bench", "run", "quick", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert "uncommitted code changes (commit 0123456789ab" in err and "--allow-dirty" in err
    assert main(["bench", "compare", "infonce", "--suite", "quick"]) == 2
    assert "uncommitted code changes" in capsys.readouterr().err
