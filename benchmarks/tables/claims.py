"""One rule for every claim a benchmark table, the report or ``suite bench compare`` states, and one mean ± std.

A :class:`Claim` says that side ``a`` beats side ``b`` on ``metric`` within one task (and one data set and setting: the
caller picks the rows), by at least the claim's minimum effect ``m`` (``min_effect``, in the metric's unit, declared
per metric with its reason in :data:`benchmarks.tables.catalogue.MIN_EFFECTS`). It is judged on a linear contrast of
cells (``a - b``, or e.g. a gain at one batch size minus the gain at another) from their per-seed values:

- **the design.** Where every cell holds one value per seed and the cells' runs record the same identities (the same
  seed on the same data set, :class:`Seeded`: the seed draws the training subset and the initialisation, so the arms
  share them), the seeds are blocks: the **paired** test, a one-sample t-test of the per-seed contrast (for two cells
  ``scipy.stats.ttest_rel``), with the correlation of the arms by seed reported beside it. Where two cells share only
  some of their seeds (one arm ran more), the **partially paired** test (the partially overlapping samples t-test of
  Derrick, Toher and White 2017, :func:`benchmarks.stats.partially_paired`): every seed's value counts, the shared
  ones through their correlation. Otherwise **Welch**'s test (``ttest_ind(equal_var=False)``;
  Welch-Satterthwaite degrees of freedom for a contrast of more cells, also where more than two cells share only some
  seeds).
- **the interval.** The two-sided 95 % interval of the contrast (``1 - alpha``) from the same test.
- **the verdicts**, read off that interval against the minimum effect: **confirmed** when it lies above ``+m``;
  **contradicted** when it lies below ``-m``; **equivalent** (within ``±m``) when it lies inside ``(-m, +m)`` (two
  one-sided tests, TOST); **not confirmed** otherwise; **inconclusive** when a cell has fewer than 3 seeds, or a claim
  of parts has parts not measured (or too few seeds) that could still decide it.
- **the p-value.** Each verdict is a one-sided test (``gap > +m``, ``gap < -m``, both one-sided tests of ``gap within
  ±m``); the claim's p-value is twice the smallest of the three, capped at 1 (:meth:`Result.p`), named by its
  hypothesis (:meth:`Result.p_text`). It is two-sided: below ``alpha`` exactly when the 95 % interval gives a verdict,
  and since at most two of the three hypotheses are false at once, a claim's chance of a wrong verdict is at most
  ``alpha``. :func:`holm` adjusts a family's p-values (Holm-Bonferroni); a verdict that does not survive is
  **nominal** (:func:`final`), never "confirmed".
- **power.** The smallest gap the seeds detect with power 0.8 (``detectable``) and the seeds a side a gap would need
  (:func:`seeds_needed`) come from the noncentral t distribution of the claim's own test (paired or Welch; partially
  paired: the paired test the same seeds in both arms would give) against ``+m``; a gap at most ``m`` cannot be
  confirmed by any number of seeds.

A rate against a known chance level (:meth:`Claim.judge_rate`) follows the same rule with the exact binomial test and
the Clopper-Pearson interval. A claim over several data sets is pooled by random effects (:func:`pool`,
DerSimonian-Laird's tau² with the Hartung-Knapp-Sidik-Jonkman interval, t on k - 1 df, and the heterogeneity) beside
the count rule the catalogue judges it by. The minimum effect of each metric is declared, with its reason, in
:data:`benchmarks.tables.catalogue.MIN_EFFECTS`; a claim read at several looks is judged at the alpha its spending
leaves for the last one (:func:`at_looks`).

The std everywhere is the sample std (``ddof=1``); :func:`mean_std` is the one formatter.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from enum import Enum
from typing import Hashable, Iterable, Sequence

from benchmarks.stats import (ALPHA, POWER, binomial_tests, clopper_pearson, contrast, detectable_gap, hartung_knapp,
                              rate_detectable, t_interval, t_tests)

MIN_SEEDS = 3
MIN_EFFECT = 0.5  # points: the default where the catalogue declares no minimum effect for a claim's metric


class Verdict(str, Enum):
    CONFIRMED = "confirmed"
    EQUIVALENT = "equivalent"
    NOT_CONFIRMED = "not confirmed"
    CONTRADICTED = "contradicted"
    NOMINAL_HOLDS = "nominal: holds before Holm only"
    NOMINAL_REVERSED = "nominal: reversed before Holm only"
    NOMINAL_EQUIVALENT = "nominal: equivalent before Holm only"
    INCONCLUSIVE = "inconclusive"  # too few seeds a side, or a claim of parts with parts still open (issue 80: it
    # said "(n < 3)" beside 3 seeds, where n counted data sets)
    NOT_MEASURED = "not measured"
    NOT_JUDGED = "not judged"  # measured, but the experiment cannot speak to the claim (its precondition failed)

    def __str__(self) -> str:
        return self.value


NOMINAL = {Verdict.CONFIRMED: Verdict.NOMINAL_HOLDS, Verdict.CONTRADICTED: Verdict.NOMINAL_REVERSED,
           Verdict.EQUIVALENT: Verdict.NOMINAL_EQUIVALENT}


def final(verdict: Verdict, adjusted: float, alpha: float = ALPHA) -> Verdict:
    """The verdict after the family's correction: a confirmed, contradicted or equivalent verdict whose Holm-adjusted
    p-value is not below ``alpha`` becomes its nominal form."""
    return NOMINAL[verdict] if verdict in NOMINAL and not adjusted < alpha else verdict


def mean_std(values: Sequence[float], digits: int = 2, scale: float = 1.0, show_n: bool = True,
             empty: str = "–") -> str:
    """``"mean ± std (n=k)"`` of ``values`` times ``scale`` (sample std); one value: ``"mean (n=1)"``."""
    xs = [scale * v for v in values if v == v]
    if not xs:
        return empty
    out = f"{statistics.fmean(xs):.{digits}f}"
    if len(xs) > 1:
        out += f" ± {statistics.stdev(xs):.{digits}f}"
    return out + (f" (n={len(xs)})" if show_n else "")


class Seeded(list):  # type: ignore[type-arg]
    """Per-seed values (a list of floats) that name the run each came from: ``ids[i]``, the recorded identity of the
    run of ``self[i]`` (its seed and data set, :func:`benchmarks.tables.identity`). Cells whose ids are the same
    set pair by seed; a plain list pairs with nothing."""

    def __init__(self, values: Iterable[float] = (), ids: Iterable[Hashable] = ()) -> None:
        super().__init__(values)
        self.ids = tuple(ids)
        if len(self.ids) != len(self):
            raise ValueError(f"Seeded: {len(self)} values but {len(self.ids)} ids")

    @classmethod
    def of(cls, pairs: Iterable[tuple[Hashable, float | None]], scale: float = 1.0) -> "Seeded":
        """From (identity, value) pairs; None and NaN values left out."""
        kept = [(i, scale * v) for i, v in pairs if v is not None and v == v]
        return cls((v for _, v in kept), (i for i, _ in kept))

    def plus(self, run_id: Hashable, value: float | None) -> "Seeded":
        """These values and one more (None or NaN: unchanged)."""
        return Seeded.of([*zip(self.ids, self), (run_id, value)])


def scaled(values: Sequence[float], factor: float) -> list[float]:
    """``values`` times ``factor``, keeping a :class:`Seeded` cell's ids."""
    if isinstance(values, Seeded):
        return Seeded.of(zip(values.ids, values), factor)
    return [factor * v for v in values]


@dataclass(frozen=True)
class Result:
    """One comparison (a claim, a margin of one, or a pooled estimate): its test and what it says.

    ``design``: "paired" (by seed), "partially paired" (two cells sharing some seeds), "Welch", "binomial" (a rate
    against chance) or "random effects" (pooled). The
    one-sided p-values test the verdicts' hypotheses against the minimum effect ``m``: ``p_holds`` of ``gap > +m``,
    ``p_reverse`` of ``gap < -m``, ``p_equiv`` of ``gap within ±m`` (TOST: the larger of its two one-sided p-values).
    ``units``: per cell (coefficient² x variance, seeds), from which the standard error at other seed counts follows
    (:func:`seeds_needed`); ``k_of_n``: a rate's successes and trials. ``bonferroni``: how many comparisons this one
    was chosen from (a combined claim's deciding part; its p-values are multiplied and its interval widened)."""
    verdict: Verdict
    gap: float  # observed contrast in the claim's direction: positive = as claimed
    p_holds: float
    p_reverse: float
    p_equiv: float
    df: float
    ns: tuple[int, ...]  # seeds per cell
    ci: tuple[float, float] = (math.nan, math.nan)  # two-sided 1 - alpha interval (Clopper-Pearson for a rate)
    detectable: float = math.nan  # the smallest gap confirmed with power POWER by the claim's own test
    design: str = "Welch"
    r: float = math.nan  # correlation of the arms by seed (paired design)
    se: float = math.nan
    min_effect: float = MIN_EFFECT
    alpha: float = ALPHA
    units: tuple[tuple[float, int], ...] = ()
    k_of_n: tuple[int, int, float] | None = None  # (successes, trials, chance in percent)
    bonferroni: float = 1  # a combined claim's choice (C(N, k)) times a sequential plan's alpha / alpha_last

    def p(self) -> float:
        """The claim's two-sided p-value: twice the smallest of its three one-sided ones (times ``bonferroni``),
        capped at 1; NaN when untested."""
        ps = [x for x in (self.p_holds, self.p_reverse, self.p_equiv) if x == x]
        return min(1.0, 2 * self.bonferroni * min(ps)) if ps else math.nan

    def direction(self) -> str:
        """The hypothesis of :meth:`p`: ``gap > +m``, ``gap < -m`` or ``gap within ±m``."""
        m = f"{self.min_effect:g}"
        ps = {f"gap > {'+' * (m != '0')}{m}": self.p_holds, f"gap < {'-' * (m != '0')}{m}": self.p_reverse,
              f"gap within ±{m}": self.p_equiv}
        return min(ps, key=lambda k: ps[k] if ps[k] == ps[k] else 2.0)

    def p_text(self) -> str:
        """``p(gap > +0.5) = 0.012`` (two-sided: :meth:`p`), or ``p n/a``."""
        p = self.p()
        return "p n/a" if p != p else f"p({self.direction()}) = {p:.3g}"

    def design_text(self) -> str:
        r = f", r = {self.r:+.2f}" if self.r == self.r else ""
        if self.design == "paired":
            return f"paired by seed{r}"
        if self.design == "partially paired":  # units: (variance, seeds shared)
            return f"partially paired ({self.units[0][1]} seeds shared){r}"
        return self.design

    def evidence(self, digits: int = 2) -> str:
        out = f"gap {self.gap:+.{digits}f}"
        if self.ci[0] == self.ci[0]:
            level = 100 * (1 - self.alpha / self.bonferroni)
            out += f", {level:.3g} % CI [{self.ci[0]:+.{digits}f}, {self.ci[1]:+.{digits}f}]"
        out += f", {self.p_text()}, {self.design_text()}, n = {'/'.join(map(str, self.ns))}"
        if self.detectable == self.detectable:
            out += f", detectable {self.detectable:.{digits}f}"
        return out

    def chosen_from(self, k: int) -> "Result":
        """This comparison as the one chosen from ``k`` (Bonferroni): p-values times ``k``, the interval at level
        ``1 - alpha / k``; the verdict is the caller's."""
        if k <= 1:
            return self
        return replace(self, bonferroni=k, ci=_interval_at(self, self.alpha / k))


def _interval_at(r: Result, alpha: float) -> tuple[float, float]:
    """``r``'s two-sided ``1 - alpha`` interval (its design's)."""
    if r.k_of_n is not None:
        k, n, chance = r.k_of_n
        low, high = clopper_pearson(k, n, alpha)
        return 100 * low - chance, 100 * high - chance
    if r.se != r.se:
        return math.nan, math.nan
    return t_interval(r.gap, r.se, r.df, alpha)


def _verdict(p_holds: float, p_reverse: float, p_equiv: float, alpha: float) -> Verdict:
    """The verdict whose one-sided test rejects at ``alpha / 2`` (at most one can, given the interval)."""
    if p_holds < alpha / 2:
        return Verdict.CONFIRMED
    if p_reverse < alpha / 2:
        return Verdict.CONTRADICTED
    if p_equiv < alpha / 2:
        return Verdict.EQUIVALENT
    return Verdict.NOT_CONFIRMED


@dataclass(frozen=True)
class Claim:
    """``a`` beats ``b`` on ``metric`` in ``task`` (``higher_is_better`` says which way "beats" points)."""
    task: str
    a: str
    b: str
    metric: str
    text: str = ""
    higher_is_better: bool = True
    min_effect: float | None = None  # None: the catalogue's for (task, metric) (MIN_EFFECTS), else MIN_EFFECT
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if self.min_effect is None:
            from benchmarks.tables.min_effects import min_effect_of

            m = min_effect_of(self.task, self.metric)
            object.__setattr__(self, "min_effect", MIN_EFFECT if m is None else m)

    def judge(self, a: Sequence[float], b: Sequence[float]) -> Result:
        """Verdict from the per-seed values of the two sides (paired where they pair by seed)."""
        return self.judge_contrast([(1.0, a), (-1.0, b)])

    def judge_contrast(self, terms: Sequence[tuple[float, Sequence[float]]]) -> Result:
        """Verdict on a linear contrast of cells (coefficient, per-seed values) that the claim says is positive."""
        sign = 1.0 if self.higher_is_better else -1.0
        terms = [(sign * c, _finite(v)) for c, v in terms]
        est, se, df, design, r, units = contrast(terms)
        ns = tuple(len(v) for _, v in terms)
        m = float(self.min_effect)  # type: ignore[arg-type]
        if se != se:
            return Result(Verdict.INCONCLUSIVE if min(ns) < MIN_SEEDS else Verdict.NOT_CONFIRMED, est, math.nan,
                          math.nan, math.nan, math.nan, ns, design=design, min_effect=m, alpha=self.alpha)
        p_holds, p_rev, p_eq = t_tests(est, se, df, m)
        verdict = Verdict.INCONCLUSIVE if min(ns) < MIN_SEEDS else _verdict(p_holds, p_rev, p_eq, self.alpha)
        return Result(verdict, est, p_holds, p_rev, p_eq, df, ns, t_interval(est, se, df, self.alpha),
                      detectable_gap(se, df, m, self.alpha), design, r, se, m, self.alpha, units)

    def judge_rate(self, successes: int, n: int, chance: float) -> Result:
        """Verdict on "the rate of successes (in percent) beats ``chance`` (a known constant, in percent)" by the exact
        binomial tests (``scipy.stats.binom``) against ``chance ± m``; the gap is the rate minus chance, its interval
        the Clopper-Pearson one minus chance, and the detectable gap the smallest rate above chance that ``n`` trials
        confirm with power :data:`POWER` (:func:`rate_power`)."""
        m = float(self.min_effect)  # type: ignore[arg-type]
        if n < MIN_SEEDS:
            return Result(Verdict.INCONCLUSIVE, math.nan, math.nan, math.nan, math.nan, math.nan, (n,),
                          design="binomial", min_effect=m, alpha=self.alpha)
        p_holds, p_rev, p_eq = binomial_tests(successes, n, chance, m)
        gap = 100 * successes / n - chance
        r = Result(_verdict(p_holds, p_rev, p_eq, self.alpha), gap, p_holds, p_rev, p_eq, math.nan, (n,),
                   design="binomial", min_effect=m, alpha=self.alpha, k_of_n=(successes, n, chance))
        return replace(r, ci=_interval_at(r, self.alpha), detectable=rate_detectable(n, chance, m, self.alpha))


def _finite(v: Sequence[float]) -> list[float]:
    """The finite values of a cell, keeping a :class:`Seeded` cell's ids."""
    if isinstance(v, Seeded):
        return Seeded.of(zip(v.ids, (float(x) for x in v)))
    return [float(x) for x in v if x == x]


@dataclass(frozen=True)
class Pooled:
    """A random-effects pool of per-data-set gaps: the pooled gap as a :class:`Result` (DerSimonian-Laird's estimate
    and tau², the Hartung-Knapp-Sidik-Jonkman interval and tests: t on ``k - 1`` degrees of freedom), between-set
    variance ``tau2``, ``i2`` (the share of the spread that is between sets, in %) and Cochran's ``q`` with its
    p-value, over ``k`` sets."""
    result: Result
    tau2: float
    i2: float
    q: float
    q_p: float
    k: int

    def text(self, digits: int = 2) -> str:
        r = self.result
        return (f"{r.gap:+.{digits}f} [{r.ci[0]:+.{digits}f}, {r.ci[1]:+.{digits}f}] over {self.k} sets (HKSJ, t on "
                f"{self.k - 1} df), {r.p_text()}, tau² = {self.tau2:.{digits}g}, I² = {self.i2:.0f} %")


def pool(parts: Sequence[Result], min_effect: float | None = None, alpha: float = ALPHA) -> Pooled | None:
    """The random-effects pool of ``parts`` (each a gap with its standard error): DerSimonian-Laird's estimate and
    tau² with the Hartung-Knapp-Sidik-Jonkman standard error and Student's t on ``k - 1`` degrees of freedom
    (:func:`benchmarks.stats.hartung_knapp`; ``statsmodels.stats.meta_analysis.combine_effects(method_re="dl")``,
    its "random effect wls" row with ``use_t=True``), judged by the rule against ``min_effect`` (default: the parts'
    own); None with fewer than two parts with a standard error."""
    ok = [r for r in parts if r.se == r.se and r.se > 0]
    if len(ok) < 2:
        return None
    m = ok[0].min_effect if min_effect is None else min_effect
    est, se, df, tau2, i2, q, q_p = hartung_knapp([r.gap for r in ok], [r.se for r in ok])
    p_holds, p_rev, p_eq = t_tests(est, se, df, m)
    res = Result(_verdict(p_holds, p_rev, p_eq, alpha), est, p_holds, p_rev, p_eq, df,
                 tuple(n for r in ok for n in r.ns), t_interval(est, se, df, alpha), design="random effects (HKSJ)",
                 se=se, min_effect=m, alpha=alpha)
    return Pooled(res, tau2, i2, q, q_p, len(ok))


def at_looks(result: Result, alpha_last: float) -> Result:
    """``result`` read at its final look of a sequential plan: its p-value scaled by ``alpha / alpha_last`` (a verdict
    holds when the nominal two-sided p is below ``alpha_last``, :func:`benchmarks.stats.final_alpha`) and its
    interval at level ``1 - alpha_last`` (times any Bonferroni factor it already carries); unchanged at
    ``alpha_last == alpha``."""
    if not alpha_last < result.alpha:
        return result
    factor = result.bonferroni * result.alpha / alpha_last
    return replace(result, bonferroni=factor, ci=_interval_at(result, result.alpha / factor))


def combine(results: Sequence[Result], need: int | None = None, total: int | None = None) -> Verdict:
    """The count rule's verdict on a claim that must hold on at least ``need`` (default: all) of ``total`` (default:
    as many as given) data sets / margins, ``results`` being those measured: the verdict of :func:`decide` (one
    comparison, Bonferroni over the ways to choose the deciding parts), or inconclusive where no verdict is
    reached yet parts with too few seeds (or not measured) could still make it; no parts: not measured."""
    if not results:
        return Verdict.NOT_MEASURED
    verdict, _ = decide(results, need, total)
    if verdict is not Verdict.NOT_CONFIRMED:
        return verdict
    k = len(results) if need is None else need
    total = max(k, len(results), total or 0)
    open_ = sum(r.verdict in (Verdict.CONFIRMED, Verdict.INCONCLUSIVE) for r in results) + (total - len(results))
    unsettled = total > len(results) or any(r.verdict is Verdict.INCONCLUSIVE for r in results)
    return Verdict.INCONCLUSIVE if unsettled and open_ >= k else verdict


def decide(results: Sequence[Result], need: int | None = None, total: int | None = None
           ) -> tuple[Verdict, Result | None]:
    """A claim of parts (at least ``need`` of ``total`` must hold) as one comparison: it holds when some ``need``
    parts all hold, so its p-value of ``gap > +m`` is the ``need``-th smallest of the parts' (intersection-union) times
    the ``C(total, need)`` ways to choose them (Bonferroni); it is reversed (or equivalent) when ``total - need + 1``
    parts are (then ``need`` cannot hold), by the same rule. Parts not measured count as p = 1. Returns the verdict
    at ``alpha`` and the deciding part, chosen from as many (:meth:`Result.chosen_from`): its p-value and interval
    are the claim's."""
    if not results:
        return Verdict.NOT_MEASURED, None
    if len(results) == 1 and (total or 1) == 1:
        return results[0].verdict, results[0]
    total = max(need or 0, len(results), total or 0)
    k = need or total
    options = []
    for attr, j in (("p_holds", k), ("p_reverse", total - k + 1), ("p_equiv", total - k + 1)):
        def p_of(r: Result, attr: str = attr) -> float:  # a part with too few seeds counts as not measured
            p = getattr(r, attr)
            return p if p == p and r.verdict is not Verdict.INCONCLUSIVE else 2.0
        ranked = sorted(results, key=p_of)
        if len(ranked) < j or p_of(ranked[j - 1]) > 1:  # not enough parts measured: this direction cannot be reached
            continue
        part = ranked[j - 1].chosen_from(math.comb(total, j))
        options.append((getattr(part, attr), attr, part))
    if not options:
        return Verdict.NOT_CONFIRMED, results[0]
    p, attr, part = min(options, key=lambda o: o[0] * o[2].bonferroni)  # the nearest verdict, uncapped
    alpha = part.alpha
    shown = replace(part, **{a: (getattr(part, a) if a == attr else math.nan)
                             for a in ("p_holds", "p_reverse", "p_equiv")})
    verdict = {"p_holds": Verdict.CONFIRMED, "p_reverse": Verdict.CONTRADICTED,
               "p_equiv": Verdict.EQUIVALENT}[attr] if 2 * part.bonferroni * p < alpha else Verdict.NOT_CONFIRMED
    return verdict, replace(shown, verdict=verdict)


@dataclass(frozen=True)
class Judged:
    """One claim's verdict (before the family's correction) and its evidence; ``summary`` is the one comparison the
    findings table shows (in the claim's direction, points): the claim's own, or for a claim of several data sets or
    margins the part that decides it (:func:`decide`, its p-value and interval adjusted for
    the choice); None when nothing was measured. ``parts``: the parts, ``need`` of ``total`` of which must hold;
    ``pooled``: the random-effects pool over data sets, shown beside the count rule."""
    verdict: Verdict
    summary: Result | None
    evidence: str
    parts: tuple[Result, ...] = ()
    need: int | None = None
    total: int | None = None
    pooled: Pooled | None = None

    def p_value(self) -> float:
        """The claim's two-sided p-value in the family (:meth:`Result.p` of :attr:`summary`: the hypothesis of its
        verdict, or of the nearest verdict); NaN when nothing was judged."""
        if self.verdict in (Verdict.NOT_MEASURED, Verdict.NOT_JUDGED, Verdict.INCONCLUSIVE) or self.summary is None:
            return float("nan")
        return self.summary.p()


def of_parts(parts: list[Result], evidence: str, need: int | None = None, total: int | None = None,
             pooled: Pooled | None = None) -> Judged:
    """A claim judged on ``parts`` (at least ``need`` of ``total`` must hold; default all): the count rule's verdict and
    the deciding part as its one comparison (:func:`decide`); a single part is the claim."""
    verdict = combine(parts, need, total)
    _, shown = decide(parts, need, total)
    if len(parts) > 1 or (total or 1) > 1:
        evidence += f" (the comparison shown: part {parts.index(_part_of(parts, shown)) + 1})" if shown else ""
        return Judged(verdict, shown, evidence, tuple(parts), need, total, pooled)
    return Judged(verdict, shown, evidence, pooled=pooled)


def _part_of(parts: list[Result], shown: Result | None) -> Result:
    return next((r for r in parts if shown is not None and r.gap == shown.gap and r.ns == shown.ns), parts[0])


RULE_TEXT = (f"Verdicts (benchmarks/tables/claims.py; docs/evidence.md explains each reading): each claim is a "
             f"contrast "
             f"of per-seed values, tested **paired by seed** where the arms' runs record the same seeds on the same "
             f"data (the seed draws their subset and initialisation; the arms' correlation by seed, r, is given), "
             f"**partially paired** (Derrick et al. 2017's partially overlapping samples t-test) where two arms share "
             f"only some seeds, and by **Welch**'s test otherwise, against a minimum effect m declared per metric "
             f"with its reason (benchmarks/tables/catalogue.py, MIN_EFFECTS: 0.2 published between-seed SDs (Cohen's small effect) of "
             f"the baseline where the paper prints one, else the field's convention). Its two-sided "
             f"{100 * (1 - ALPHA):.0f} % interval decides: **confirmed** when it lies above +m, **contradicted** "
             f"below -m, **equivalent** (within ±m, two one-sided tests) inside (-m, +m), **not confirmed** otherwise; "
             f"**inconclusive**: a side has fewer than {MIN_SEEDS} seeds (trials), or a claim of parts has parts not "
             f"measured or too small that could still decide it; **not judged**: the experiment "
             f"cannot speak to the claim. Each p-value names its hypothesis (p(gap > +m), p(gap < -m), "
             f"p(gap within ±m)) "
             f"and is two-sided (twice the one-sided); the claims are one family, Holm-adjusted at {ALPHA}, and a "
             f"verdict that does not survive is **nominal**. A claim of parts (\"k of N\" sets, every margin) shows "
             f"the part that decides it, its p and interval Bonferroni-adjusted for the choice. The detectable gap and "
             f"the seeds a side the paper's gap would need are the power {POWER} of the claim's own test (noncentral "
             f"t; a rate: the exact binomial test and the Clopper-Pearson interval). A claim read at several looks "
             f"(seeds added after a look) is judged at the alpha an O'Brien-Fleming spending over those looks leaves "
             f"for the last. Pooled over sets: DerSimonian-Laird with the Hartung-Knapp-Sidik-Jonkman interval (t, "
             f"k - 1 df). Against the paper's gap: "
             f"**excluded** (our interval lies below it), **exceeded** (above it, the arms tuned alike), **above, "
             f"tuned unalike**, **direction only** (values not comparable), **below the minimum effect** (no number "
             f"of seeds confirms it), **detectable**, else **underpowered** (~N seeds a side). Std = sample std "
             f"(ddof 1).")
