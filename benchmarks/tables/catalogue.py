"""Every claim the benchmarks judge, declared once: which paper and table, the claim as the paper makes it, the rows
compared, how data sets combine and why, the paper's own gap, the protocol, and the one function that judges it.

Every document (the per-task tables, ``results/README.md``, ``report.html``) shows a claim through :func:`line` or
:func:`findings`, which call that one judgement; a test checks that no results file states a claim with another
verdict. How sets combine follows the paper: where it reports an average, the average is judged; where it claims
wins "on k of N" sets, each set is judged and the verdicts combined (:func:`benchmarks.tables.claims.combine`). A verdict
carries its gap with the 90 % interval that matches its one-sided test and the smallest gap the seeds could have
detected; the claims are judged as one family (:func:`family`: Holm's adjusted p-values), and a "not confirmed" says
whether our interval excludes the paper's gap, our seeds could have detected it, or the comparison is underpowered
(:func:`against_paper`)."""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

from benchmarks.tables.claims import ALPHA, Result, Verdict, holm, seeds_needed


@dataclass(frozen=True)
class Judged:
    """One claim's verdict and its evidence; ``summary`` is the gap the findings table shows (in the claim's
    direction, points), with its interval and detectable gap; None when nothing was measured. A claim combined from
    several data sets or margins gives its ``parts`` and how many must hold (``need`` of ``total``): its p-value in
    the family is the intersection-union one (:meth:`p_value`)."""
    verdict: Verdict
    summary: Result | None
    evidence: str
    parts: tuple[Result, ...] = ()
    need: int | None = None
    total: int | None = None

    def p_value(self) -> float:
        """The claim's one p-value for the family correction, in its verdict's direction (confirmed: "holds";
        contradicted: the reverse; otherwise the smaller of the two). A claim that needs ``k`` of ``total`` parts
        holds when some k parts all hold: the k-th smallest p-value (intersection-union over those k) times the
        C(total, k) ways to choose them (Bonferroni: the choice was made after seeing the data), capped at 1; with
        k = total that is the largest p-value. It is contradicted when some ``total - k + 1`` parts are reversed, by
        the same rule on the reverse p-values. Parts not measured count as p = 1. NaN when nothing was judged."""
        if self.verdict in (Verdict.NOT_MEASURED, Verdict.NOT_JUDGED, Verdict.INCONCLUSIVE):
            return float("nan")
        if self.parts:
            total = max(self.total or 0, len(self.parts))
            k = self.need or total

            def kth(ps: list[float], j: int) -> float:
                ps = sorted(p if p == p else 1.0 for p in ps) + [1.0] * (total - len(ps))
                return min(1.0, math.comb(total, j) * ps[j - 1])

            holds, reverse = kth([r.p for r in self.parts], k), kth([r.p_reverse for r in self.parts], total - k + 1)
        elif self.summary is not None:
            holds, reverse = self.summary.p, self.summary.p_reverse
        else:
            return float("nan")
        if self.verdict is Verdict.CONFIRMED:
            return holds
        if self.verdict is Verdict.CONTRADICTED:
            return reverse
        return min(holds, reverse)


@dataclass(frozen=True)
class Entry:
    id: str
    paper: str  # the paper and its table or figure
    claim: str  # the claim as the paper makes it
    rows: str  # what we compare
    combine: str  # how data sets / margins combine, and why
    paper_gap: float | None  # the paper's own gap for the same comparison (points), None if it gives none
    paper_gap_note: str  # where the paper's gap comes from
    protocol: str  # "paper protocol" or the reduction, in a few words
    judge: str  # "module:function" or "module:function:arg,arg": function(registry, *args) -> Judged
    modality: str = ""

    def judged(self, registry: Any) -> Judged:
        mod, fn, *args = self.judge.split(":", 2)
        func: Callable[..., Judged] = getattr(importlib.import_module(mod), fn)
        return func(registry, *(args[0].split(",") if args else ()))


_MOL_CPU = "reduced: 20k-molecule, 5-epoch pretraining; 10 fine-tuning epochs capped at 600 steps"
_MOL_FULL = "fine-tuning at the paper's protocol (100 epochs); pretraining reduced (20k molecules x 5 epochs)"
_XCLR = "reduced: CIFAR-10 500 images per class, ConvNet width 16, 6 epochs (ImageNet, ResNet-50, 100 epochs published)"
_IMG = "reduced: CIFAR-10 500 images per class, ConvNet width 16, 6 epochs (ResNet-18 / AlexNet, 200+ epochs published)"

ENTRIES: tuple[Entry, ...] = (
    Entry("tu-macl", "MACL (Huang et al. 2023), Table 4", "MACL improves GraphCL on unsupervised TU graph "
          "classification", "macl vs graphcl, GraphCL's TU protocol, six data sets",
          "per set, confirmed on at least 4 of 6 (the paper reports each set; MACL is above GraphCL on all six)",
          0.73, "mean over the six sets of MACL minus GraphCL (Table 4)", "paper protocol (seeded folds, last epoch)",
          "benchmarks.tables.graph_tu:judge_claim", "graphs"),
    Entry("mol-graphcl-full", "GraphCL (You et al. 2020), Table 5", "GraphCL pretraining beats no pretraining on "
          "MoleculeNet transfer", "graphcl-pretrained vs randomly initialised GIN, BBBP, SIDER, ClinTox, BACE",
          "the average over the sets (the paper's Avg column)", 7.6, "mean over the four sets (Table 5)", _MOL_FULL,
          "benchmarks.tables.graph_molnet:judge:molnet-full,graphcl", "graphs"),
    Entry("mol-macl-full", "MACL (Huang et al. 2023), Table 5", "MACL pretraining beats no pretraining on "
          "MoleculeNet transfer", "macl-pretrained vs randomly initialised GIN, BBBP, SIDER, ClinTox, BACE",
          "the average over the sets (the paper's Avg column)", 3.17, "mean over BBBP and SIDER, the two of these "
          "sets MACL reports", _MOL_FULL, "benchmarks.tables.graph_molnet:judge:molnet-full,macl", "graphs"),
    Entry("mol-cacr-full", "none (this suite's question; CACR's paper has no molecules)", "CACR pretraining beats no "
          "pretraining on MoleculeNet transfer", "cacr-pretrained vs randomly initialised GIN, BBBP, SIDER, ClinTox, "
          "BACE", "the average over the sets, as for GraphCL and MACL", None, "-", _MOL_FULL,
          "benchmarks.tables.graph_molnet:judge:molnet-full,cacr", "graphs"),
    Entry("mol-graphcl-cpu", "GraphCL (You et al. 2020), Table 5", "GraphCL pretraining beats no pretraining on "
          "MoleculeNet transfer (reduced fine-tuning)", "graphcl-pretrained vs randomly initialised GIN, eight sets",
          "the average over the sets (the paper's Avg column)", 3.81, "mean over the eight sets (Table 5)", _MOL_CPU,
          "benchmarks.tables.graph_molnet:judge:molnet,graphcl", "graphs"),
    Entry("mol-macl-cpu", "MACL (Huang et al. 2023), Table 5", "MACL pretraining beats no pretraining on MoleculeNet "
          "transfer (reduced fine-tuning)", "macl-pretrained vs randomly initialised GIN, eight sets",
          "the average over the sets (the paper's Avg column)", 1.57, "mean over the four sets MACL reports",
          _MOL_CPU, "benchmarks.tables.graph_molnet:judge:molnet,macl", "graphs"),
    Entry("mol-cacr-cpu", "none (this suite's question)", "CACR pretraining beats no pretraining on MoleculeNet "
          "transfer (reduced fine-tuning)", "cacr-pretrained vs randomly initialised GIN, eight sets",
          "the average over the sets", None, "-", _MOL_CPU, "benchmarks.tables.graph_molnet:judge:molnet,cacr", "graphs"),
    Entry("img-macl", "MACL (Huang et al. 2023), Table 9", "MACL beats NT-Xent, most at small batch",
          "macl vs infonce (SimCLR) at batch 64 and 256, linear probe",
          "two margins, both must hold: the gain at the small batch, and that gain minus the gain at the large one",
          4.80, "the gain at batch 64 (82.31 -> 87.11; 2.62 at 256)", _IMG, "benchmarks.tables.vision_cifar:judge:img-macl",
          "images"),
    Entry("img-cacr-cmc", "CACR (Zheng et al. 2021), Table 2", "CACR (K = 4) beats CMC (K = 4)",
          "cacr vs cmc, 5 views, batch 64, linear probe", "one comparison (balanced CIFAR-10)", 1.00,
          "86.54 vs 85.54, balanced CIFAR-10", _IMG, "benchmarks.tables.vision_cifar:judge:img-cacr-cmc", "images"),
    Entry("img-cacr-cmc-tuned", "CACR (Zheng et al. 2021), Table 2", "CACR (K = 4) beats CMC (K = 4) with CMC's "
          "temperature chosen on a validation split", "cacr (paper estimator, t- = 0.9) vs cmc at its validation-chosen "
          "temperature, 5 views, batch 64, linear probe", "one comparison (the paper tuned every baseline's temperature)",
          1.00, "86.54 vs 85.54, balanced CIFAR-10", _IMG, "benchmarks.tables.fidelity:judge:img-cacr-cmc-tuned", "images"),
    Entry("img-cacr-k1", "CACR (Zheng et al. 2021), Table 2", "CACR (K = 1) beats SimCLR",
          "cacr (paper estimator, t- = 2, 2 views) vs infonce, batch 256, linear probe", "one comparison", 0.26,
          "83.73 vs 83.47, balanced CIFAR-10", _IMG, "benchmarks.tables.fidelity:judge:img-cacr-k1", "images"),
    Entry("img-iou", "t-SimCLR (Böhm et al. 2023), Figure 2a", "Weighting positive pairs by their crops' IoU helps "
          "SimCLR", "infonce with IoU weights (tau' = 1) vs infonce, batch 256, kNN", "one comparison, at the paper's "
          "tau' = 1 (the other tau' are shown in fidelity.md)", 1.4, "80.7 -> 82.1 kNN at tau' = 1", _IMG,
          "benchmarks.tables.fidelity:judge:img-iou", "images"),
    Entry("img-cacr-imbalance", "CACR (Zheng et al. 2021), Tables 2, 8", "CACR loses the least accuracy under class "
          "imbalance", "the drop from balanced to linear / exponential imbalance: cacr vs infonce and vs cmc",
          "four margins, all must hold (each imbalance, each other row)", 0.12,
          "the smallest of the paper's four margins (vs CMC, exponential)", _IMG,
          "benchmarks.tables.vision_cifar:judge:img-cacr-imbalance", "images"),
    Entry("img-tsimclr-d8", "t-SimCLR (Böhm et al. 2023), Figure 2b", "t-SimCLR keeps its kNN accuracy at d = 8 "
          "better than SimCLR", "tsimclr vs infonce at output dimension 128 and 8, kNN",
          "two margins, both must hold: a smaller drop from 128 to 8, and t-SimCLR above SimCLR at 8", None,
          "the figure gives no SimCLR number at d = 8", _IMG, "benchmarks.tables.vision_cifar:judge:img-tsimclr-d8", "images"),
    Entry("text-macl-minilm", "MACL (Huang et al. 2023), Table B.4", "MACL improves SimCSE on the STS average",
          "macl vs infonce, unsupervised SimCSE from all-MiniLM-L6-v2, STS average", "one comparison", 0.41,
          "76.66 vs 76.25 (BERT-base)", "reduced: 1,024 wiki sentences; an already contrastive start model",
          "benchmarks.tables.text_sts:judge:default", "sentences"),
    Entry("text-macl-mlm", "MACL (Huang et al. 2023), Table B.4", "MACL improves SimCSE on the STS average (from an "
          "MLM-pretrained start model)", "macl vs infonce, unsupervised SimCSE from the BERT-mini MLM start model",
          "one comparison, if training moves STS 10 points above the start model (its precondition)", 0.41,
          "76.66 vs 76.25 (BERT-base)", "reduced: BERT-mini pretrained here for 3,000 steps",
          "benchmarks.tables.text_sts:judge:models:bert-mini-english", "sentences"),
    Entry("xclr-linear-simclr", "X-CLR (Sobal et al. 2024), Table 7", "X-CLR beats SimCLR on linear classification",
          "xclr (caption graph) vs infonce, batch 256, linear probe", "one comparison", 12.13,
          "75.56 vs 63.43, ImageNet linear, 5 seeds", _XCLR, "benchmarks.tables.xclr:judge:linear-simclr", "images"),
    Entry("xclr-linear-supcon", "X-CLR (Sobal et al. 2024), Table 7", "X-CLR beats SupCon on linear classification",
          "xclr (caption graph) vs supcon, batch 256, linear probe", "one comparison", 1.26,
          "75.56 vs 74.30, ImageNet linear, 5 seeds", _XCLR, "benchmarks.tables.xclr:judge:linear-supcon", "images"),
    Entry("xclr-knn", "X-CLR (Sobal et al. 2024), Figure 3b", "X-CLR beats SimCLR and SupCon on kNN classification",
          "xclr vs infonce and vs supcon, kNN (k = 200)", "two margins, both must hold (the figure shows X-CLR above "
          "both)", None, "read from a figure, no number", _XCLR, "benchmarks.tables.xclr:judge:knn", "images"),
    Entry("xclr-data-efficiency", "X-CLR (Sobal et al. 2024), Figure 3a", "X-CLR stays above SimCLR as the samples "
          "per class shrink", "xclr vs infonce at 50, 100 and 500 training images per class, linear probe",
          "three margins, all must hold (the figure shows X-CLR above SimCLR at every size)", None,
          "read from a figure, no number", _XCLR, "benchmarks.tables.xclr:judge:data-efficiency", "images"),
    Entry("xclr-graph-source", "X-CLR (Sobal et al. 2024), Table 8", "The sentence-transformer caption graph beats "
          "the label graph and a random graph", "xclr with the caption graph vs with the label graph and with a "
          "random graph, linear probe", "two margins, both must hold", 1.1,
          "75.6 vs 74.4 (label) and 74.5 (random): the smaller margin", _XCLR,
          "benchmarks.tables.xclr:judge:graph-source", "images"),
    Entry("xclr-finetune", "X-CLR (Sobal et al. 2024), Table 5", "Fine-tuning a SimCLR encoder with X-CLR improves "
          "it", "3 more epochs of X-CLR vs 3 more epochs of SimCLR from the same 3-epoch SimCLR encoder (the same "
          "steps), linear probe", "one comparison, against continued SimCLR so that extra training is not credited "
          "to X-CLR", 3.1, "66.5 after X-CLR fine-tuning vs 63.4 before (the paper has no continued-SimCLR row)",
          _XCLR, "benchmarks.tables.xclr:judge:finetune", "images"),
    Entry("xclr-time", "X-CLR (Sobal et al. 2024), Table 4", "X-CLR adds almost no time per step over SimCLR",
          "X-CLR's time per step vs SimCLR's, timed side by side in one process", "per round: 5 % of SimCLR's "
          "step minus X-CLR's overhead (percentage points), one-sample", 5.0,
          "0.866 vs 0.866 s per batch: 0 % overhead, 5 points under the margin", _XCLR,
          "benchmarks.tables.xclr:judge:time", "images"),
    Entry("xclr-follows-graph", "X-CLR (Sobal et al. 2024), Figure 4", "The learned class similarities follow the "
          "target graph", "correlation of the learned class similarities with the caption graph: xclr vs supcon",
          "one comparison (minimum effect 0.05 in r)", None, "a heat-map, no number", _XCLR,
          "benchmarks.tables.xclr:judge:follows-graph", "images"),
    Entry("xclr-connectivity", "X-CLR (Sobal et al. 2024), Table 9", "X-CLR has the highest intra-class "
          "connectivity", "intra-class connectivity of the learned class similarities: xclr vs supcon and vs infonce",
          "two margins, both must hold (minimum effect 0.05)", 0.188, "2.193 vs 2.005 (SupCon): the smaller margin",
          _XCLR, "benchmarks.tables.xclr:judge:connectivity", "images"),
    Entry("gmm-l2", "t-SimCLR (Böhm et al. 2023), Figure 1 d, e", "SimCLR with -l2 similarity keeps the shifted "
          "clusters more separable than cosine SimCLR", "simclr_l2 vs infonce, OOD linear accuracy",
          "one comparison", 51.6, "100.0 vs 48.4 OOD accuracy", "paper protocol (the means' layout is ours)",
          "benchmarks.tables.gmm:judge_l2", "synthetic"),
    Entry("gmm-tsimclr", "t-SimCLR (Böhm et al. 2023), Sec. 3.1.4, 4", "t-SimCLR keeps the shifted clusters more "
          "separable than cosine SimCLR", "tsimclr vs infonce, OOD linear accuracy", "one comparison", None,
          "no number given", "paper protocol (the means' layout is ours)", "benchmarks.tables.gmm:judge_tsimclr",
          "synthetic"),
    Entry("gmm-order", "t-SimCLR (Böhm et al. 2023), Sec. 3.1.3", "SimCLR orders four 1-D clusters a -> b -> c -> d "
          "('consistently')", "the share of seeds ordered against chance (1 of 3 cyclic orders)",
          "one rate against a known constant: the exact binomial test", 66.7, "always (100 %) against chance 33.3 %",
          "paper protocol", "benchmarks.tables.gmm:judge_order", "synthetic"),
)
BY_ID = {e.id: e for e in ENTRIES}


def entry(claim_id: str) -> Entry:
    return BY_ID[claim_id]


def decisive(parts: list[Result], verdict: Verdict) -> Result:
    """The part of an all-must-hold claim whose interval goes with the claim's verdict: confirmed, the weakest part
    (largest p-value: every part is confirmed); contradicted, the most reversed part; otherwise the first part that is
    not confirmed."""
    if verdict is Verdict.CONFIRMED:
        return max(parts, key=lambda r: r.p)
    if verdict is Verdict.CONTRADICTED:
        return min((r for r in parts if r.verdict is Verdict.CONTRADICTED), key=lambda r: r.p_reverse)
    return next((r for r in parts if r.verdict is not Verdict.CONFIRMED), parts[0])


def family(judged: list[tuple[Entry, Judged]]) -> dict[str, float]:
    """Holm's adjusted p-value of every judged claim of ``judged`` (one family: every claim with a verdict from its
    seeds), by claim id; NaN for a claim outside it (not measured, not judged, too few seeds)."""
    adjusted = holm([j.p_value() for _, j in judged])
    return {e.id: p for (e, _), p in zip(judged, adjusted)}


def demoted(j: Judged, adjusted: float) -> bool:
    """A confirmed or contradicted verdict that does not survive the family correction."""
    return j.verdict in (Verdict.CONFIRMED, Verdict.CONTRADICTED) and not adjusted < ALPHA


def shown_verdict(j: Judged, adjusted: float) -> str:
    """The verdict as the pages show it: a confirmed or contradicted one that does not survive Holm's correction
    says so."""
    return f"**{j.verdict}**" + (", not after Holm" if demoted(j, adjusted) else "")


def against_paper(e: Entry, j: Judged) -> str:
    """Our interval against the paper's gap: ``excluded`` (the upper end lies below it: the paper's effect is ruled
    out at this scale), ``detectable`` (our seeds could have detected it), else ``underpowered (~N seeds)``."""
    r = j.summary
    if r is None or e.paper_gap is None or r.ci[1] != r.ci[1]:
        return "-"
    if r.ci[1] < e.paper_gap:
        return "excluded"
    if r.detectable == r.detectable and r.detectable <= e.paper_gap:
        return "detectable"
    n = seeds_needed(r, e.paper_gap)
    return "underpowered" + (f" (~{n} seeds a side)" if n is not None else "")


def _gap(r: Result | None) -> str:
    if r is None or r.gap != r.gap:
        return "-"
    if r.ci[0] != r.ci[0]:
        return f"{r.gap:+.2f}"
    return f"{r.gap:+.2f} [{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]"


def _detectable(r: Result | None) -> str:
    return "-" if r is None or r.detectable != r.detectable else f"{r.detectable:.2f}"


def reading(e: Entry, j: Judged) -> str:
    """Our interval against the paper's gap (:func:`against_paper`), in words."""
    case = against_paper(e, j)
    if case == "-":
        return ""
    r = j.summary
    assert r is not None and e.paper_gap is not None
    if case == "excluded":
        return f"the paper's gap ({e.paper_gap:+.2f}) is excluded at this scale (our upper bound {r.ci[1]:+.2f})"
    if case == "detectable":
        return f"these seeds detect the paper's gap ({e.paper_gap:+.2f} >= {r.detectable:.2f})"
    return (f"underpowered: the paper's gap ({e.paper_gap:+.2f}) is below what these seeds detect ({r.detectable:.2f})"
            + (f"; about {n} seeds a side would detect it" if (n := seeds_needed(r, e.paper_gap)) else ""))


def line(claim_id: str, registry: Any) -> str:
    """The one way a document states a claim: ``claim (paper): **verdict** (evidence)``."""
    e = BY_ID[claim_id]
    j = e.judged(registry)
    read = reading(e, j)
    return f"{e.claim} ({e.paper}): **{j.verdict}** ({j.evidence}{'; ' + read if read else ''})"


# the order of the findings: what holds up first, then what our runs contradict, then the rest
ORDER = (Verdict.CONFIRMED, Verdict.CONTRADICTED, Verdict.NOT_CONFIRMED, Verdict.INCONCLUSIVE, Verdict.NOT_JUDGED,
         Verdict.NOT_MEASURED)


def findings(registry: Any) -> list[tuple[Entry, Judged]]:
    """Every claim of :data:`ENTRIES` with its verdict, in :data:`ORDER` of the verdicts (the catalogue's order
    within one verdict): the report opens with what holds up."""
    judged = [(e, e.judged(registry)) for e in ENTRIES]
    return sorted(judged, key=lambda ej: ORDER.index(ej[1].verdict))


def findings_table(judged: list[tuple[Entry, Judged]]) -> str:
    from suite.registry import markdown_table

    adjusted = family(judged)
    rows = []
    for e, j in judged:
        ns = "-" if j.summary is None else (f"{j.summary.ns[0]}" if len(set(j.summary.ns)) == 1 else
                                            f"{min(j.summary.ns)}-{max(j.summary.ns)}")
        p, q = j.p_value(), adjusted[e.id]
        rows.append([e.paper, e.claim, "-" if e.paper_gap is None else f"{e.paper_gap:+.2f}", _gap(j.summary),
                     _detectable(j.summary), ns, "-" if p != p else f"{p:.3g} / {q:.3g}",
                     shown_verdict(j, q), against_paper(e, j), e.protocol])
    return markdown_table(["paper", "claim", "paper's gap", "our gap [90 % CI]", "detectable gap", "seeds a side",
                           "p / Holm's p", "verdict", "the paper's gap", "protocol"], rows)


def forest(judged: list[tuple[Entry, Judged]]) -> Any:
    """One line per measured claim on its own scale: the gap in units of its interval's half-width (so every 90 %
    interval spans [x - 1, x + 1] and excludes zero exactly when the one-sided test is significant), the paper's gap
    on the same scale (red diamond, "excluded" where it lies beyond the interval), zero and +-1 marked. The label
    names the verdict, Holm's reading and the paper's-gap case."""
    import matplotlib.pyplot as plt

    adjusted = family(judged)
    shown = [(e, j) for e, j in judged if j.summary is not None and j.summary.gap == j.summary.gap
             and j.summary.ci[0] == j.summary.ci[0]]
    fig, ax = plt.subplots(figsize=(9.0, 0.42 * len(shown) + 1.4))
    colours = {Verdict.CONFIRMED: "tab:green", Verdict.CONTRADICTED: "tab:red"}
    for i, (e, j) in enumerate(shown):
        y = len(shown) - 1 - i
        r = j.summary
        assert r is not None
        half = (r.ci[1] - r.ci[0]) / 2 or 1.0  # a zero-width interval (no spread): drawn in points
        c = "tab:olive" if demoted(j, adjusted[e.id]) else colours.get(j.verdict, "tab:gray")
        x = r.gap / half
        ax.plot([(r.ci[0]) / half, (r.ci[1]) / half], [y, y], color=c, lw=2)
        ax.plot([x], [y], "o", color=c, ms=5)
        if e.paper_gap is not None:
            ax.plot([e.paper_gap / half], [y], "D", color="red", ms=5, mfc="none")
    for v, style in ((0.0, "-"), (-1.0, ":"), (1.0, ":")):
        ax.axvline(v, color="black", lw=0.8, ls=style)
    ax.set_xscale("symlog", linthresh=10.0)
    labels = [f"{e.id}: {j.verdict}{' (not after Holm)' if demoted(j, adjusted[e.id]) else ''}"
              f"{'' if against_paper(e, j) in ('-', 'detectable') else ', ' + against_paper(e, j).split(' (')[0]}"
              for e, j in reversed(shown)]
    ax.set_yticks(range(len(shown)), labels, fontsize=7)
    ax.set_xlabel("gap in units of its 90 % interval's half-width: ours (dot, interval line), the paper's (red "
                  "diamond)\nthe interval excludes zero beyond +-1 (dotted); olive: not significant after Holm", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
