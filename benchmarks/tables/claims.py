"""One rule for every claim a benchmark table or the report states, and one mean ± std.

A :class:`Claim` says that side ``a`` beats side ``b`` on ``metric`` within one task (and one data set
and setting: the caller picks the rows). It is judged on the per-seed values of the two sides by
**Welch's t-test**, one-sided in the claim's direction (``scipy.stats.ttest_ind(a, b, equal_var=False,
alternative="greater")`` for a higher-is-better metric), at significance level ``alpha`` (0.05), with a
stated minimum effect ``min_effect`` (in the metric's unit; the tables pass values in percent and the
default is half a point). The verdicts:

- ``confirmed``: both sides have at least 3 seeds, the one-sided p-value is below ``alpha`` and the
  observed gap in the claim's direction is at least ``min_effect``;
- ``contradicted``: both sides have at least 3 seeds and the opposite holds by the same rule (p-value of
  the reverse one-sided test below ``alpha`` and the reverse gap at least ``min_effect``);
- ``not confirmed``: both sides have at least 3 seeds and neither of the above (a tie, a gap inside the
  seed noise, or a significant gap smaller than the minimum effect);
- ``inconclusive (n < 3)``: a side has fewer than 3 seeds; nothing is said, whatever the gap.

A claim about a combination of cells (a gain that must be larger at one batch size than at another, a
drop that must be smaller for one row than another) is judged the same way on the linear contrast of the
cell means (:meth:`Claim.judge_contrast`): Welch's t statistic with the Welch-Satterthwaite degrees of
freedom, which for the contrast ``a - b`` is exactly ``ttest_ind(equal_var=False)`` (tested). A claim
over several data sets or margins (:func:`combine`) holds when at least ``need`` of them are confirmed.

Every gap is shown with the interval that matches its test: the two-sided 90 % interval (Welch's standard error and
degrees of freedom; Clopper-Pearson for a rate), whose lower end is the one-sided 95 % bound in the claim's direction.
So a confirmed gap's interval lies above zero, a contradicted one's below it, and a not-confirmed one's contains zero
unless the gap is significant but smaller than the minimum effect. :func:`holm` adjusts a family's p-values (Holm-Bonferroni, which
controls the family-wise error); :func:`seeds_needed` is how many seeds a side a gap would take to detect.

The std everywhere is the sample std (``ddof=1``); :func:`mean_std` is the one formatter.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

ALPHA = 0.05
MIN_SEEDS = 3
MIN_EFFECT = 0.5  # points, for metrics in percent
POWER = 0.8  # the power at which a verdict's "detectable" gap is stated


class Verdict(str, Enum):
    CONFIRMED = "confirmed"
    NOT_CONFIRMED = "not confirmed"
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive (n < 3)"
    NOT_MEASURED = "not measured"
    NOT_JUDGED = "not judged"  # measured, but the experiment cannot speak to the claim (its precondition failed)

    def __str__(self) -> str:
        return self.value


def std(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof = 1); NaN for fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else float("nan")


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


@dataclass(frozen=True)
class Result:
    """The verdict on one claim (or one margin of a compound claim) and its evidence."""
    verdict: Verdict
    gap: float  # observed difference (contrast) in the claim's direction: positive = as claimed
    p: float  # one-sided p-value of "holds" (NaN when a side has < 2 values)
    p_reverse: float  # one-sided p-value of the opposite
    df: float
    ns: tuple[int, ...]  # seeds per cell
    ci: tuple[float, float] = (math.nan, math.nan)  # two-sided 90 % interval of the gap: the one-sided test's bounds
    detectable: float = math.nan  # the smallest gap these seeds detect (one-sided alpha, power POWER), from the spread

    def evidence(self, digits: int = 2) -> str:
        p = "p n/a" if self.p != self.p else f"p = {self.p:.3g}"
        out = f"gap {self.gap:+.{digits}f}, {p}, n = {'/'.join(map(str, self.ns))}"
        if self.ci[0] == self.ci[0]:
            out += (f", 90 % CI [{self.ci[0]:+.{digits}f}, {self.ci[1]:+.{digits}f}], detectable "
                    f"{self.detectable:.{digits}f}")
        return out


def welch(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, float, float, float]:
    """Welch's t-test of the linear contrast ``sum(c * mean(values))`` > 0.

    Returns ``(estimate, p_greater, p_less, df)``; p-values are NaN when a cell has fewer than two values.
    Zero variance in every cell: the p-value is 0 (or 1) by the sign of the estimate.
    """
    from scipy import stats

    if any(len(v) == 0 for _, v in terms):
        return math.nan, math.nan, math.nan, math.nan
    est = sum(c * statistics.fmean(v) for c, v in terms)
    if any(len(v) < 2 for _, v in terms):
        return est, math.nan, math.nan, math.nan
    parts = [c * c * statistics.variance(v) / len(v) for c, v in terms]
    var = sum(parts)
    if var <= 0.0:
        return est, float(est <= 0), float(est >= 0), math.inf
    df = var * var / sum(p * p / (len(v) - 1) for p, (_, v) in zip(parts, terms))
    t = est / math.sqrt(var)
    return est, float(stats.t.sf(t, df)), float(stats.t.cdf(t, df)), df


@dataclass(frozen=True)
class Claim:
    """``a`` beats ``b`` on ``metric`` in ``task`` (``higher_is_better`` says which way "beats" points)."""
    task: str
    a: str
    b: str
    metric: str
    text: str = ""
    higher_is_better: bool = True
    min_effect: float = MIN_EFFECT
    alpha: float = ALPHA

    def judge(self, a: Sequence[float], b: Sequence[float]) -> Result:
        """Verdict from the per-seed values of the two sides."""
        return self.judge_contrast([(1.0, a), (-1.0, b)])

    def judge_contrast(self, terms: Sequence[tuple[float, Sequence[float]]]) -> Result:
        """Verdict on a linear contrast of cells (coefficient, per-seed values) that the claim says is positive."""
        sign = 1.0 if self.higher_is_better else -1.0
        terms = [(sign * c, [float(x) for x in v if x == x]) for c, v in terms]
        est, p, p_rev, df = welch(terms)
        ns = tuple(len(v) for _, v in terms)
        ci, detectable = interval(terms, df, self.alpha)
        if min(ns) < MIN_SEEDS:
            verdict = Verdict.INCONCLUSIVE
        elif p < self.alpha and est >= self.min_effect:
            verdict = Verdict.CONFIRMED
        elif p_rev < self.alpha and -est >= self.min_effect:
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.NOT_CONFIRMED
        return Result(verdict, est, p, p_rev, df, ns, ci, detectable)

    def judge_rate(self, successes: int, n: int, chance: float) -> Result:
        """Verdict on "the rate of successes (in percent) beats ``chance`` (a known constant, in percent)": the exact
        one-sided binomial test (``scipy.stats.binomtest``), not Welch's (a constant has no seeds); the gap is the
        observed rate minus chance, its interval the Clopper-Pearson 90 % interval minus chance, and the detectable
        gap the smallest rate above chance that ``n`` trials could show at ``alpha`` (power aside: n is fixed)."""
        from scipy import stats

        if n < MIN_SEEDS:
            return Result(Verdict.INCONCLUSIVE, math.nan, math.nan, math.nan, math.nan, (n,))
        test = stats.binomtest(successes, n, chance / 100, alternative="greater")
        rev = stats.binomtest(successes, n, chance / 100, alternative="less")
        gap = 100 * successes / n - chance
        ci = stats.binomtest(successes, n).proportion_ci(1 - 2 * self.alpha, method="exact")  # Clopper-Pearson
        lo, hi = ci.low, ci.high
        k_min = next((k for k in range(n + 1)
                      if stats.binomtest(k, n, chance / 100, alternative="greater").pvalue < self.alpha), n + 1)
        detectable = 100 * k_min / n - chance if k_min <= n else math.inf
        if test.pvalue < self.alpha and gap >= self.min_effect:
            verdict = Verdict.CONFIRMED
        elif rev.pvalue < self.alpha and -gap >= self.min_effect:
            verdict = Verdict.CONTRADICTED
        else:
            verdict = Verdict.NOT_CONFIRMED
        return Result(verdict, gap, float(test.pvalue), float(rev.pvalue), math.nan, (n,),
                      (100 * lo - chance, 100 * hi - chance), detectable)


def interval(terms: Sequence[tuple[float, Sequence[float]]], df: float, alpha: float = ALPHA
             ) -> tuple[tuple[float, float], float]:
    """The two-sided ``1 - 2 alpha`` (90 %) interval of the contrast ``sum(c * mean(values))`` (Welch's standard error
    and degrees of freedom ``df``), whose ends are the one-sided test's bounds (a confirmed gap's lower end lies above
    zero), and the smallest contrast a one-sided test at ``alpha`` detects with power :data:`POWER` given that
    standard error: ``(t_{1-alpha} + t_{POWER}) * se``. NaN without two values a cell."""
    from scipy import stats

    if any(len(v) < 2 for _, v in terms) or df != df:
        return (math.nan, math.nan), math.nan
    est = sum(c * statistics.fmean(v) for c, v in terms)
    se = math.sqrt(sum(c * c * statistics.variance(v) / len(v) for c, v in terms))
    if se == 0.0:
        return (est, est), 0.0
    half = float(stats.t.ppf(1 - alpha, df)) * se
    return (est - half, est + half), float(stats.t.ppf(1 - alpha, df) + stats.t.ppf(POWER, df)) * se


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of a family (step-down: the i-th smallest times (m - i + 1), made monotone,
    capped at 1); NaN entries stay NaN and are not counted in m."""
    idx = sorted((i for i, p in enumerate(ps) if p == p), key=lambda i: ps[i])
    m, out, run = len(idx), [math.nan] * len(ps), 0.0
    for rank, i in enumerate(idx):
        run = max(run, min(1.0, (m - rank) * ps[i]))
        out[i] = run
    return out


def seeds_needed(r: Result, gap: float) -> int | None:
    """About how many seeds a side the claim would need for its detectable gap to reach ``gap`` (the spread as
    observed, every side scaled alike: the detectable gap shrinks with the square root of the seeds); None where it
    cannot be said (no spread measured, a gap <= 0, a rate)."""
    if not (gap > 0) or r.detectable != r.detectable or r.df != r.df or not r.ns:
        return None
    if r.detectable <= gap:
        return max(r.ns)
    return math.ceil(max(r.ns) * (r.detectable / gap) ** 2)


def combine(results: Sequence[Result], need: int | None = None, total: int | None = None) -> Verdict:
    """Verdict of a claim that must hold on at least ``need`` (default: all) of ``total`` (default: as many
    as given, at least ``need``) data sets / margins, ``results`` being those measured.

    confirmed: at least ``need`` confirmed; inconclusive (n < 3): not yet, but the parts with too few
    seeds (a data set not measured at all counts as one with n = 0) could still make it; contradicted: so many parts are contradicted that ``need`` cannot be
    reached; not confirmed otherwise. No parts: not measured.
    """
    if not results:
        return Verdict.NOT_MEASURED
    k = len(results) if need is None else need
    total = max(k, len(results), total or 0)  # data sets not measured at all count as parts with n = 0
    count = {v: sum(r.verdict is v for r in results) for v in Verdict}
    if count[Verdict.CONFIRMED] >= k:
        return Verdict.CONFIRMED
    if count[Verdict.CONFIRMED] + count[Verdict.INCONCLUSIVE] + (total - len(results)) >= k:
        return Verdict.INCONCLUSIVE
    if count[Verdict.CONTRADICTED] > total - k:
        return Verdict.CONTRADICTED
    return Verdict.NOT_CONFIRMED


RULE_TEXT = (f"Verdicts (benchmarks/tables/claims.py): Welch's t-test on the per-seed values, one-sided in the claim's "
             f"direction, alpha = {ALPHA}, minimum effect {MIN_EFFECT} points. **confirmed**: p < alpha and the gap is "
             f"at least the minimum effect; **contradicted**: the same holds the other way; **not confirmed**: neither; "
             f"**inconclusive (n < 3)**: a side has fewer than {MIN_SEEDS} seeds; **not judged**: measured, but the "
             f"experiment cannot speak to the claim (the evidence names the failed precondition). Each gap has the "
             f"interval that matches the one-sided test: the two-sided 90 % interval, whose lower end is the one-sided "
             f"95 % bound (a confirmed gap's interval lies above zero), and the smallest gap the seeds could detect "
             f"(one-sided alpha, power {POWER}, from the measured spread). The claims are one family: Holm's "
             f"adjusted p-value (Holm-Bonferroni, family-wise error) says whether a confirmed or contradicted verdict "
             f"survives the correction. Against the paper's gap: **excluded** when our interval's upper end lies "
             f"below it (the paper's effect is ruled out at this scale), **detectable** when our seeds could have "
             f"detected it (detectable gap at most the paper's), else **underpowered**, with about how many seeds a "
             f"side it would take (the observed spread). An ordering against a known chance rate is judged by the "
             f"exact binomial test. Std = sample std (ddof 1).")


