"""The GPU bench of the tiled path (benchmarks.measurements.fused_bench) on the CPU: every loss it measures builds and
runs on each of its paths at a tiny 2N (the kernels under Triton's interpreter), and the GPU section of
losses_large.md is rendered from its registry rows alone."""
from __future__ import annotations

import contextlib
import math

import pytest
import torch

from benchmarks.measurements import fused_bench as fb
from benchmarks.measurements.loss_tables import table_large
from suite.registry import Registry

pytest.importorskip("triton", reason="Triton is not installed (extra [triton])")

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", fb.fused_losses())
def test_every_path_runs(name, monkeypatch):
    from suite.losses import fused, tiling

    monkeypatch.setattr(tiling, "AUTO_TILE_ELEMENTS", 48 * 8)  # 8 rows per tile at 2N = 48: the bench's tiles, scaled
    calls = []
    for fn in (fused._FusedRows, fused._FusedRowSums, fused._FusedSelf, fused._FusedCost, fused._FusedSelfTwo,
               fused._FusedPair):
        monkeypatch.setattr(fn, "apply", lambda *a, apply=fn.apply, f=fn: calls.append(f) or apply(*a))
    paths = [("dense", "auto"), ("tiled", "off"), ("fused", "interpret")]
    for path, mode in paths + ([("fused-general", "general")] if name in fb.GENERAL else []):
        calls.clear()
        with fused.interpret() if path == "fused-general" else contextlib.nullcontext():
            m = fb.measure(*fb.call(name, 48, CPU, path, "fp32"), CPU, 1, mode)
        assert math.isfinite(m["ms"]) and m["ms"] > 0
        assert bool(calls) == path.startswith("fused")
        if name in fb.GENERAL:  # the symmetric (or pair) path, and on the general path not
            special = fused._FusedPair if name == "cmc" else fused._FusedSelf
            assert (special in calls) == (path == "fused"), (path, calls)


def test_losses_named_are_checked_before_the_device(capsys):
    """A loss that does not take the kernels (or a typo) is refused by name, on any machine, before a GPU is touched;
    the losses named are those measured (the list once went undefined where Inf-CL was installed)."""
    with pytest.raises(SystemExit):
        fb.main(["--losses", "infonce,nope"])
    assert "nope do not take the kernels" in capsys.readouterr().err


def test_the_bench_loop_runs_on_the_cpu(capsys, monkeypatch):
    """``--dry-run``: main's own loop over its cells, on the CPU with the kernels interpreted, as a GPU runs it (a
    loss of each kind of kernel: rows, the cost, X-CLR's values), every path; a cell that fails makes it exit 1."""
    from suite.losses import tiling

    monkeypatch.setattr(tiling, "AUTO_TILE_ELEMENTS", 48 * 8)
    assert fb.main(["--dry-run", "--sizes", "48", "--losses", "infonce,cacr,xclr", "--precisions", "fp32",
                    "--repeats", "1", "--no-errors", "--paths", "dense,tiled,fused,fused-general,inf-cl"]) == 0
    out = capsys.readouterr().out
    cells = [line.split(":")[0] for line in out.splitlines() if line.startswith("2N=48 ")]
    assert cells == ["2N=48 infonce dense fp32", "2N=48 infonce tiled fp32", "2N=48 infonce fused fp32",
                     "2N=48 infonce fused-general fp32", "2N=48 cacr dense fp32", "2N=48 cacr tiled fp32",
                     "2N=48 cacr fused fp32", "2N=48 xclr dense fp32", "2N=48 xclr tiled fp32",
                     "2N=48 xclr fused fp32"], out


def test_no_cuda_no_measurement(capsys):
    if torch.cuda.is_available():  # pragma: no cover
        pytest.skip("a CUDA device is here")
    assert fb.main(["--sizes", "64"]) == 0
    assert "no CUDA device" in capsys.readouterr().out


def test_gpu_section_from_the_registry(tmp_path):
    reg = Registry(str(tmp_path / "r.sqlite"))
    info = {"device": "NVIDIA X", "torch": "2.11", "cuda": "13.0", "threads": "1", "triton": "3.6", "d": 128}
    rate = {"fp32": 50.0, "tf32": 400.0, "bf16": 800.0}

    def rec(name, n, path, prec, ms, mb, **extra):
        fb._record(reg, name, {**info, "two_n": n, "path": path, "precision": prec},
                   {"ms": ms, "peak_mb": mb, "floor_ms": fb.flops(name, n) / (rate[prec] * 1e12) * 1e3,
                    "matmul_tflops": rate[prec], **extra})

    rec("infonce", 32768, "dense", "fp32", 40.0, 12000.0)
    rec("infonce", 32768, "tiled", "fp32", 110.0, 130.0)
    rec("infonce", 32768, "fused", "fp32", 30.0, 60.0)  # floor 4 * 2 * 32768^2 * 128 / 50e12 = 22.0 ms
    rec("infonce", 32768, "fused-general", "fp32", 41.0, 190.0)
    rec("dcl", 131072, "dense", "fp32", math.nan, math.nan, oom=1.0)
    rec("dcl", 1048576, "fused", "bf16", 9000.0, 5000.0)
    fb._record(reg, "infonce", {**info, "two_n": 8192, "path": "precision-error", "precision": "bf16"},
               {"loss_rel_err": 2e-3, "grad_rel_err": 1e-2})
    text = table_large(reg, allow_dirty=True)
    assert "NVIDIA X, torch 2.11, Triton 3.6, CUDA 13.0" in text
    assert "| infonce | 32,768 | 40.0 (12,000) | 110.0 (130) | 30.0 (60) | - | - | - | 22.0 |" in text
    assert "| dcl | 131,072 | out of memory |" in text
    assert "the kernels 30.0 ms against dense 40.0 ms (faster), 1.36x the floor of 22.0 ms (target <= 1.5x: met)" in text
    assert "dcl 5,000 MB; **over**: dcl." in text
    assert "infonce 2N = 32,768 fp32: 30.0 (60) against 41.0 (190)." in text
    assert "| bf16 | 2.0e-03 | 1.0e-02 |" in text
