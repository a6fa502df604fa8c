"""Every GPU figure in the hand-written Markdown is a registry row (issue 68), checked by ``suite bench report --check``.

The results files are rebuilt from the registry (:func:`benchmarks.report.page.check`); the README and the pages under
``docs/`` are written by hand, so their GPU figures are checked here, block by block (a paragraph, a list item, a
table row; code blocks skipped):

* a figure is a decimal number (``20.8``, ``0.97``, ``3.3e-06``) or a number with a unit (``ms``, ``MB``, ``GB``,
  ``/s``, ``%``), leaving out versions (``torch 2.11.0``, ``CUDA 13.0``) and targets (``target 0.9``, ``within
  1.1x``);
* a block about a GPU that names a code version (``fd2520e``: 7 to 12 hex digits in brackets, or after
  ``at``/``code``) quotes rows of that version: each of its figures must equal, to its printed digits, a value of a GPU row (tasks
  :data:`TASKS`) at one of the versions it names (a metric, a front-end's ratio from its median rates, a loss's time
  over its plain InfoNCE's, a peak in GB);
* a block that names a GPU (:data:`GPU_NAMES`) without a code version is a figure with no row, unless it is marked
  as kept history: it starts with ``*Unrecorded:*`` (a list item after its bullet).

Example: ``python -m benchmarks.report.gpu_figures`` lists every unbacked figure and exits 1 if there is one.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("gpu-bench", "gpu-bench-loss", "loss-bench-gpu", "gpu-check", "image-loader")
GPU_NAMES = re.compile(r"\b(H100|H200|A100|A10G?|L4|L40S?|V100|T4|RTX ?\d{4}|NVIDIA)\b")
ON_GPU = re.compile(r"\b(GPU|CUDA)\b")  # a block about a GPU (a CPU figure may name its code version too)
VERSION = re.compile(r"(?:\(|\bat |\bcode |, )([0-9a-f]{7,12})\b")
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+(?:e-?\d+)?|\d[\d,]*(?=\s?(?:ms|MB|GB|%|[a-z]+/s)\b))(?![\w.]*\.\d)")
NOT_A_FIGURE = re.compile(r"(torch|CUDA|Triton|driver|Python|sm_|target|targets|within|at least|at most|<=|>=|"
                          r"cu\d+)\W{0,3}$", re.IGNORECASE)
UNRECORDED = "*Unrecorded"


@dataclass(frozen=True)
class Unbacked:
    path: str
    line: int
    figure: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.figure}: {self.why}"


def documents(root: Path = ROOT) -> list[Path]:
    """The hand-written Markdown checked: the README, each front-end's and every page under ``docs/`` (not the built
    site)."""
    fronts = [root / part / "README.md" for part in ("suite", "vision", "graph", "text", "benchmarks")]
    return [root / "README.md", *(p for p in fronts if p.exists())] + sorted(
        p for p in (root / "docs").rglob("*.md") if "_build" not in p.parts)


def blocks(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each paragraph, list item and table row, fenced code left out."""
    fenced, start, buf = False, 0, []  # type: ignore[var-annotated]
    for i, line in enumerate(text.splitlines() + [""], 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            line = ""
        if fenced:
            continue
        new_item = line.startswith(("|", "#")) or re.match(r"\s*([-*]|\d+\.) ", line)
        if (not line.strip() or new_item) and buf:
            yield start, " ".join(buf)
            buf = []
        if line.strip():
            if not buf:
                start = i
            buf.append(line.strip())
            if line.startswith(("|", "#")):
                yield start, " ".join(buf)
                buf = []


def figures(block: str) -> list[str]:
    """The figures of a block (module docstring), as printed."""
    return [m.group(1) for m in FIGURE.finditer(block) if not NOT_A_FIGURE.search(block[:m.start()])]


def row_values(registry: Any) -> dict[str, list[float]]:
    """Every value a GPU row of ``registry`` can be quoted by, per code version (its first 7 digits)."""
    from benchmarks.measurements.gpu_tables import front_end_ratio, reference_case

    out: dict[str, list[float]] = {}
    plain: dict[tuple[Any, ...], float] = {}
    loss_rows = []
    for task in TASKS:
        for r in registry.runs(status="finished", task=task):
            cfg = json.loads(r["config"] or "{}")
            if cfg.get("device", "cpu") == "cpu":
                continue
            m = {n: v for (n, _), v in registry.final_metrics(r["id"]).items() if isinstance(v, (int, float))}
            vals = out.setdefault(str(r["code_version"])[:7], [])
            vals += list(m.values()) + [v / 1024 for k, v in m.items() if k.endswith("_mb")]
            if task == "gpu-bench" and m.get("plain_steps_per_s"):
                vals.append(front_end_ratio(m))
            if task == "gpu-bench-loss" and "ms" in m:
                key = (str(r["code_version"]), cfg.get("n"))
                if r["dataset"].startswith("plain-"):
                    plain[(*key, r["dataset"])] = m["ms"]
                loss_rows.append((key, r["dataset"], m["ms"]))
    for key, case, ms in loss_rows:
        ref = plain.get((*key, reference_case(case)))
        if ref:
            out[key[0][:7]].append(ms / ref)
    return out


def _matches(figure: str, values: Iterable[float]) -> bool:
    text = figure.replace(",", "")
    want = float(text)
    if "e" in text:
        return any(math.isclose(v, want, rel_tol=0.05) for v in values)
    digits = len(text.split(".")[1]) if "." in text else 0
    return any(math.isfinite(v) and round(v, digits) == round(want, digits) for v in values)


def unbacked(registry: Any, paths: Iterable[Path] | None = None, root: Path = ROOT) -> list[Unbacked]:
    """Every GPU figure of ``paths`` (default: :func:`documents`) that no row of ``registry`` backs."""
    values = row_values(registry)
    bad = []
    for path in paths if paths is not None else documents(root):
        name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        for line, block in blocks(path.read_text()):
            if re.sub(r"^([-*]|\d+\.) ", "", block).startswith(UNRECORDED) or block.startswith("#"):
                continue
            found = figures(block)
            versions = [v[:7] for v in VERSION.findall(block)]
            if not found or not (GPU_NAMES.search(block) or versions and ON_GPU.search(block)):
                continue
            if not versions:
                bad += [Unbacked(name, line, f, "a GPU figure with no code version (no registry row)") for f in found]
                continue
            rows = [v for ver in versions for v in values.get(ver, [])]
            bad += [Unbacked(name, line, f, f"no GPU row at {', '.join(sorted(set(versions)))} has this value")
                    for f in found if not _matches(f, rows)]
    return bad


def main(argv: list[str] | None = None) -> int:
    from benchmarks.paths import SNAPSHOT
    from suite.registry import open_registry

    args = sys.argv[1:] if argv is None else argv
    bad = unbacked(open_registry(args[0] if args else str(SNAPSHOT)))
    for b in bad:
        print(b)
    print(f"{len(bad)} GPU figure(s) in the docs match no registry row" if bad else
          "every GPU figure in the docs is a registry row")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
