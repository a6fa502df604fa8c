"""The catalogue's claims judged as one family, and the one way every document states them: each claim of
:data:`benchmarks.tables.catalogue.ENTRIES` judged on a registry (:func:`verdicts`, read once while the registry is
unchanged), Holm's adjusted two-sided p-values over the family (:func:`family`) and the verdict after them
(:func:`shown`), our interval read against the paper's gap (:func:`against_paper`, :func:`reading`), a claim's line in
a table (:func:`line`) and the findings that open the report (:func:`findings`, :func:`findings_table`). A verdict
carries its gap with the 95 % interval of its test (paired by seed, partially paired or Welch) and the smallest gap
the seeds confirm with power 0.8."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from benchmarks.stats import ALPHA, holm, seeds_needed
from benchmarks.tables.catalogue import ENTRIES, MIN_EFFECTS, Entry
from benchmarks.tables.claims import Judged, Result, Verdict, at_looks, final

DECIDED = (Verdict.CONFIRMED, Verdict.CONTRADICTED, Verdict.EQUIVALENT)


def family(judged: list[tuple[Entry, Judged]]) -> dict[str, float]:
    """Holm's adjusted p-value of every judged claim of ``judged`` (one family: every claim with a verdict from its
    seeds, each by its two-sided p-value), by claim id; NaN for a claim outside it (not measured, not judged, too few
    seeds)."""
    adjusted = holm([j.p_value() for _, j in judged])
    return {e.id: p for (e, _), p in zip(judged, adjusted)}


def shown(j: Judged, adjusted: float) -> Verdict:
    """The verdict as every page shows it: after the family's correction (:func:`benchmarks.tables.claims.final`)."""
    return final(j.verdict, adjusted)


_VERDICTS: dict[tuple[Any, ...], tuple[list[tuple[Entry, Judged]], dict[str, float]]] = {}


def verdicts(registry: Any) -> tuple[list[tuple[Entry, Judged]], dict[str, float]]:
    """Every claim of :data:`ENTRIES` judged on ``registry``, in the catalogue's order, and the family's Holm-adjusted
    p-values (read once while the registry is unchanged)."""
    fingerprint = registry.fingerprint() if hasattr(registry, "fingerprint") else object()
    key = (getattr(registry, "url", id(registry)), fingerprint, os.environ.get("SUITE_ALLOW_DIRTY") == "1")
    if key not in _VERDICTS:
        if len(_VERDICTS) > 8:
            _VERDICTS.clear()
        judged = [(e, read_at_last_look(e, e.judged(registry))) for e in ENTRIES]
        _VERDICTS[key] = (judged, family(judged))
    return _VERDICTS[key]


def read_at_last_look(e: Entry, j: Judged) -> Judged:
    """A claim read at several looks (:attr:`Entry.plan`) judged at its last one: its comparison (and pool) at the
    two-sided alpha the plan's spending leaves for that look (:func:`benchmarks.tables.claims.at_looks`), its verdict
    "not confirmed" where the p-value no longer clears it; a claim of one look unchanged."""
    plan = getattr(e, "plan", None)  # an entry-like object without a plan: one look
    alpha_last = ALPHA if plan is None else plan.alpha_at_last(ALPHA)
    if j.summary is None or not alpha_last < ALPHA:
        return j if plan is None or not plan.final else replace(j, evidence=f"{j.evidence}; {plan.text()}")
    summary = at_looks(j.summary, alpha_last)
    verdict = Verdict.NOT_CONFIRMED if j.verdict in DECIDED and not summary.p() < ALPHA else j.verdict
    pooled = None if j.pooled is None else replace(j.pooled, result=at_looks(j.pooled.result, alpha_last))
    return replace(j, verdict=verdict, summary=replace(summary, verdict=verdict), pooled=pooled,
                   evidence=f"{j.evidence}; {e.plan.text()}, read at two-sided alpha {alpha_last:.3g} at the last")


def against_paper(e: Entry, j: Judged) -> str:
    """Our interval against the paper's gap: ``direction only`` (the entry's numbers compare with the paper's in
    direction, not in value: :attr:`Entry.gap_scale`), ``excluded`` (the upper end lies below it: the paper's effect
    is ruled out at this scale), ``exceeded`` (the lower end lies above it and the arms were tuned alike: the effect is
    larger here than the paper's), ``above, tuned unalike`` (the same, but one arm's hyper-parameter was chosen on
    validation and the other's not: :attr:`Entry.tuning`), ``below the minimum effect`` (the paper's gap is at most the
    minimum effect: no number of seeds would confirm it), ``detectable`` (these seeds confirm it with power 0.8), else
    ``underpowered (~N seeds a side)`` (:func:`benchmarks.stats.seeds_needed`, the claim's own test). A claim judged
    per data set reads the paper's gap (its average over the sets) against the pooled interval. An inconclusive claim
    has no reading: its interval, where it has one, is an interim look (the molecular claims while their encoders run
    on some sets only: benchmarks/tables/graph_molnet.py)."""
    r = _against(j)
    if r is None or e.paper_gap is None or r.ci[1] != r.ci[1] or j.verdict is Verdict.INCONCLUSIVE:
        return "-"
    if e.gap_scale == "direction":
        return "direction only"
    if r.ci[1] < e.paper_gap:
        return "excluded"
    if r.ci[0] > e.paper_gap:
        return "above, tuned unalike" if e.tuning else "exceeded"
    if not e.paper_gap > r.min_effect:
        return "below the minimum effect"
    if r.detectable == r.detectable and r.detectable <= e.paper_gap:
        return "detectable"
    n = seeds_needed(r, e.paper_gap)
    return "underpowered" + (f" (~{n} {_unit(e)} a side)" if n is not None else "")


def _against(j: Judged) -> Result | None:
    """The comparison the paper's gap is read against: the pool of a claim judged per set, else the row's."""
    return j.pooled.result if j.parts and j.pooled is not None else j.summary


def _gap(r: Result | None) -> str:
    if r is None or r.gap != r.gap:
        return "-"
    if r.ci[0] != r.ci[0]:
        return f"{r.gap:+.2f}"
    level = "" if r.bonferroni == 1 else f" ({100 * (1 - r.alpha / r.bonferroni):.3g} %)"
    return f"{r.gap:+.2f} [{r.ci[0]:+.2f}, {r.ci[1]:+.2f}]{level}"


def _detectable(r: Result | None) -> str:
    return "-" if r is None or r.detectable != r.detectable else f"{r.detectable:.2f}"


def reading(e: Entry, j: Judged) -> str:
    """Our interval against the paper's gap (:func:`against_paper`), in words; then what else qualifies it: an
    equivalence margin that contains the paper's gap, arms tuned unalike (:attr:`Entry.tuning`)."""
    case = against_paper(e, j)
    r = _against(j)
    out = []
    if case != "-":
        assert r is not None and e.paper_gap is not None
        out.append(_case_text(case, e.paper_gap, r, _unit(e)))
    s = j.summary
    if j.verdict is Verdict.EQUIVALENT and s is not None and e.paper_gap is not None \
            and abs(e.paper_gap) < s.min_effect:
        out.append(f"equivalent within ±{s.min_effect:g}, a margin that contains the paper's gap ({e.paper_gap:+.2f}): "
                   "the verdict does not rule the paper's effect out")
    if e.tuning:
        out.append(f"tuned unalike: {e.tuning}")
    return "; ".join(out)


def _unit(e: Entry) -> str:
    """What a side of the claim counts: seeds, or for the molecular claims encoders (against the baseline's seeds)."""
    plan = getattr(e, "plan", None)
    return plan.unit if plan is not None and plan.final else "seeds"


def _case_text(case: str, gap: float, r: Result, unit: str = "seeds") -> str:
    if case == "direction only":
        side = "the same" if (r.gap > 0) == (gap > 0) else "the opposite"
        return (f"the paper's gap ({gap:+.2f}) compares with ours in direction only (another layout of the data): "
                f"ours points {side} way")
    if case == "excluded":
        return f"the paper's gap ({gap:+.2f}) is excluded at this scale (our upper bound {r.ci[1]:+.2f})"
    if case == "exceeded":
        return f"our gap exceeds the paper's ({gap:+.2f}) at this scale (our lower bound {r.ci[0]:+.2f})"
    if case == "above, tuned unalike":
        return (f"our interval lies above the paper's gap ({gap:+.2f}; our lower bound {r.ci[0]:+.2f}), but the arms "
                "were not tuned alike, so it is not read as exceeding it")
    if case == "below the minimum effect":
        return (f"the paper's gap ({gap:+.2f}) is below the minimum effect ({r.min_effect:g}): no number of "
                f"seeds would confirm it")
    if case == "detectable":
        return f"these seeds confirm the paper's gap with power 0.8 ({gap:+.2f} >= {r.detectable:.2f})"
    return (f"underpowered: the paper's gap ({gap:+.2f}) is below what these seeds confirm with power 0.8 "
            f"({r.detectable:.2f})" + (f"; about {n} {unit} a side would" if (n := seeds_needed(r, gap)) else ""))


def line(claim_id: str, registry: Any) -> str:
    """The one way a document states a claim: ``claim (paper): **verdict** (evidence)``, the verdict after the
    family's correction."""
    judged, adjusted = verdicts(registry)
    e, j = next((e, j) for e, j in judged if e.id == claim_id)
    read = reading(e, j)
    holm_p = adjusted[e.id]
    fam = "" if holm_p != holm_p else f"; Holm's p = {holm_p:.3g}"
    pooled = "" if j.pooled is None else f"; pooled over sets (random effects): {j.pooled.text()}"
    return f"{e.claim} ({e.paper}): **{shown(j, holm_p)}** ({j.evidence}{fam}{pooled}{'; ' + read if read else ''})"


# the order of the findings: what holds up first, then what our runs contradict or find equivalent, then the rest
ORDER = (Verdict.CONFIRMED, Verdict.CONTRADICTED, Verdict.EQUIVALENT, Verdict.NOMINAL_HOLDS, Verdict.NOMINAL_REVERSED,
         Verdict.NOMINAL_EQUIVALENT, Verdict.NOT_CONFIRMED, Verdict.INCONCLUSIVE, Verdict.NOT_JUDGED,
         Verdict.NOT_MEASURED)


def findings(registry: Any) -> list[tuple[Entry, Judged]]:
    """Every claim of :data:`ENTRIES` with its verdict, in :data:`ORDER` of the verdicts after the family's
    correction (the catalogue's order within one verdict): the report opens with what holds up."""
    judged, adjusted = verdicts(registry)
    return sorted(judged, key=lambda ej: ORDER.index(shown(ej[1], adjusted[ej[0].id])))


def findings_table(judged: list[tuple[Entry, Judged]]) -> str:
    from suite.registry import markdown_table

    adjusted = family(judged)
    rows = []
    for e, j in judged:
        r = j.summary
        ns = "-" if r is None else (f"{r.ns[0]}" if len(set(r.ns)) == 1 else f"{min(r.ns)}-{max(r.ns)}")
        if r is not None and (len(e.plan.looks) > 1 or e.plan.final):
            ns += f" ({e.plan.text()}; alpha at the last {e.plan.alpha_at_last(ALPHA):.3g})"
        p, q = j.p_value(), adjusted[e.id]
        rows.append([e.paper, e.claim, "-" if e.paper_gap is None else f"{e.paper_gap:+.2f}", _gap(r),
                     "-" if r is None or r.gap != r.gap else r.design_text(),
                     "-" if r is None else f"{r.min_effect:g}", _detectable(r), ns,
                     "-" if p != p else f"{r.p_text()} / {q:.3g}", f"**{shown(j, q)}**",  # type: ignore[union-attr]
                     "-" if j.pooled is None else j.pooled.text(), against_paper(e, j), e.protocol])
    return markdown_table(["paper", "claim", "paper's gap", "our gap [95 % CI]", "test", "minimum effect", "detectable gap",
                           "seeds a side", "p (two-sided, its hypothesis) / Holm's p", "verdict",
                           "pooled over data sets (random effects)", "the paper's gap", "protocol"], rows)


def min_effects_table() -> str:
    """The declared minimum effect of every metric a claim is judged on, its value and its reason
    (:data:`benchmarks.tables.catalogue.MIN_EFFECTS`)."""
    from suite.registry import markdown_table

    return markdown_table(["task", "metric", "minimum effect", "why"],
                          [[m.task, m.metric, f"{m.resolve():g}", m.reason] for m in MIN_EFFECTS])


def looks_table() -> str:
    """Every claim's seeds as declared: its looks, whether they were planned, the spending and the alpha at the last
    look (:attr:`benchmarks.tables.catalogue.Entry.plan`)."""
    from suite.registry import markdown_table

    return markdown_table(["claim", "looks (seeds a side)", "planned", "alpha at the last look", "history"],
                          [[e.id, e.plan.looks_text(),
                            "yes" if e.plan.planned else "no (seeds added after a look)",
                            f"{e.plan.alpha_at_last(ALPHA):.3g}", e.plan.history or "-"] for e in ENTRIES])
