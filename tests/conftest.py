"""Test-wide settings: offline, no progress bars, a private registry, cache, model store and runs root per session."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # the fused kernels' tests run them on the CPU: set before Triton loads

import pytest  # noqa: E402
import torch  # noqa: E402

os.environ.setdefault("SUITE_NO_PROGRESS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# the runner refuses benchmark runs from uncommitted code; the tests run it from whatever tree they test
# (tests/benchmarks/test_code_version.py checks the refusal itself)
os.environ.setdefault("SUITE_ALLOW_DIRTY", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs 2 workers: one thread each, their subprocesses too
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
else:
    torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True, scope="session")
def _private_registry(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.mktemp("suite")
    os.environ["SUITE_REGISTRY"] = str(base / "registry.sqlite")
    os.environ["SUITE_CACHE"] = str(base / "cache")
    os.environ["SUITE_MODELS"] = str(base / "models")
    os.environ["SUITE_RUNS"] = str(base / "runs")  # runs without --out: never in the checkout's runs/


def data_or_skip(*parts: str) -> Path:
    """Path under the data root; skip the (dataset-marked) test when it is absent."""
    from suite.paths import data_path

    p = data_path(*parts)
    if not p.exists():
        pytest.skip(f"real data not found: {p} (set SUITE_DATA)")
    return p


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:  # type: ignore[type-arg]
    """Each phase's report on the test item (``item.rep_call``...): a fixture's teardown can tell a failed test (the
    cluster tests then print what SLURM saw)."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep
