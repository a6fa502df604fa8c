"""docs/tiny.md's commands run as written, each within a minute (issue 80: each journey has tiny settings). On the
real data (``SUITE_DATA``); skipped, with the reason, where the data are absent. Slow (about 3 min in all): in
``make test-slow``."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite.paths import data_root

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tiny.md"
LIMIT_S = 60.0


def commands() -> list[str]:
    block = re.search(r"^```bash\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    assert block, "docs/tiny.md has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_page_covers_every_journey() -> None:
    words = [shlex.split(c)[:3] for c in commands()]
    assert {tuple(w[1:3]) for w in words} >= {("graph", "tu"), ("graph", "pretrain-mol"), ("graph", "finetune-mol"),
                                              ("graph", "predict"), ("text", "train"), ("vision", "pretrain")}
    assert all(w[0] == "suite" for w in words)


@pytest.mark.slow
@pytest.mark.dataset
@pytest.mark.timeout(900)
def test_every_tiny_command_runs_within_a_minute(tmp_path: Path) -> None:
    root = data_root()
    for need in ("TU/MUTAG", "zinc/moses", "moleculenet/bbbp.csv", "wiki", "cifar10-jpg"):
        if not (root / need).exists():
            pytest.skip(f"real data not found: {root / need} (set SUITE_DATA)")
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    rings = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCOC1", "c1ccsc1", "C1CCNCC1"]
    mols = [("C" * (i % 4)) + rings[i % len(rings)] + ("O" * (i % 3)) for i in range(60)]
    (tmp_path / "runs/tiny/mine.csv").write_text("smiles,y\n" + "".join(f"{s},{len(s) / 10:.2f}\n" for s in mols))
    env = {**os.environ, "SUITE_DATA": str(root), "SUITE_NO_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    slow = []
    for line in commands():
        argv = [sys.executable, "-m", "suite", *shlex.split(os.path.expandvars(line.replace("$SUITE_DATA", str(root)))
                                                            )[1:]]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        took = time.perf_counter() - t0
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        if took > LIMIT_S:
            slow.append(f"{took:.0f} s: {line}")
    assert not slow, "over a minute on one thread:\n" + "\n".join(slow)
    assert len((tmp_path / "runs/tiny/mine_preds.csv").read_text().splitlines()) == 61  # one row a molecule
