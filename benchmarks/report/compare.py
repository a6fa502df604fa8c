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

from benchmarks.runner.compare import D, Task, slug
from benchmarks.runner.suitefile import Job
from benchmarks.tables.claims import ALPHA, RULE_TEXT, Claim, Result, Verdict, holm, mean_std
from suite.registry import Registry, markdown_table


# ----------------------------------------------------------------------------- reading back

def _final(reg: Registry, run: dict[str, Any]) -> float | None:
    metric, split = run.get("primary_metric"), run.get("primary_split")
    if not metric:
        return None
    ms = [m for m in reg.metrics(run["id"], metric) if m["split"] == split]
    return ms[-1]["value"] if ms else None


def arm_values(reg: Registry, jobs: list[Job]) -> tuple[list[float], str]:
    """Per seed, the headline of the job's newest finished run that has one (in percent), and the metric's name."""
    vals, metric = [], ""
    for j in jobs:
        runs = [r for r in reg.runs(status="finished", config_hash=j.hash) if r.get("primary_metric")]
        for r in reversed(runs):
            v = _final(reg, r)
            if v is not None:
                vals.append(100.0 * v)
                metric = f"{r['primary_metric']} ({r['primary_split']})"
                break
    return vals, metric


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


def judge_task(reg: Registry, task: Task, loss: str) -> tuple[str, list[Row], list[list[Any]]]:
    """The task's metric, its rows (arms) and its verdicts: [claim, verdict, evidence, Result or None]."""
    rows = []
    metric = ""
    for label, jobs in task.arms.items():
        vals, m = arm_values(reg, jobs)
        metric = metric or m
        rows.append(Row(label, vals))
    verdicts = []
    mine = next((r for r in rows if r.label == loss), None)
    if mine is not None and task.judged:
        for r in rows:
            if r.label == loss:
                continue
            if not mine.values or not r.values:
                missing = " and ".join(x.label for x in (mine, r) if not x.values)
                verdicts.append([f"{loss} beats {r.label}", str(Verdict.NOT_MEASURED), f"no finished run of {missing}",
                                 None])
                continue
            res = Claim(f"{task.frontend}/{task.command}", loss, r.label, metric).judge(mine.values, r.values)
            verdicts.append([f"{loss} beats {r.label}", str(res.verdict), res.evidence(), res])
    return metric, rows, verdicts


def family_p(res: Result | None) -> float:
    """A comparison's p-value in its verdict's direction (confirmed: p; contradicted: the reverse; else the smaller)."""
    if res is None or res.verdict in (Verdict.NOT_MEASURED, Verdict.INCONCLUSIVE):
        return float("nan")
    if res.verdict is Verdict.CONFIRMED:
        return res.p
    if res.verdict is Verdict.CONTRADICTED:
        return res.p_reverse
    return min(res.p, res.p_reverse)


def with_holm(verdicts: list[list[Any]], adjusted: list[float]) -> list[list[str]]:
    """The verdict rows as shown: a confirmed or contradicted comparison that does not survive Holm's correction over
    the page's family says so, and every judged one gives its Holm-adjusted p-value."""
    out = []
    for (claim, verdict, evidence, res), q in zip(verdicts, adjusted):
        shown = verdict + (", not after Holm" if res is not None and res.verdict in (Verdict.CONFIRMED,
                                                                                     Verdict.CONTRADICTED)
                           and not q < ALPHA else "")
        out.append([claim, shown, evidence + ("" if q != q else f", Holm's p = {q:.3g}")])
    return out


def timing_table(timings: dict[tuple[str, int], tuple[float, int]], loss: str) -> str:
    rows = []
    for two_n in sorted({n for _, n in timings}):
        t, m = timings[(loss, two_n)]
        t0, m0 = timings[("infonce", two_n)]
        rows.append([two_n, f"{1e3 * t:.2f}", f"{1e3 * t0:.2f}", f"{t / t0:.2f}", f"{m / 2**20:.1f}", f"{m0 / 2**20:.1f}"])
    return markdown_table(["2N", f"{loss} ms", "infonce ms", "time ratio", f"{loss} peak MiB", "infonce peak MiB"], rows)


# ----------------------------------------------------------------------------- the page

def _figure(task: Task, rows: list[Row], pub: list[tuple[str, str]], loss: str, metric: str) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.values][:8]
    if not shown:
        return None
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(shown), 3.0))
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
    ax.set_xticks(range(len(shown)), [slug(r.label) if r.label == loss else r.label for r in shown], rotation=20,
                  fontsize=8)
    ax.set_ylabel(metric, fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


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

    who = f"`{loss}`" + (f" ({origin.get('package')} {origin.get('version')})" if origin and origin.get("package") else "")
    head = [f"# {loss} beside the suite's losses (generated by `suite bench compare`)", "",
            f"Loss {who}, hyper-parameters {hparams or 'its defaults'}"
            + (f", source sha256 {origin['sha256'][:12]}" if origin else "") + f". Suite `{suite}` (its reduced CPU "
            f"profile: small encoders, short training, so published numbers at full scale stand beside ours as "
            f"context, not as targets). Cells: mean ± std over seeds (n) of each task's headline metric, in percent. "
            f"{RULE_TEXT}", ""]
    html_parts = [f"<h1>{html.escape(loss)} beside the suite's losses</h1>", _paragraph(head[2])]
    md = list(head)
    summary = []
    judged = [(task, *judge_task(reg, task, loss)) for task in tasks]
    # one family: the user's loss against every baseline on every task (Holm-Bonferroni)
    adjusted = iter(holm([family_p(v[3]) for *_, verdicts in judged for v in verdicts]))
    judged = [(task, metric, rows, with_holm(verdicts, [next(adjusted) for _ in verdicts]))
              for task, metric, rows, verdicts in judged]
    for task, metric, rows, verdicts in judged:
        pub = published(task)
        table = markdown_table(["loss", "seeds", metric or "headline"],
                               [[r.label, len(r.values), mean_std(r.values, show_n=False, empty="not run")] for r in rows]
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
            summary += [[task.title, *v[:2]] for v in verdicts]
        fig = _figure(task, rows, pub, loss, metric)
        if fig:
            alt = f"{task.title}: per-seed values (dots), mean ± std (bars) of each loss; published values dashed red"
            part.append(f"<figure><img style=\"max-width:100%\" alt=\"{html.escape(alt)}\" "
                        f"src=\"data:image/png;base64,{fig}\"/><figcaption>{html.escape(alt)}</figcaption></figure>")
        html_parts += part
    if timings:
        tt = timing_table(timings, loss)
        note = (f"Forward + backward on random (2N = 2 x N, d = {D}) embeddings, median of interleaved rounds, one "
                f"thread; peak = live tensor memory (suite.memory). A user's loss has only its own dense path; infonce "
                f"is shown dense too (it tiles above 2^24 similarity entries, `chunk_size=\"auto\"`).")
        md += ["## Cost", "", note, "", tt, ""]
        html_parts += ["<h2>Cost</h2>", f"<p>{html.escape(note)}</p>", md_tables_to_html(tt)]
    if notes:
        md += ["## Left out", "", *[f"- {n}" for n in notes], ""]
        html_parts += ["<h2>Left out</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"]
    if summary:
        st = markdown_table(["task", "claim", "verdict"], summary)
        fam = (f"One family of {len(summary)} comparisons (this loss against every baseline on every task), "
               f"Holm-Bonferroni adjusted: a confirmed or contradicted verdict that does not survive the correction says "
               f"so.")
        md[len(head):len(head)] = ["## Verdicts", "", fam, "", st, ""]
        html_parts[2:2] = ["<h2>Verdicts</h2>", _paragraph(fam), md_tables_to_html(st)]
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(loss)}: suite bench compare</title><style>body{{font-family:sans-serif;max-width:1100px;"
           "margin:auto;padding:0 8px}table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;"
           "padding:2px 6px;font-size:13px}figure{margin:8px 0}</style></head><body>"
           + "\n".join(html_parts) + "</body></html>\n")
    return "\n".join(md) + "\n", doc
