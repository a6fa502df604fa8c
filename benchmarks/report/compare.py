"""The page of ``suite bench compare`` (:mod:`benchmarks.runner.compare`): per task a user's loss beside each baseline
and the published rows, read back from the registry, the claims rule's verdict on "the loss beats the baseline"
(``contradicted``: the baseline beats it), and the timings; as Markdown and as a self-contained HTML page."""
from __future__ import annotations

import base64
import html
import io
import re
import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.runner.compare_task import D, Task, slug
from benchmarks.runner.suitefile import Job
from benchmarks.tables import identity
from benchmarks.stats import holm
from benchmarks.tables.claims import RULE_TEXT, Claim, Result, Seeded, Verdict, final, mean_std
from suite.registry import Registry, markdown_table


# ----------------------------------------------------------------------------- reading back

def headline(reg: Registry, run: dict[str, Any], known: dict[str, tuple[str, Any] | None]) -> tuple[str, Any] | None:
    """The run's headline (metric, split): its own, else the one the newest finished run of its registry task records
    (runs from before a task recorded its headline have none; ``known`` caches it per task)."""
    if run.get("primary_metric"):
        return run["primary_metric"], run.get("primary_split")
    if run["task"] not in known:
        known[run["task"]] = next(((r["primary_metric"], r.get("primary_split"))
                                   for r in reversed(reg.runs(status="finished", task=run["task"]))
                                   if r.get("primary_metric")), None)
    return known[run["task"]]


def job_result(reg: Registry, job: Job, known: dict[str, tuple[str, Any] | None] | None = None
               ) -> tuple[float, str, dict[str, Any]] | None:
    """This job's result, the one definition the page shares with the runner's done-set: the headline (in percent)
    of the newest finished run recorded under the job's hash (the runs the runner counts the job done by, imported
    ones included), the metric's name and the run; None when no finished run has a headline value."""
    known = {} if known is None else known
    for r in reversed(reg.runs(status="finished", config_hash=job.hash)):
        head = headline(reg, r, known)
        if head is None:
            continue
        ms = [m for m in reg.metrics(r["id"], head[0]) if m["split"] == head[1]]
        if ms:
            return 100.0 * ms[-1]["value"], f"{head[0]} ({head[1]})", r
    return None


def arm_values(reg: Registry, jobs: list[Job]) -> tuple[Seeded, str, int]:
    """Per seed, :func:`job_result` of each job (in percent, named by its run's identity: the arms pair by seed where
    their runs share it), the metric's name, and how many jobs the runner counts done whose runs have no headline
    value (shown, never hidden as "not run")."""
    vals, metric, known, blank = Seeded(), "", {}, 0  # type: ignore[var-annotated]
    for j in jobs:
        got = job_result(reg, j, known)
        if got is not None:
            vals = vals.plus(identity(got[2]), got[0])
            metric = got[1]
        elif reg.job_status(j.hash) == "finished":
            blank += 1
    return vals, metric, blank


def published(task: Task) -> list[tuple[str, str]]:
    """The papers' numbers that this task's metric can stand beside: (label, value)."""
    args = dict(task.args)
    if (task.frontend, task.command) == ("graph", "tu"):
        from benchmarks.tables.graph_tu import PUBLISHED

        pub = PUBLISHED.get(str(args.get("dataset", "")))
        if pub:
            (g, gs), (m, ms) = pub
            return [("GraphCL (You et al. 2020)", f"{g:.2f} ± {gs:.2f}"), ("MACL (Huang et al. 2023, T4)", f"{m:.2f} ± {ms:.2f}")]
    if (task.frontend, task.command) == ("graph", "finetune-mol"):
        from benchmarks.tables.graph_molnet import PUBLISHED as MOL

        ds = str(args.get("dataset", ""))
        return [(f"{k} (Hu et al. 2020; MACL T5)", f"{v[ds]:.1f}") for k, v in MOL.items() if ds in v]
    if (task.frontend, task.command) == ("text", "train") and args.get("final-eval") == "sts":
        from benchmarks.tables.text_sts import PUBLISHED as STS

        return [(label, f"{vals[-1]:.2f} (STS avg)") for label, vals in STS]
    return []


@dataclass
class Row:
    label: str
    values: list[float]
    blank: int = 0  # jobs counted done without a headline value


def display_name(loss: str, origin: dict[str, Any] | None) -> str:
    """A user's loss in a file or module (``path/my_loss.py:PairCos``, ``pkg.mod:PairCos``) by its class name; an
    installed package's loss and a loss of the core by the name it was asked for. The file or package and the
    source's sha stand once, in the page's header."""
    return loss.rsplit(":", 1)[-1] if origin and ":" in loss else loss


def indistinguishable(rows: list[Row], loss: str) -> str | None:
    """Why the task's profile cannot separate losses: its baselines' means lie within the minimum effect of each
    other (at least two baselines with seeds); None when they can."""
    from benchmarks.tables.claims import MIN_EFFECT

    base = [(r.label, statistics.fmean(r.values)) for r in rows if r.label != loss and r.values]
    if len(base) < 2:
        return None
    lo, hi = min(base, key=lambda b: b[1]), max(base, key=lambda b: b[1])
    if hi[1] - lo[1] >= MIN_EFFECT:
        return None
    return (f"its baselines lie within {hi[1] - lo[1]:.2f} points of each other ({', '.join(l for l, _ in base)}: "
            f"{lo[1]:.2f} to {hi[1]:.2f}), below the minimum effect of {MIN_EFFECT} points")

CANNOT_SEPARATE = "cannot separate losses at this profile"


def judge_task(reg: Registry, task: Task, loss: str, name: str = "", suite: str = ""
               ) -> tuple[str, list[Row], list[list[Any]]]:
    """The task's metric, its rows (arms) and its verdicts: [claim, verdict, evidence, Result or None]; ``name``: how
    the page names the loss. A task whose profile cannot separate the baselines gives one row saying so instead."""
    name = name or loss
    rows = []
    metric = ""
    for label, jobs in task.arms.items():
        vals, m, blank = arm_values(reg, jobs)
        metric = metric or m
        rows.append(Row(label, vals, blank))
    verdicts: list[list[Any]] = []
    mine = next((r for r in rows if r.label == loss), None)
    why = indistinguishable(rows, loss) if task.judged else None
    if why is not None:
        better = "" if suite == "cpu" else "; the `cpu` profile (`--suite cpu`) trains long enough to separate them"
        return metric, rows, [[f"{name} against the baselines", CANNOT_SEPARATE, why + better, None]]
    if mine is not None and task.judged:
        for r in rows:
            if r.label == loss:
                continue
            if not mine.values or not r.values:
                missing = " and ".join(name if x is mine else x.label for x in (mine, r) if not x.values)
                verdicts.append([f"{name} beats {r.label}", str(Verdict.NOT_MEASURED), f"no finished run of {missing}",
                                 None])
                continue
            res = Claim(f"{task.frontend}/{task.command}", loss, r.label, metric).judge(mine.values, r.values)
            verdicts.append([f"{name} beats {r.label}", str(res.verdict), res.evidence(), res])
    return metric, rows, verdicts


def family_p(res: Result | None) -> float:
    """A comparison's two-sided p-value in the page's family (:meth:`Result.p`); NaN when not judged."""
    if res is None or res.verdict in (Verdict.NOT_MEASURED, Verdict.INCONCLUSIVE):
        return float("nan")
    return res.p()


def after_holm(verdict: str, res: Result | None, q: float) -> str:
    """A comparison's verdict after the page's family correction (:func:`benchmarks.tables.claims.final`)."""
    return verdict if res is None else str(final(res.verdict, q))


def with_holm(verdicts: list[list[Any]], adjusted: list[float]) -> list[list[str]]:
    """The verdict rows as shown: the verdict after Holm's correction over the page's family (a verdict that does not
    survive is nominal), and every judged one gives its Holm-adjusted p-value."""
    return [[claim, after_holm(verdict, res, q), evidence + ("" if q != q else f", Holm's p = {q:.3g}")]
            for (claim, verdict, evidence, res), q in zip(verdicts, adjusted)]


MODALITY = {"graph": "graphs", "vision": "images", "text": "sentences"}


def short(task: Task, modality: bool = True) -> str:
    """A task in a few words: its modality and data set (``graphs MUTAG``), or its command where it names none; the
    whole argument list stays in the task's own section."""
    ds = ", ".join(str(v) for k, v in task.args if k == "dataset") or task.command
    return f"{MODALITY.get(task.frontend, task.frontend)} {ds}" if modality else ds


def findings_lines(judged: list[tuple[Task, str, list[Row], list[list[Any]], list[float]]], name: str,
                   timings: dict[tuple[str, int], tuple[float, int]] | None, loss: str) -> list[str]:
    """The findings block: per modality one line of verdicts (the gap with its 95 % interval, its two-sided p-value
    named by its hypothesis, the verdict after Holm's correction), then the cost against InfoNCE at the largest 2N
    measured."""
    by: dict[str, list[str]] = {}
    for task, _, _, verdicts, adjusted in judged:
        parts = []
        for (claim, verdict, evidence, res), q in zip(verdicts, adjusted):
            if res is None:
                parts.append(f"{claim}: **{verdict}** ({evidence})" if verdict == CANNOT_SEPARATE else
                             f"{claim}: {verdict}")
                continue
            parts.append(f"vs {claim.rsplit(' beats ', 1)[-1]}: {res.gap:+.2f} [{res.ci[0]:+.2f}, {res.ci[1]:+.2f}] "
                         f"{res.p_text()} **{after_holm(verdict, res, q)}**")
        if verdicts and all(v[1] == str(Verdict.NOT_MEASURED) for v in verdicts):
            parts = ["not run yet"]
        if parts:
            by.setdefault(MODALITY.get(task.frontend, task.frontend), []).append(f"{short(task, False)}: "
                                                                                   + "; ".join(parts))
    lines = [f"**{mod}**: " + " | ".join(items) for mod, items in by.items()]
    if timings:
        n = max(two_n for _, two_n in timings)
        if (loss, n) in timings and ("infonce", n) in timings:
            ratio = timings[(loss, n)][0] / timings[("infonce", n)][0]
            lines.append(f"**cost**: {ratio:.1f}x InfoNCE's forward + backward time at 2N = {n:,} (one thread; "
                         f"{name} has its dense path only)")
    return lines


def timing_table(timings: dict[tuple[str, int], tuple[float, int]], loss: str, name: str = "") -> str:
    name = name or loss
    rows = []
    for two_n in sorted({n for _, n in timings}):
        t, m = timings[(loss, two_n)]
        t0, m0 = timings[("infonce", two_n)]
        rows.append([two_n, f"{1e3 * t:.2f}", f"{1e3 * t0:.2f}", f"{t / t0:.2f}", f"{m / 2**20:.1f}", f"{m0 / 2**20:.1f}"])
    return markdown_table(["2N", f"{name} ms", "infonce ms", "time ratio", f"{name} peak MiB", "infonce peak MiB"], rows)


# ----------------------------------------------------------------------------- the page

def _figure(task: Task, rows: list[Row], pub: list[tuple[str, str]], loss: str, metric: str, name: str = ""
            ) -> str | None:
    """The task's figure as a base64 PNG (:func:`figure`)."""
    import matplotlib.pyplot as plt

    fig = figure(task, rows, pub, loss, metric, name)
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figure(task: Task, rows: list[Row], pub: list[tuple[str, str]], loss: str, metric: str, name: str = "") -> Any:
    """Per-seed values (dots) and mean ± std (bars) of each loss of a task, published values dashed; the x labels
    slanted and the figure widened for long names, so that they never overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.values][:8]
    if not shown:
        return None
    labels = [(name or slug(r.label)) if r.label == loss else r.label for r in shown]
    fig, ax = plt.subplots(figsize=(1.6 + max(0.9, 0.075 * max(len(x) for x in labels)) * len(shown), 3.2))
    for i, r in enumerate(shown):
        mean = statistics.fmean(r.values)
        sd = statistics.stdev(r.values) if len(r.values) > 1 else 0.0
        ax.bar(i, mean, yerr=sd, color="tab:orange" if r.label == loss else "tab:blue", alpha=0.7, capsize=3)
        ax.plot([i] * len(r.values), r.values, "k.", ms=4)
    for label, value in pub:
        try:
            y = float(value.split()[0])
        except ValueError:
            continue
        ax.axhline(y, ls="--", lw=1, color="red")
    lo = min(min(r.values) for r in shown)
    hi = max(max(r.values) for r in shown)
    ax.set_ylim(lo - max(2.0, 0.3 * (hi - lo)), hi + max(2.0, 0.3 * (hi - lo)))
    ax.set_xticks(range(len(shown)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric, fontsize=8)
    fig.tight_layout()
    return fig


def _paragraph(text: str) -> str:
    """A Markdown line as an HTML paragraph: **bold** and `code` kept, everything else escaped."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return "<p>" + re.sub(r"`(.+?)`", r"<code>\1</code>", out) + "</p>"


def page(reg: Registry, suite: str, tasks: list[Task], loss: str, origin: dict[str, Any] | None,
         hparams: dict[str, Any], timings: dict[tuple[str, int], tuple[float, int]] | None,
         notes: list[str]) -> tuple[str, str]:
    """The comparison as Markdown and as a self-contained HTML page (figures inline)."""
    from benchmarks.report import md_tables_to_html

    name = display_name(loss, origin)
    where = ""
    if origin:
        where = (f" from the package `{origin.get('package')} {origin.get('version')}`" if origin.get("package")
                 else f" from `{origin.get('import') or loss}`")
        where += f", source sha256 {origin['sha256'][:12]}" if origin.get("sha256") else ""
    head = [f"# {name} beside the suite's losses (generated by `suite bench compare`)", "",
            f"Loss `{name}`{where}, hyper-parameters {hparams or 'its defaults'}. Suite `{suite}` (its reduced CPU "
            f"profile: small encoders, short training, so published numbers at full scale stand beside ours as "
            f"context, not as targets). Cells: mean ± std over seeds (n) of each task's headline metric, in percent. "
            f"{RULE_TEXT}", ""]
    html_parts = [f"<h1>{html.escape(name)} beside the suite's losses</h1>", _paragraph(head[2])]
    md = list(head)
    summary = []
    judged = [(task, *judge_task(reg, task, loss, name, suite)) for task in tasks]
    # one family: the user's loss against every baseline on every task (Holm-Bonferroni)
    adjusted = iter(holm([family_p(v[3]) for *_, verdicts in judged for v in verdicts]))
    judged = [(task, metric, rows, verdicts, [next(adjusted) for _ in verdicts])
              for task, metric, rows, verdicts in judged]
    found = findings_lines(judged, name, timings, loss)
    judged = [(task, metric, rows, with_holm(verdicts, adj)) for task, metric, rows, verdicts, adj in judged]
    for task, metric, rows, verdicts in judged:
        pub = published(task)
        table = markdown_table(["loss", "seeds", metric or "headline"],
                               [[name if r.label == loss else r.label, len(r.values),
                                 mean_std(r.values, show_n=False, empty="not run") if not r.blank or r.values else
                                 f"counted done, no headline value in {r.blank} run(s)"] for r in rows]
                               + [[f"{label} (published)", "-", v] for label, v in pub])
        md += [f"## {task.title}", "", table, ""]
        part = [f"<h2>{html.escape(task.title)}</h2>", md_tables_to_html(table)]
        if not task.judged:
            md += ["A pretraining: its own headline (the training loss) says nothing across losses; the fine-tuning "
                   "tasks from its encoders are judged.", ""]
        if verdicts:
            vt = markdown_table(["claim", "verdict", "evidence"], verdicts)
            md += [vt, ""]
            part.append(md_tables_to_html(vt))
            summary += [[short(task), *v[:2]] for v in verdicts]
        fig = _figure(task, rows, pub, loss, metric, name)
        if fig:
            alt = f"{task.title}: per-seed values (dots), mean ± std (bars) of each loss; published values dashed red"
            part.append(f"<figure><img style=\"max-width:100%\" alt=\"{html.escape(alt)}\" "
                        f"src=\"data:image/png;base64,{fig}\"/><figcaption>{html.escape(alt)}</figcaption></figure>")
        html_parts += part
    if timings:
        tt = timing_table(timings, loss, name)
        note = (f"Forward + backward on random (2N = 2 x N, d = {D}) embeddings, median of interleaved rounds, one "
                f"thread; peak = live tensor memory (suite.memory). A user's loss has only its own dense path; infonce "
                f"is shown dense too (it tiles above 2^24 similarity entries, `chunk_size=\"auto\"`).")
        md += ["## Cost", "", note, "", tt, ""]
        html_parts += ["<h2>Cost</h2>", f"<p>{html.escape(note)}</p>", md_tables_to_html(tt)]
    if notes:
        md += ["## Left out", "", *[f"- {n}" for n in notes], ""]
        html_parts += ["<h2>Left out</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"]
    top = []
    if found:
        top += ["## Findings", "", *[f"- {line}" for line in found], ""]
        html_parts[1:1] = ["<h2>Findings</h2><ul>" + "".join(f"<li>{_paragraph(line)[3:-4]}</li>" for line in found)
                           + "</ul>"]
    if summary:
        st = markdown_table(["task", "claim", "verdict"], summary)
        fam = (f"One family of {len(summary)} comparisons (this loss against every baseline on every task), "
               f"Holm-Bonferroni adjusted over their two-sided p-values: a verdict that does not survive the "
               f"correction "
               f"is nominal.")
        top += ["## Verdicts", "", fam, "", st, ""]
        html_parts[2:2] = ["<h2>Verdicts</h2>", _paragraph(fam), md_tables_to_html(st)]
    md[2:2] = top  # the findings first, under the title; the loss's details and the rule below them
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(name)}: suite bench compare</title><style>body{{font-family:sans-serif;max-width:1100px;"
           "margin:auto;padding:0 8px}table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;"
           "padding:2px 6px;font-size:13px}figure{margin:8px 0}</style></head><body>"
           + "\n".join(html_parts) + "</body></html>\n")
    return "\n".join(md) + "\n", doc
