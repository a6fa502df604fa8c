"""examples/benchmark-your-own-loss.md, run as written: every command of its ``bash`` blocks, in order, in a scratch
folder. Three substitutions keep it offline and small: the package is installed into the scratch folder (``pip
install --no-build-isolation --no-deps --target``, on ``PYTHONPATH``) instead of the test environment; ``--suite
quick`` names a tiny suite (the built-in digits, 1 epoch, 3 seeds, one baseline); and the comparison's timings stop at
2N = 256. The page must hold the loss beside the baseline with a verdict."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "examples" / "benchmark-your-own-loss.md"
TINY_SUITE = {"name": "tiny", "jobs": [{
    "frontend": "vision", "command": "pretrain", "seed_flag": "--seed", "seeds": [0, 1, 2], "grid": {"loss": ["infonce"]},
    "args": {"dataset": "digits", "encoder": "convnet", "width": 4, "epochs": 1, "batch-size": 64, "optimizer": "adam",
             "train-per-class": 20, "out": "runs/tiny/{job}"}}]}


def commands(markdown: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)
    return [line.strip() for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.slow  # over 10 s of one core: `make test-slow`, which CI runs (make test within 5 min)
def test_tutorial_commands_run_as_written(tmp_path: Path) -> None:
    cmds = commands(TUTORIAL.read_text(encoding="utf-8"))
    assert [c.split()[:3] for c in cmds] == [["suite", "vision", "pretrain"], ["pip", "install", "-e"],
                                             ["suite", "losses"], ["suite", "bench", "compare"]]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY_SUITE))
    site = tmp_path / "site"
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "OMP_NUM_THREADS": "1",
           "SUITE_REGISTRY": str(tmp_path / "registry.sqlite"), "SUITE_RUNS": str(tmp_path / "runs"),
           "SUITE_NO_PROGRESS": "1", "SUITE_COMPARE_SIZES": "256"}
    outputs = []
    for cmd in cmds:
        argv = shlex.split(cmd)
        if argv[:3] == ["pip", "install", "-e"]:
            argv = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--target",
                    str(site), argv[3]]
        elif argv[0] == "suite":
            argv = [str(bindir / "suite"), *argv[1:]]
            if "--suite" in argv:
                argv[argv.index("--suite") + 1] = "tiny.yaml"
        res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        outputs.append(res.stdout)
    assert "| barlow_twins |" in outputs[2] and "suite-barlow-twins 0.1.0" in outputs[2]
    page = (tmp_path / "results" / "compare" / "barlow_twins.md").read_text()
    assert page.index("## Findings") < page.index("## Verdicts") < page.index("Loss `barlow_twins` from the package")
    assert "## Verdicts" in page and re.search(r"\| barlow_twins beats infonce \| (confirmed|not confirmed|contradicted) \|", page)
    assert re.search(r"\| barlow_twins \| 3 \| \d+\.\d\d ± \d+\.\d\d \|", page) and "| infonce | 3 |" in page
    assert "| 256 |" in page and (tmp_path / "results" / "compare" / "barlow_twins.html").read_text().startswith("<!DOCTYPE html>")
