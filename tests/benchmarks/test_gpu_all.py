"""``make gpu-all`` at its tiny size on the CPU (issue 68): every step runs to the end, in order of value, and the
measuring steps write their rows into the registry given."""
from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.measurements import gpu_all, gpu_bench
from suite.registry import Registry


def test_gpu_all_runs_to_the_end_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / "r.sqlite")
    committed = gpu_bench.RESULTS.read_bytes()
    assert gpu_all.main(["--tiny", "--registry", path]) == 0
    # the tiny CPU run's table goes beside its registry, never over the committed one (issue 80)
    assert gpu_bench.RESULTS.read_bytes() == committed and (tmp_path / "results/tables/gpu_bench.md").is_file()
    out = capsys.readouterr().out
    names = [n for n, _ in gpu_all.steps(path, tiny=True)]
    assert names == ["gpu-check losses", "gpu-bench loss core", "gpu-bench front-ends", "fused kernels"]
    summary = out[out.index("gpu-all summary:"):]
    assert [line.split(":")[0].strip() for line in summary.splitlines()[1:]] == names and "FAILED" not in summary
    reg = Registry(path)
    assert {r["dataset"] for r in reg.runs(task="gpu-check")} == {"losses"}
    assert {r["dataset"] for r in reg.runs(task=gpu_bench.TASK)} == {"graph-tu"}
    assert "plain-infonce" in {r["dataset"] for r in reg.runs(task=gpu_bench.LOSS_TASK)}


def test_gpu_all_on_a_gpu_checks_the_front_ends_last_and_skips_what_a_deadline_leaves(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the front-ends' gpu-check follows the measurements (issue 78's figures first); --deadline-s 0 skips
    every step, named in the summary, and exits 0 (a device lent for a fixed time returns what was measured)."""
    names = [n for n, _ in gpu_all.steps(None, tiny=False, text_backbone="/m")]
    assert names[:5] == ["gpu-check losses", "gpu-bench loss core", "gpu-bench front-ends", "fused kernels",
                         "gpu-check front-ends"]
    monkeypatch.chdir(tmp_path)
    assert gpu_all.main(["--tiny", "--registry", str(tmp_path / "r.sqlite"), "--deadline-s", "0"]) == 0
    summary = capsys.readouterr().out.split("gpu-all summary:")[1].splitlines()[1:]
    assert len(summary) == 4 and all("skipped (the deadline of 0 s had passed)" in line for line in summary)
