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
    assert names == ["gpu-check", "gpu-bench front-ends", "gpu-bench loss core", "fused kernels"]
    summary = out[out.index("gpu-all summary:"):]
    assert [line.split(":")[0].strip() for line in summary.splitlines()[1:]] == names and "FAILED" not in summary
    reg = Registry(path)
    assert {r["dataset"] for r in reg.runs(task="gpu-check")} == {"losses"}
    assert {r["dataset"] for r in reg.runs(task=gpu_bench.TASK)} == {"graph-tu"}
    assert "plain-infonce" in {r["dataset"] for r in reg.runs(task=gpu_bench.LOSS_TASK)}
