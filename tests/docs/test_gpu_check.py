"""``make gpu-check`` (suite/gpu_check.py) on a machine without a GPU, and its parts that do not need one: the loss
comparison (CPU against CPU here), the scratch data and the front-end commands (parsed by the real ``suite`` parser,
so a renamed option breaks this test, not the first GPU run)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from suite import gpu_check

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_gpu_it_says_so_and_exits_0() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    res = subprocess.run([sys.executable, "-m", "suite.gpu_check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(gpu_check.NO_GPU), res.stdout
    assert "nothing was run" in res.stdout


def test_every_loss_is_compared_dense_and_tiled() -> None:
    """Every loss dense and tiled, X-CLR with its graph as embeddings, the kernels' general path: on the CPU against
    itself, equal (the comparison's plumbing; on a GPU the kernels against the CPU's tiles)."""
    import suite.losses as L

    results = gpu_check.check_losses(torch.device("cpu"), n=8, d=4)
    core = [n for n in L.available() if n not in L.plugins()]
    assert {(r.name, r.path) for r in results} == ({(n, p) for n in core for p in ("dense", "tiled")}
                                                   | set(gpu_check.EXTRA_PATHS))
    assert all(r.ok and r.max_rel_diff == 0.0 for r in results), [r for r in results if not r.ok]


def test_the_front_end_commands_parse(tmp_path: Path) -> None:
    from suite.cli import build_parser

    fes = gpu_check.front_ends(gpu_check.write_data(tmp_path))
    assert {fe.name for fe in fes} == {"graph-tu", "graph-mol", "vision-simclr", "vision-moco", "text-simcse"}
    parser = build_parser()
    for fe in fes:
        cmd = gpu_check._command(fe, "cuda", tmp_path / "out", nproc=1)
        argv = cmd[cmd.index("exec-bf16") + 1:] if fe.autocast else cmd[3:]
        assert argv[:2] == fe.argv[:2] and "--bf16" in argv or fe.autocast, fe.name
        args = parser.parse_args(argv)
        assert args.device == "cuda" and getattr(args, "func", None) is not None, fe.name
        two = gpu_check._command(fe, "cuda", tmp_path / "out", nproc=2)
        assert two[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "2" in two
    assert (tmp_path / "TU" / "GPUCHECK" / "raw" / "GPUCHECK_A.txt").stat().st_size > 0
    assert (tmp_path / "senteval" / "downstream" / "STS" / "STSBenchmark" / "sts-dev.csv").exists()


@pytest.mark.slow
def test_the_whole_check_runs_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUITE_REGISTRY", str(tmp_path / "registry.sqlite"))
    assert gpu_check.main(["--device", "cpu", "--keep", str(tmp_path / "scratch")]) == 0
    from suite.registry import Registry

    runs = Registry(str(tmp_path / "registry.sqlite")).runs(task="gpu-check")
    assert {r["dataset"] for r in runs} == {"losses", "graph-tu", "graph-mol", "vision-simclr", "vision-moco",
                                            "text-simcse"}
    assert all(r["status"] == "finished" for r in runs)


def test_its_rows_name_the_machine_and_versions(tmp_path: Path) -> None:
    """gpu-check's rows (task ``gpu-check``: the loss comparison and each front-end) carry the device, driver, CUDA,
    torch and Triton versions and a machine identity in their config (on the CPU: no GPU, no driver), the loss row
    how many paths agree; a failed front-end is a failed row with its log"""
    import json

    from suite.machine import FIELDS, environment
    from suite.registry import Registry

    env = environment(torch.device("cpu"))
    assert set(FIELDS) <= set(env) and env["gpu"] is None and env["driver"] is None and env["device"] == "cpu"
    assert env["torch"] == torch.__version__ and len(env["machine"]) == 12
    losses = gpu_check.check_losses(torch.device("cpu"), n=8, d=4)
    results = [gpu_check.FrontEndResult("graph-tu", 1, True, 2.5, 640.0),
               gpu_check.FrontEndResult("text-simcse", 1, False, 1.0, None, log="Traceback: boom")]
    path = str(tmp_path / "r.sqlite")
    gpu_check.record(results, env, losses, path)
    reg = Registry(path)
    runs = {r["dataset"]: r for r in reg.runs(task="gpu-check")}
    assert set(runs) == {"losses", "graph-tu", "text-simcse"}
    for r in runs.values():
        cfg = json.loads(r["config"])
        assert {k: cfg[k] for k in FIELDS} == env
    assert runs["graph-tu"]["status"] == "finished" and runs["text-simcse"]["status"] == "failed"
    m = reg.final_metrics(runs["losses"]["id"])
    assert m[("agree", "gpu")] == m[("paths", "gpu")] == len(losses)
    assert reg.final_metrics(runs["graph-tu"]["id"])[("throughput", "gpu")] == 640.0


def test_two_machines_have_two_identities(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both hosts called ``vm`` with one cloned machine-id: their GPUs' UUIDs still tell them apart"""
    from suite import machine

    monkeypatch.setattr(machine.socket, "gethostname", lambda: "vm")
    monkeypatch.setattr(machine, "_machine_id", lambda: "same-image")
    a, b = machine.machine_identity(["GPU-aaaa"]), machine.machine_identity(["GPU-bbbb"])
    assert a != b and a == machine.machine_identity(["GPU-aaaa"])
