"""The report page and its Markdown twin, and ``suite bench report`` (``--check``).

:func:`build` renders every results file from the registry alone: the benchmark modules' tables (:data:`TABLES`),
then ``README.md`` and ``report.html``. Both open with the findings (every claim of :mod:`benchmarks.tables.catalogue`,
judged once, and their forest plot), then one section per modality: the tables each suite file declares under
``report:`` (its headline first, a labelled reduction below it; an entry with ``curves: loss`` instead of ``table``
draws the suite's step curves of that modality, :func:`benchmarks.report.figures.suite_curves`, nothing where none
were logged), the modality's figures, and, collapsed, every
setting of every task of that modality (the history). The page is self-contained (images embedded), so it works
offline.
"""
from __future__ import annotations

import argparse
import html
import importlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from benchmarks.paths import RESULTS, SNAPSHOT, is_snapshot, results_target
from benchmarks.tables.claims import RULE_TEXT, Verdict
from benchmarks.tables import suite_runs, versions_of
from benchmarks.report.cells import Table, _fmt, _rows, collect, published
from benchmarks.report.figures import (loss_time, module_figures, png, rank_heatmap, suite_curves, trajectories,
                                       without_pixels)
from suite.registry import Registry, markdown_table, open_registry
from suite.registry.queries import versions_text


# every table rendered from the registry: (module, its output file attribute); `suite bench report` writes them all
# and `--check` rebuilds them from the committed snapshot and compares them with the committed files
TABLES = (("benchmarks.tables.graph_tu", "OUT"), ("benchmarks.tables.graph_molnet", "OUT"), ("benchmarks.tables.text_sts", "OUT"),
          ("benchmarks.tables.vision_cifar", "OUT"), ("benchmarks.tables.gmm", "OUT"), ("benchmarks.tables.fidelity", "RESULTS"),
          ("benchmarks.tables.xclr", "OUT"), ("benchmarks.measurements.loss_tables", "OUT"), ("benchmarks.measurements.losses_large", "OUT"),
          ("benchmarks.measurements.grad_cache", "OUT"), ("benchmarks.measurements.reliability", "OUT"),
          ("benchmarks.measurements.gpu_bench", "OUT"))


@dataclass(frozen=True)
class Section:
    key: str  # the name suite files use in their ``report:`` entries
    title: str
    modality: str  # the registry's modality of its tasks (their history tables)
    figures: tuple[str, ...]  # benchmark modules whose figures(registry) are drawn here


SECTIONS = (Section("graphs", "Graphs", "graph", ("benchmarks.tables.graph_tu", "benchmarks.tables.graph_molnet")),
            Section("images", "Images", "vision", ("benchmarks.tables.vision_cifar", "benchmarks.tables.xclr")),
            Section("sentences", "Sentences", "text", ("benchmarks.tables.text_sts",)),
            Section("synthetic", "Synthetic data", "synthetic", ("benchmarks.tables.gmm",)))


@dataclass(frozen=True)
class Shown:
    """A table a suite file declares for the report (``report:`` entries): its section, its place in it, a title,
    and ``table``: ``file.md#heading`` (the part of a rendered results file under that heading; an empty heading:
    the part before the first heading below the file's title), or ``curves``: a metric whose step curves the suite's
    runs of the section's modality logged (one figure)."""
    suite: str
    section: str
    order: int
    title: str
    table: str
    curves: str = ""


def declared() -> list[Shown]:
    """Every ``report:`` entry of the shipped suite files, in section order."""
    from benchmarks.runner.suitefile import SUITES

    keys = {s.key for s in SECTIONS}
    out = []
    for f in sorted(SUITES.glob("*.yaml")):
        spec = yaml.safe_load(f.read_text()) or {}
        for e in spec.get("report") or []:
            if (not isinstance(e, dict) or set(e) not in ({"section", "order", "title", "table"},
                                                          {"section", "order", "title", "curves"})
                    or e["section"] not in keys):
                raise ValueError(f"suite {f}: a report entry needs section (one of {sorted(keys)}), order, title and "
                                 f"table (or curves: a metric), got {e!r}")
            out.append(Shown(f.stem, e["section"], int(e["order"]), str(e["title"]), str(e.get("table", "")),
                             str(e.get("curves", ""))))
    return sorted(out, key=lambda s: (s.section, s.order))


def excerpt(text: str, heading: str) -> str:
    """The part of Markdown ``text`` under ``heading`` (up to the next heading); "" = the part between the title
    and the first heading below it. Raises if the heading is missing (a renamed section would silently vanish)."""
    lines = text.splitlines()
    if heading:
        starts = [i for i, l in enumerate(lines) if l.startswith("#") and l.lstrip("#").strip() == heading]
        if not starts:
            raise ValueError(f"no heading {heading!r} in the rendered table")
        start = starts[0] + 1
    else:
        start = 1 if lines and lines[0].startswith("# ") else 0
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end]).strip()


_SPEED = ("From `gpu_bench.md` (`make gpu-bench`): each front-end's training step beside a plain PyTorch loop of the "
          "same model, batch, precision, augmentation and optimiser, and every loss beside a plain InfoNCE, "
          "interleaved on one GPU; ratio = the suite's rate / the plain loop's.")


def _speed_parts(text: str) -> list[tuple[str, str]]:
    """The GPU sections of ``gpu_bench.md`` (heading, body); the CPU's tiny CI size is left out."""
    parts: list[tuple[str, str]] = []
    for block in re.split(r"^#{2,3} ", text, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        if "size `tiny`" not in heading and not heading.startswith("cpu"):
            parts.append((heading.strip(), body.strip()))
    return parts


def markdown_tables(table: dict[tuple[str, str, str], Table], pub: dict[tuple[str, str, str], float]) -> str:
    parts = []
    for (mod, task, label), t in sorted(table.items()):
        by_ds = t.by_ds
        datasets = sorted(by_ds)
        names = _rows(by_ds)
        best = {d: max(by_ds[d].values(), key=lambda c: c.mean) for d in datasets}
        rows = []
        for name in names:
            row = [name]
            for d in datasets:
                c = by_ds[d].get(name)
                s = _fmt(c)
                row.append(f"**{s}**" if c is best[d] and len(by_ds[d]) > 1 else s)
            rows.append(row)
        pub_rows = []
        for loss in sorted({c.loss for d in by_ds.values() for c in d.values()}):
            vals = [next((v for (tp, ds, l), v in pub.items() if task.startswith(tp) and ds.lower() == d.lower()
                          and l == loss), None) for d in datasets]
            if any(v is not None for v in vals):
                pub_rows.append([f"{loss} (published)"] + [f"{v:.2f}" if v is not None else "–" for v in vals])
        part = f"#### {mod} / {task}: {label}\n\n" + markdown_table(["loss"] + datasets, rows + pub_rows)
        if t.settings:
            part += ("\nSettings (the config keys whose values differ between this task's runs of one data set; "
                     "cells never pool settings):\n\n" + "\n".join(f"- s{i} ({n} runs): {desc}"
                                                               for i, (n, desc) in enumerate(t.settings, 1)) + "\n")
        if t.superseded:
            part += (f"\nSuperseded: {t.superseded} older runs of a setting and seed that was run again (newer code, "
                     f"another suite); the newest run is the cell, the older ones stay in the registry.\n")
        if t.hidden:
            part += (f"\nShown: the setting of this task with the most runs ({t.latest}); {t.hidden} runs of other "
                     f"settings are left out.\n")
        if t.versions:
            part += f"\n{versions_text(t.versions)}\n"
        parts.append(part)
    return "\n".join(parts)


def render_tables(reg: Registry) -> dict[str, str]:
    """{file name: Markdown} of every benchmark module's table (:data:`TABLES`), rendered from ``reg``."""
    out = {}
    for name, attr in TABLES:
        mod = importlib.import_module(name)
        out[Path(getattr(mod, attr)).name] = mod.table(reg)
    return out


_HISTORY = ("Every setting of every task of this modality, from every finished run from committed code (the "
            "history): cells are the mean ± std over seeds (n = seeds) of the task's headline metric over runs that "
            "differ only in seed; rows are losses, split by the keys the suites vary (batch size, views, ...) and "
            "by settings (other config differences, listed below each table). Best per column in bold; published "
            "rows are the papers' numbers at full scale.")


def _declared_tables() -> list[tuple[str, str, Callable[[], str]]]:
    """The findings' declarations, each under its heading: every claim's looks, and each metric's minimum effect."""
    from benchmarks.tables.findings import looks_table, min_effects_table

    return [("Each claim's looks", "The seeds (or encoders) a side each claim was read at, declared in "
             "`benchmarks/tables/catalogue.py` before its runs; where seeds were added after a look, the alpha the "
             "spending leaves for the last look (docs/evidence.md).", looks_table),
            ("The minimum effect of each metric", "Declared in `benchmarks/tables/min_effects.py` with its reason; a "
             "gap inside it is no difference for a claim.", min_effects_table)]


def build(reg: Registry, out_dir: Path = RESULTS) -> tuple[Path, Path, str]:
    """Every results file from ``reg``: the benchmark tables, then ``README.md`` and ``report.html``."""
    from benchmarks.report.figures import forest
    from benchmarks.tables.findings import against_paper, family, findings, findings_table, shown

    out_dir.mkdir(parents=True, exist_ok=True)
    tables = render_tables(reg)
    for fname, text in tables.items():
        (out_dir / fname).write_text(text)
    history = collect(reg, all_settings=True)
    pub = published()
    judged = findings(reg)
    found_md = findings_table(judged)
    n_runs = len(reg.runs(status="finished"))
    adjusted = family(judged)
    after = {e.id: shown(j, adjusted[e.id]) for e, j in judged}
    measured = sum(j.verdict not in (Verdict.NOT_MEASURED, Verdict.NOT_JUDGED) for _, j in judged)

    def named(*verdicts: Verdict) -> str:
        return "; ".join(f"{e.claim} ({'our question' if e.paper.startswith('none') else e.paper.split(' (')[0]})"
                         for e, j in judged if after[e.id] in verdicts) or "none"

    def count(*verdicts: Verdict) -> int:
        return sum(v in verdicts for v in after.values())

    fam = sum(p == p for p in adjusted.values())
    cases = [against_paper(e, j).split(" (")[0] for e, j in judged
             if after[e.id] is not Verdict.CONFIRMED and j.verdict not in (Verdict.NOT_MEASURED, Verdict.NOT_JUDGED)]
    lead = (f"Of the {len(judged)} claims declared in `benchmarks/tables/catalogue.py`, {measured} are judged here, "
            f"as one family of {fam} (Holm's correction over two-sided p-values), {count(Verdict.CONFIRMED)} "
            f"hold up at this scale, {count(Verdict.CONTRADICTED)} contradicted and {count(Verdict.EQUIVALENT)} "
            f"equivalent within the minimum effect. **Holds up (confirmed):** {named(Verdict.CONFIRMED)}. "
            f"**Contradicted by our runs:** {named(Verdict.CONTRADICTED)}. **No difference beyond the minimum effect "
            f"(equivalent):** {named(Verdict.EQUIVALENT)}. **Nominal only** (a verdict before Holm's correction, not "
            f"after it): {named(Verdict.NOMINAL_HOLDS, Verdict.NOMINAL_REVERSED, Verdict.NOMINAL_EQUIVALENT)}. Of "
            f"the {len(cases)} claims not confirmed, {cases.count('excluded')} rule out the paper's gap at this scale, "
            + (f"{n} exceed it, " if (n := cases.count('exceeded')) else "") +
            f"{cases.count('below the minimum effect')} have a paper's gap below the minimum effect (no number of "
            f"seeds would confirm it), {cases.count('detectable')} had the seeds to confirm it and "
            f"{cases.count('underpowered')} are underpowered (the seeds it would take are in the table); the rest "
            f"state no gap of the paper's.")
    forest_alt = ("Forest plot: for each claim on its own scale, our gap and its 95 % interval in units of the "
                  "interval's half-width, the minimum effect +-m (grey ticks) and the paper's gap (red diamond) on the "
                  "same scale; green confirmed, red contradicted, blue equivalent, olive nominal (not after Holm)")
    md = [f"# Cross-modality results (generated by `suite bench report` from the registry)", "",
          f"Registry: `{reg.source}`; {n_runs} finished runs. Published numbers are the papers' at full scale (GPU, "
          f"full data); ours are at this repository's CPU profiles, each table says its reduction.", "",
          "## Findings", "", lead, "", found_md, RULE_TEXT, ""]
    page = [f"<h1>contrastive-suite: cross-modality report</h1><p>{n_runs} finished runs in the registry.</p>",
            f"<h2>Findings</h2><p>{_inline(lead)}</p>{md_tables_to_html(found_md)}",
            _figure_html(forest_alt, png(forest(judged))), f"<p>{_inline(RULE_TEXT)}</p>"]
    for title, intro, table in _declared_tables():
        text = table().rstrip("\n")
        md += [f"### {title}", "", intro, "", text, ""]
        page.append(f"<h3>{html.escape(title)}</h3><p>{_inline(intro)}</p>{md_tables_to_html(text)}")
    shown = declared()
    for sec in SECTIONS:
        md += [f"## {sec.title}", ""]
        page.append(f"<h2>{html.escape(sec.title)}</h2>")
        for s in (s for s in shown if s.section == sec.key):
            if s.curves:  # a figure of the suite's step curves, where its runs logged them
                drawn = suite_curves(reg, s.suite, s.curves, sec.modality)
                if drawn is not None:
                    caption, fig = drawn
                    md += [f"### {s.title}", "", f"Figure only (report.html): {caption}.", ""]
                    page += [f"<h3>{html.escape(s.title)}</h3>", _figure_html(caption, png(fig))]
                continue
            fname, _, heading = s.table.partition("#")
            part = excerpt(tables[fname], heading)
            versions = versions_of(suite_runs(reg, s.suite))
            source = f"From `{fname}` (suite `{s.suite}`)." + (f" {versions}" if versions else "")
            md += [f"### {s.title}", "", source, "", part, ""]
            page.append(f"<h3>{html.escape(s.title)}</h3><p>{_inline(source)}</p>{md_tables_to_html(part)}")
        page += [_figure_html(t, b) for t, b in module_figures(reg, sec.figures)]
        mine = {k: t for k, t in history.items() if k[0] == sec.modality}
        if mine:
            hist = markdown_tables(mine, pub)
            md += ["<details><summary>Every setting (history)</summary>", "", _HISTORY, "", hist, "</details>", ""]
            page.append(f"<details><summary>Every setting of this modality (history)</summary><p>{_inline(_HISTORY)}"
                        f"</p>{md_tables_to_html(hist)}</details>")
    across = rank_heatmap(history) + trajectories(reg) + loss_time(reg) + module_figures(reg, ("benchmarks.tables.fidelity",))
    if across:
        md += ["## Across modalities", "", "Figures only (report.html): " + "; ".join(t for t, _ in across) + ".", ""]
        page += ["<h2>Across modalities</h2>"] + [_figure_html(t, b) for t, b in across]
    speed = _speed_parts(tables.get(Path(importlib.import_module("benchmarks.measurements.gpu_bench").OUT).name, ""))
    if speed:  # measured on a GPU: each front-end beside its plain loop, the loss core beside a plain InfoNCE
        md += ["## Speed on a GPU", "", _SPEED, ""]
        page += ["<h2>Speed on a GPU</h2>", f"<p>{_inline(_SPEED)}</p>"]
        for heading, body in speed:
            md += [f"### {heading}", "", body, ""]
            page.append(f"<h3>{_inline(heading)}</h3>{md_tables_to_html(body)}")
    md += ["## Evidence of each claim", ""] + [f"- **{e.id}**: {j.evidence}" for e, j in judged] + [""]
    page.append("<h2>Evidence of each claim</h2><ul>" + "".join(
        f"<li><b>{html.escape(e.id)}</b>: {html.escape(j.evidence)}</li>" for e, j in judged) + "</ul>")
    md_path, html_path = out_dir / "README.md", out_dir / "report.html"
    md_path.write_text("\n".join(md))
    html_path.write_text(_PAGE.format(body="\n".join(page)))
    return md_path, html_path, found_md


_PAGE = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>contrastive-suite report</title>"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>"
         "body{{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 8px}}"
         "figure{{display:inline-block;margin:8px;max-width:100%}}img{{max-width:100%;height:auto}}"
         "table{{border-collapse:collapse;max-width:100%}}td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px;"
         "overflow-wrap:break-word}}details{{margin:8px 0}}summary{{cursor:pointer;font-weight:bold}}"
         "</style></head><body>\n{body}\n</body></html>\n")


def _figure_html(title: str, png_b64: str) -> str:
    alt = html.escape(title)
    return f"<figure><img alt=\"{alt}\" src=\"data:image/png;base64,{png_b64}\"/><figcaption>{alt}</figcaption></figure>\n"


def _inline(text: str) -> str:
    """Escaped text with Markdown's **bold** and `code` as HTML."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def md_tables_to_html(md: str) -> str:
    """HTML of the Markdown the benchmark tables use: tables, headings, list items and paragraphs."""
    out: list[str] = []
    rows: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if rows:
            head, *body = rows
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>" + "".join(
                "<tr>" + "".join(f"<td>{html.escape(c.replace('**', ''))}</td>" for c in r) + "</tr>" for r in body)
                + "</table>")
            rows.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = min(6, len(line) - len(line.lstrip("#")) + 1)
            out.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush()
    return "\n".join(out)


def check(reg: Registry, out_dir: Path = RESULTS) -> list[str]:
    """Rebuild every results file from ``reg`` into a temporary folder and compare each with its namesake in
    ``out_dir`` (the page without its images' pixels, which depend on the fonts installed); returns the names of
    the files that differ (or are missing)."""
    with tempfile.TemporaryDirectory() as tmp, without_pixels():
        build(reg, Path(tmp))
        return differ(Path(tmp), out_dir)


def differ(rebuilt_dir: Path, out_dir: Path = RESULTS) -> list[str]:
    """The names of the files of ``rebuilt_dir`` (a :func:`build`) whose namesake in ``out_dir`` differs or is
    missing (the page compared without its images' pixels); prints a short diff of each."""
    import difflib

    bad = []
    for rebuilt in sorted(rebuilt_dir.glob("*.*")):
        path = out_dir / rebuilt.name
        have, text = (_text(path) if path.exists() else ""), _text(rebuilt)
        if have != text:
            bad.append(rebuilt.name)
            diff = list(difflib.unified_diff(have.splitlines(), text.splitlines(), f"{path} (committed)",
                                             f"{rebuilt.name} (rebuilt)", lineterm="", n=1))
            print("\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else ""))
    return bad


def _text(path: Path) -> str:
    return re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png"', path.read_text())


REPORT_LOCAL = Path("results") / "report"  # a report of any registry but the snapshot (git-ignored)


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="build every file of the results (the benchmark tables, README.md and "
                                      "report.html) from the registry")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY), or a "
                                                    ".jsonl snapshot (suite results export --format jsonl)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help=f"where the files go (default: {RESULTS.parent.name}/{RESULTS.name}/ from the committed "
                        f"snapshot, {REPORT_LOCAL}/ from any other registry; the committed folder is never written from "
                        f"another registry)")
    p.add_argument("--check", action="store_true",
                   help=f"rebuild every results file from the registry (default: the committed snapshot "
                        f"{SNAPSHOT.name}) and exit 1 if any differs from the one in --out-dir (the page: its text), "
                        f"or if a GPU figure in README.md or docs/ matches no registry row "
                        f"(benchmarks.report.gpu_figures); writes nothing")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    import os

    if args.check:
        from benchmarks.report.gpu_figures import unbacked

        reg = open_registry(args.registry or os.path.relpath(SNAPSHOT))
        bad = check(reg, args.out_dir or RESULTS)
        print("every table rebuilds from the registry as committed" if not bad else
              f"{len(bad)} file(s) differ from a rebuild: {', '.join(bad)}")
        figures = unbacked(reg)  # the README's and docs/'s GPU figures (issue 68)
        print("\n".join(map(str, figures)) + f"\n{len(figures)} GPU figure(s) in the docs match no registry row"
              if figures else "every GPU figure in the README and docs/ is a registry row")
        return 1 if bad or figures else 0
    reg = open_registry(args.registry)
    out_dir = results_target(args.out_dir, RESULTS, reg, local=REPORT_LOCAL)  # refused before anything is built (issue 80)
    md, page, summary = build(reg, out_dir)
    print(summary)
    source = reg.source if str(reg.source).endswith(".jsonl") else reg.shown  # a snapshot: its file, not its copy
    print(f"wrote {md}\nwrote {page}  (open it in a browser; built from {source})")
    if not is_snapshot(reg) and args.out_dir is None:
        print(f"(the committed {RESULTS.parent.name}/{RESULTS.name}/ is built from its snapshot only: "
              f"suite bench report --registry {os.path.relpath(SNAPSHOT)})")
    return 0
