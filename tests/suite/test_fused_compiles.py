"""The fused kernels compile for a GPU where there is none: Triton's NVIDIA backend builds them for an H100 (sm_90)
through ptxas, with no device. The interpreter tests (test_fused.py) check the kernels' arithmetic; what only the
compiler rejects (a construct the interpreter runs but Triton cannot lower, registers or shared memory past a
Hopper SM's) would otherwise first fail on a user's GPU, inside a backward. The variants no GPU has run yet: the
symmetric backward (DCL's and MACL's, hard negatives' two scales, CACR's), the rows' backward of CACR's general path,
the forward with values, a device scale, CACR's cost and the two scales, the backward with rows of values (each
compile takes seconds: the other variants were run on an H200). Run in a fresh process: one process runs Triton
either interpreted or compiled."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

triton = pytest.importorskip("triton", reason="Triton is not installed (extra [triton]; in [test] on Linux x86-64)")

SCRIPT = textwrap.dedent('''
    import inspect, sys
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from suite.losses import fused

    kernels = dict(zip(("fwd", "bwd", "sym"), fused._kernels(False)))
    raw = {"fwd": fused._fwd_kernel, "bwd": fused._bwd_kernel, "sym": fused._self_bwd_kernel}

    def build(name, **const):
        params = inspect.signature(raw[name]).parameters
        sig = {}
        for p in params:
            if p in const:
                sig[p] = "constexpr"
            elif p in ("c1", "c2", "qoff"):
                sig[p] = "fp32"
            elif p in ("M", "C", "D", "DV", "n_c", "n_grad", "SZ"):
                sig[p] = "i32"
            else:  # the tensors
                sig[p] = "*i64" if p in ("E", "E_C") else "*fp32"
        src = ASTSource(fn=kernels[name].fn, signature=sig, constexprs=const)
        out = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 2})
        print(name, const["MODE"], out.metadata.shared, flush=True)

    common = dict(PREC="tf32x3", BF16=0, BM=64, BN=64, BD=128)
    sym = dict(MODE=0, HAS_Q=False, SYM=True)
    # DCL / MACL's symmetric backward (a device scale), with hard negatives' two scales in the same compile
    build("sym", K_EXCL=2, HAS_KS=True, COST=0, TWO=True, **sym, **common)
    build("sym", K_EXCL=1, HAS_KS=False, COST=1, TWO=False, **sym, **common)  # CACR's symmetric backward
    build("sym", MODE=0, K_EXCL=1, HAS_KS=False, SYM=False, HAS_Q=True, COST=1, TWO=False,
          **common)  # CACR's anchors, a queue
    # the forward with values and a device scale, the backward with rows of values (X-CLR's target term), each with
    # CACR's cost branch too, the forward with the two scales' (no loss asks for these at once: one compile covers
    # the branches of each)
    build("fwd", MODE=0, K_EXCL=1, WANT_O=True, HAS_Q=False, HAS_KS=True, HAS_V=True, COST=True, TWO=True, BDV=64,
          **common)
    build("bwd", MODE=0, K_EXCL=1, HAS_Q=False, HAS_U=True, COST=1, BDV=64, **common)
''')


@pytest.mark.slow  # about 25 s of one core: `make test-slow`, which CI runs beside `make test`
def test_the_kernels_compile_for_an_h100(tmp_path):
    if "nvidia" not in __import__("triton.backends", fromlist=["backends"]).backends:
        pytest.fail("this Triton has no NVIDIA backend: the [triton] extra installs the one that has")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.split()
    shared = [int(x) for x in lines[2::3]]
    assert len(shared) == 5 and all(0 < s <= 227 * 1024 for s in shared), run.stdout  # an H100 SM's shared memory
