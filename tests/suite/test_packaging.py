"""What a wheel or a non-editable install carries: every data file the packages read (the front-ends' YAML configs,
the runner's suite files) is declared in setup.cfg's package_data (a GPU machine's `pip install .` had none of them:
`suite graph tu` failed with 'config file not found')."""
from __future__ import annotations

import configparser
import fnmatch
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_tracked_data_file_of_a_package_is_package_data() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    declared = {pkg: [p.strip() for p in pats.replace(",", "\n").split("\n") if p.strip()]
                for pkg, pats in cfg["options.package_data"].items()}
    tracked = subprocess.run(["git", "ls-files", "suite", "vision", "graph", "text", "benchmarks"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    read = [f for f in tracked if f.endswith((".yaml", ".yml", ".json")) and not f.startswith("benchmarks/results/")]
    assert read, "no data files found: the test reads the wrong tree"
    missing = [f for f in read if not any(fnmatch.fnmatch(f.partition("/")[2], p)
                                          for p in declared.get(f.partition("/")[0], []))]
    assert not missing, f"not in setup.cfg [options.package_data]: {missing}"
