"""``suite bench reliability``: run the bad-day probes (``tests/reliability``), record their outcomes as one
registry run (task ``reliability``: the probes and their docstrings in its config, one metric per probe), and
render ``benchmarks/results/reliability.md`` from the registry: one row per probe, its docstring's first paragraph
(``<what is tried> -> <what must happen>``) and whether it held, the count tried / handled, and what the
suite promises. Nothing in the table is typed in: it comes from the recorded test run, so ``suite bench report``
rebuilds it from the snapshot like every other table.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from suite.registry import markdown_table

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "tests" / "reliability"
OUT = Path(__file__).resolve().parents[1] / "results" / "reliability.md"
TASK = "reliability"
SKIPPED = "skipped:"  # the metric of a skipped probe is named SKIPPED + its key; the others' by the key, 1 = held

PROMISES = [
    "Atomic: checkpoints, exports, migrated snapshots, pretrained models and caches (temporary file, fsync, rename) "
    "and registry writes (SQLite WAL, BEGIN IMMEDIATE); a kill or a full disk mid-write leaves the previous state.",
    "Resumes: a run resumes only a checkpoint of the same experiment config; another config is refused "
    "naming the differing keys; a resumed run continues its own registry row.",
    "Counted: every skipped input (images of another size, unparsable SMILES, non-numeric labels) is "
    "counted on stdout and in the registry.",
    "Refused: pickled code in any file the suite loads (weights_only loads, plain-array caches), malformed "
    "data files (named with file and line), bad loss hyper-parameters and inputs (named), suite names that "
    "escape the log folder.",
    "Owned: the benchmark runner's jobs die with it; runs whose process is gone are marked interrupted "
    "(`suite results reap`).",
    "Checked before written: a snapshot imported or migrated, a suite file and a config file are checked row by row "
    "and value by value first; every bad line is reported at once (file and line), and nothing is written.",
    "Validated when set: a loss setting assigned on a built loss is checked as at `build`; a pretrained folder's config "
    "and weights are checked against each other before loading.",
    "One line: every `suite` command given bad input exits 2 with one line on stderr and no traceback "
    "(`test_cli_bad_inputs` runs them all).",
    "Named at run time: a user's loss that turns non-finite, raises, returns what a loss does not return or changes its "
    "inputs at step k, a GPU out of memory (loss, encoder or evaluation) or failing mid-run: one line naming the loss, "
    "the step, the batch and memory where they apply (the user's own traceback lines only for their code); no finished "
    "row, and the checkpoint before the fault is kept.",
    "Cluster faults: a SLURM controller that does not answer is refused before anything is claimed, and waited for "
    "(said once) while jobs run; a refused submission is one line; a job killed at any stage or requeued onto "
    "another node resumes from its checkpoint into its one row, each metric logged once; a PostgreSQL registry's "
    "server restarting is waited for (`SUITE_REGISTRY_TIMEOUT`), then one line; two login nodes run each job once.",
]


def probe_docs(folder: Path = PROBES) -> dict[tuple[str, str], str]:
    """(module, test name) -> the docstring's first paragraph on one line, read from the sources (no import)."""
    out: dict[tuple[str, str], str] = {}
    for f in sorted(folder.glob("test_*.py")):
        tree = ast.parse(f.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = (ast.get_docstring(node) or "").strip()
                out[(f.stem, node.name)] = " ".join(doc.split("\n\n")[0].split()) if doc else "(no docstring)"
    return out


def run_probes(folder: Path = PROBES) -> dict[tuple[str, str], str]:
    """Run the probes; (module, test name) -> passed | failed | skipped (parametrised cases pooled:
    a probe holds only if every case passed)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder),
                        f"--junitxml={xml}"], cwd=ROOT, env=env, capture_output=True, text=True)
        if not xml.exists():
            raise RuntimeError("the probe run wrote no results (pytest failed to start)")
        root = ET.parse(xml).getroot()
    status: dict[tuple[str, str], str] = {}
    for case in root.iter("testcase"):
        mod = case.get("classname", "").split(".")[-1]
        name = case.get("name", "").split("[")[0]
        s = "failed" if case.find("failure") is not None or case.find("error") is not None else \
            "skipped" if case.find("skipped") is not None else "passed"
        prev = status.get((mod, name))
        rank = {"failed": 2, "skipped": 1, "passed": 0}
        status[(mod, name)] = s if prev is None or rank[s] > rank[prev] else prev
    return status


def record_outcomes(registry: Any, docs: dict[tuple[str, str], str], status: dict[tuple[str, str], str]) -> str | None:
    """Record a probe run in ``registry``: config ``{"probes": {"module.test": docstring}}``, and per probe the metric
    ``module.test`` (1 held, 0 not) or ``skipped:module.test`` (1); headline ``handled``. Returns the run id."""
    from benchmarks.measurements.measured import Measurement, record

    metrics: dict[str, float] = {}
    for (mod, name) in docs:
        s = status.get((mod, name))
        if s == "skipped":
            metrics[f"{SKIPPED}{mod}.{name}"] = 1.0
        elif s is not None:
            metrics[f"{mod}.{name}"] = float(s == "passed")
    metrics["handled"] = float(sum(v for k, v in metrics.items() if not k.startswith(SKIPPED)))
    return record(registry, Measurement(TASK, "tests/reliability", "none",
                                        {"probes": {f"{m}.{n}": d for (m, n), d in sorted(docs.items())}},
                                        metrics, "handled"))


def render(docs: dict[tuple[str, str], str], status: dict[tuple[str, str], str], versions: str = "") -> str:
    rows = []
    for (mod, name), doc in sorted(docs.items()):
        s = status.get((mod, name), "not run")
        mark = {"passed": "handled", "failed": "**NOT handled**", "skipped": "skipped (see test)"}.get(s, s)
        rows.append([mod.removeprefix("test_"), doc, mark])
    tried = sum(1 for r in rows if r[2] != "skipped (see test)")
    handled = sum(1 for r in rows if r[2] == "handled")
    lines = ["# Reliability probes (generated by `suite bench reliability`)", "",
             "Each row is one probe in `tests/reliability/` (its docstring: what is tried -> what must happen), "
             "from the newest recorded probe run; `make test` runs them too." + (f" {versions}" if versions else ""), "",
             f"**{handled} of {tried} probes handled**" + (f" ({len(rows) - tried} skipped)" if len(rows) > tried else "")
             + ".", "", markdown_table(["area", "probe", "result"], rows), "", "## What the suite promises", ""]
    lines += [f"- {p}" for p in PROMISES]
    return "\n".join(lines) + "\n"


def table(registry: Any, allow_dirty: bool = False) -> str:
    """``reliability.md`` from the newest committed ``reliability`` run of ``registry``."""
    from benchmarks.measurements.measured import latest, versions_line

    newest = latest(registry, TASK, lambda m: TASK, allow_dirty).get(TASK)
    if newest is None:
        return ("# Reliability probes (generated by `suite bench reliability`)\n\nNo committed `reliability` run in "
                "the registry yet: `suite bench reliability` records one.\n")
    docs, status = {}, {}
    for key, doc in newest.config["probes"].items():
        mod, name = key.split(".", 1)
        docs[(mod, name)] = doc
        held = newest.metrics.get(key)
        status[(mod, name)] = ("skipped" if newest.metrics.get(SKIPPED + key) else
                               "not run" if held is None else "passed" if held else "failed")
    return render(docs, status, versions_line([newest]))


def register(sub: Any) -> None:
    p = sub.add_parser("reliability", help="run the bad-day probes, record their outcomes in the registry and write "
                                           "benchmarks/results/reliability.md")
    p.add_argument("--out", type=Path, default=None, help="default: results/tables/reliability.md (the committed one "
                   "is rebuilt from the snapshot by suite bench report)")
    p.add_argument("--no-registry", action="store_true", help="do not record the outcomes in the registry (the table "
                                                              "is rendered from a temporary one)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from suite.registry import Registry

    from benchmarks.paths import results_target

    with tempfile.TemporaryDirectory() as tmp:
        reg = Registry(str(Path(tmp) / "registry.sqlite")) if args.no_registry else Registry()
        out = results_target(args.out, OUT, reg)
        if args.out is not None and not out.parent.is_dir():  # refused before the probes run (minutes), not after
            raise ValueError(f"--out {out}: folder {out.parent} not found")
        record_outcomes(reg, probe_docs(), run_probes())  # recorded before the table is written
        text = table(reg, allow_dirty=args.no_registry)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0 if "NOT handled" not in text else 1
