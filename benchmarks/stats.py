"""The statistics every verdict is computed with, apart from what a verdict means (:mod:`benchmarks.tables.claims`):
the tests of a linear contrast of per-seed cells (**paired** by seed where the cells share their seeds, **partially
paired** where two cells share some of them, else **Welch**'s), their intervals and one-sided p-values against a
minimum effect (with **TOST** for equivalence), their power and the seeds a side a gap would need (the noncentral t),
the exact **binomial** tests of a rate against a known chance level with the Clopper-Pearson interval, **Holm**'s
correction of a family, the DerSimonian-Laird random-effects pool and its Hartung-Knapp-Sidik-Jonkman interval, and
the alpha an **O'Brien-Fleming** or **Pocock** spending leaves at a claim's last look. Every function takes numbers and returns
numbers; scipy is imported where it is used.

Example: >>> est, se, df, design, r, units = contrast([(1.0, [3.0, 4.0, 5.0]), (-1.0, [1.0, 1.5, 2.5])])
>>> t_tests(est, se, df, m=0.5)  # p(gap > +m), p(gap < -m), p(gap within ±m)
"""
from __future__ import annotations

import functools
import math
import statistics
from typing import Hashable, Protocol, Sequence

ALPHA = 0.05
POWER = 0.8  # the power at which a verdict's "detectable" gap is stated
MAX_SEEDS = 100_000  # seeds_needed stops searching here

Units = tuple[tuple[float, int], ...]  # per cell: (coefficient² x variance, seeds)


def std(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof = 1); NaN for fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def blocks(cells: Sequence[Sequence[float]]) -> list[Hashable] | None:
    """The shared seeds (identities) of ``cells`` when they pair: each carries ``ids`` (one distinct identity a value,
    :class:`benchmarks.tables.claims.Seeded`), all the same set, at least two; None otherwise (Welch)."""
    ids = [getattr(c, "ids", None) for c in cells]
    if any(i is None or len(set(i)) != len(i) for i in ids):
        return None
    first = set(ids[0])  # type: ignore[arg-type]
    if len(first) < 2 or any(set(i) != first for i in ids[1:]):  # type: ignore[arg-type]
        return None
    return sorted(first, key=repr)


def shared(a: Sequence[float], b: Sequence[float]) -> list[Hashable] | None:
    """The seeds (identities) two cells share when they overlap only in part: both carry distinct ``ids``, at least
    two of them shared and at least one not; None otherwise (:func:`blocks` pairs them all, or nothing pairs)."""
    ia, ib = getattr(a, "ids", None), getattr(b, "ids", None)
    if ia is None or ib is None or len(set(ia)) != len(ia) or len(set(ib)) != len(ib):
        return None
    both = set(ia) & set(ib)
    if len(both) < 2 or both == set(ia) == set(ib):
        return None
    return sorted(both, key=repr)


def _correlation(x: Sequence[float], y: Sequence[float]) -> float:
    try:
        return statistics.correlation(x, y)
    except statistics.StatisticsError:  # a constant arm
        return math.nan


def partially_paired(terms: Sequence[tuple[float, Sequence[float]]], seeds: Sequence[Hashable]
                     ) -> tuple[float, float, float, float, Units]:
    """The partially overlapping samples t-test (Derrick, Toher and White 2017, T_new2, unequal variances; R's
    ``Partiallyoverlapping::Partover.test``) of ``c1 * mean(a) + c2 * mean(b)``, two cells that share ``seeds`` and
    each have seeds of their own. Every value counts: the means and standard deviations ``s1``, ``s2`` are over all of
    a cell's ``n1`` (``n2``) seeds, the correlation ``r`` over the ``n12`` shared ones, and

        var = c1² s1² / n1 + c2² s2² / n2 + 2 c1 c2 r s1 s2 n12 / (n1 n2),
        df = (n12 - 1) + (welch_df - n12 + 1) (na + nb) / (na + nb + 2 n12),

    ``na``, ``nb`` the seeds of one cell only. With every seed shared it is the paired test (``var`` is the seed
    differences' variance over n, ``df = n - 1``); with none, Welch's. Returns the estimate, standard error, degrees of
    freedom, ``r`` and the variance unit of the design a full run of seeds would have (every seed in both cells:
    paired, ``c1² s1² + c2² s2² + 2 c1 c2 r s1 s2``)."""
    (c1, a), (c2, b) = terms
    at, bt = dict(zip(a.ids, a)), dict(zip(b.ids, b))  # type: ignore[attr-defined]
    r = _correlation([at[s] for s in seeds], [bt[s] for s in seeds])
    n1, n2, n12 = len(a), len(b), len(seeds)
    s1, s2 = statistics.stdev(a), statistics.stdev(b)
    cov = 2 * c1 * c2 * (r if r == r else 0.0) * s1 * s2  # a constant arm: no covariance
    v1, v2 = c1 * c1 * s1 * s1 / n1, c2 * c2 * s2 * s2 / n2
    var = v1 + v2 + cov * n12 / (n1 * n2)
    welch = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1)) if v1 + v2 > 0 else math.inf
    alone = n1 + n2 - 2 * n12
    df = (n12 - 1) + (welch - n12 + 1) * alone / (alone + 2 * n12)
    est = c1 * statistics.fmean(a) + c2 * statistics.fmean(b)
    return est, math.sqrt(max(var, 0.0)), df, r, ((max(c1 * c1 * s1 * s1 + c2 * c2 * s2 * s2 + cov, 0.0), n12),)


def contrast(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, float, float, str, float, Units]:
    """The contrast ``sum(c * mean(values))`` of cells and its test's standard error, degrees of freedom, design
    ("paired" where the cells pair by seed, :func:`blocks`; "partially paired" where two cells share some seeds,
    :func:`partially_paired`; else "Welch"), the arms' correlation by seed (paired; the part with positive
    coefficients against the part with negative ones) and the per-cell variance units. NaN standard error when a
    cell has fewer than two values."""
    if any(len(v) == 0 for _, v in terms):
        return math.nan, math.nan, math.nan, "Welch", math.nan, ()
    est = sum(c * statistics.fmean(v) for c, v in terms)
    seeds = blocks([v for _, v in terms])
    if seeds is not None:
        at = [dict(zip(v.ids, v)) for _, v in terms]  # type: ignore[attr-defined]
        d = [sum(c * a[s] for (c, _), a in zip(terms, at)) for s in seeds]
        plus = [sum(c * a[s] for (c, _), a in zip(terms, at) if c > 0) for s in seeds]
        minus = [sum(-c * a[s] for (c, _), a in zip(terms, at) if c < 0) for s in seeds]
        r = _correlation(plus, minus) if plus and minus and any(c < 0 for c, _ in terms) else math.nan
        var = statistics.variance(d)
        return est, math.sqrt(var / len(d)), len(d) - 1.0, "paired", r, ((var, len(d)),)
    if any(len(v) < 2 for _, v in terms):
        return est, math.nan, math.nan, "Welch", math.nan, ()
    some = shared(terms[0][1], terms[1][1]) if len(terms) == 2 else None
    if some is not None:
        est, se, df, r, units = partially_paired(terms, some)
        return est, se, df, "partially paired", r, units
    units = tuple((c * c * statistics.variance(v), len(v)) for c, v in terms)
    parts = [u / n for u, n in units]
    var = sum(parts)
    df = var * var / sum(p * p / (n - 1) for p, (_, n) in zip(parts, units)) if var > 0 else math.inf
    return est, math.sqrt(var), df, "Welch" if len(terms) > 1 else "one-sample", math.nan, units


def t_interval(est: float, se: float, df: float, alpha: float) -> tuple[float, float]:
    """The two-sided ``1 - alpha`` t interval of an estimate with standard error ``se`` and ``df`` degrees of
    freedom (``df`` infinite: the normal's)."""
    from scipy import stats

    if se == 0.0:
        return est, est
    half = float(stats.t.ppf(1 - alpha / 2, df)) * se
    return est - half, est + half


def t_tests(est: float, se: float, df: float, m: float) -> tuple[float, float, float]:
    """One-sided p-values of ``gap > +m``, ``gap < -m`` and ``gap within ±m`` (TOST) for an estimate with standard
    error ``se`` and ``df`` degrees of freedom (``df`` infinite: the normal)."""
    from scipy import stats

    if se == 0.0:
        return float(est <= m), float(est >= -m), float(not -m < est < m)
    dist = stats.norm if df == math.inf else stats.t(df)
    up, down = float(dist.sf((est - m) / se)), float(dist.cdf((est + m) / se))
    equiv = max(float(dist.sf((est + m) / se)), float(dist.cdf((est - m) / se))) if m > 0 else 1.0
    return up, down, equiv


def df_at(design: str, units: Sequence[tuple[float, int]], n: int) -> float:
    """Degrees of freedom of the test with ``n`` seeds in every cell (a partially paired design's: every seed in
    both cells, so paired)."""
    if design in ("paired", "partially paired"):
        return n - 1.0
    total = sum(u for u, _ in units)
    return (n - 1.0) * total * total / sum(u * u for u, _ in units) if total > 0 else math.inf


def power(gap: float, se: float, df: float, m: float, alpha: float = ALPHA) -> float:
    """The probability that the claim's test confirms (``gap > +m`` at one-sided ``alpha / 2``) when the true gap is
    ``gap``: the noncentral t's tail beyond the critical value, noncentrality ``(gap - m) / se``."""
    from scipy import stats

    if se == 0.0:
        return float(gap > m)
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    return float(stats.nct.sf(crit, df, (gap - m) / se))


def detectable_gap(se: float, df: float, m: float, alpha: float = ALPHA, target: float = POWER) -> float:
    """The true gap that the test confirms with power ``target``: ``m + se * lambda``, the noncentrality ``lambda``
    solving :func:`power` = ``target``."""
    from scipy import optimize

    if se != se or df != df:
        return math.nan
    if se == 0.0:
        return m
    lam = optimize.brentq(lambda x: power(m + x * se, se, df, m, alpha) - target, -50.0, 200.0, xtol=1e-10)
    return m + lam * se


def binomial_tests(successes: int, n: int, chance: float, m: float) -> tuple[float, float, float]:
    """Exact one-sided p-values (``scipy.stats.binom``) of ``rate > chance + m``, ``rate < chance - m`` and
    ``rate within chance ± m`` (rates and ``chance`` in percent) from ``successes`` of ``n`` trials."""
    from scipy import stats

    hi, lo = min(1.0, (chance + m) / 100), max(0.0, (chance - m) / 100)
    p_holds = float(stats.binom.sf(successes - 1, n, hi))
    p_rev = float(stats.binom.cdf(successes, n, lo))
    p_eq = max(float(stats.binom.sf(successes - 1, n, lo)), float(stats.binom.cdf(successes, n, hi))) \
        if m > 0 else 1.0
    return p_holds, p_rev, p_eq


def clopper_pearson(successes: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact two-sided ``1 - alpha`` interval of a rate (a fraction), Clopper-Pearson."""
    from scipy import stats

    ci = stats.binomtest(successes, n).proportion_ci(1 - alpha, method="exact")
    return ci.low, ci.high


def rate_critical(n: int, chance: float, m: float, alpha: float = ALPHA) -> int:
    """The fewest successes of ``n`` that confirm ``rate > chance + m`` (one-sided ``alpha / 2``); ``n + 1`` if none."""
    from scipy import stats

    p0 = min(1.0, (chance + m) / 100)
    return next((k for k in range(n + 1) if stats.binom.sf(k - 1, n, p0) < alpha / 2), n + 1)


def rate_power(rate: float, n: int, chance: float, m: float, alpha: float = ALPHA) -> float:
    """The probability that ``n`` trials confirm when the true rate is ``rate`` (percent)."""
    from scipy import stats

    return float(stats.binom.sf(rate_critical(n, chance, m, alpha) - 1, n, rate / 100))


def rate_detectable(n: int, chance: float, m: float, alpha: float = ALPHA, target: float = POWER) -> float:
    """The rate above chance (points) that ``n`` trials confirm with power ``target``; inf where none does."""
    from scipy import optimize

    if rate_power(100.0, n, chance, m, alpha) < target:
        return math.inf
    rate = optimize.brentq(lambda x: rate_power(x, n, chance, m, alpha) - target, chance, 100.0, xtol=1e-10)
    return rate - chance


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of a family (step-down: the i-th smallest times (m - i + 1), made monotone,
    capped at 1); NaN entries stay NaN and are not counted in m."""
    idx = sorted((i for i, p in enumerate(ps) if p == p), key=lambda i: ps[i])
    m, out, run = len(idx), [math.nan] * len(ps), 0.0
    for rank, i in enumerate(idx):
        run = max(run, min(1.0, (m - rank) * ps[i]))
        out[i] = run
    return out


class Tested(Protocol):
    """What :func:`seeds_needed` reads of a comparison (:class:`benchmarks.tables.claims.Result` is one)."""
    min_effect: float
    alpha: float
    design: str
    units: Units
    k_of_n: tuple[int, int, float] | None


def seeds_needed(r: Tested, gap: float) -> int | None:
    """How many seeds a side the comparison's own test (paired or Welch, its observed spread) needs to confirm a true
    gap of ``gap`` with power :data:`POWER` (the noncentral t; for a rate, the exact binomial power); None where no
    number can (``gap`` at most the minimum effect, no spread measured) or the search passes :data:`MAX_SEEDS`."""
    if not gap > r.min_effect:
        return None
    if r.k_of_n is not None:
        _, _, chance = r.k_of_n
        ok = lambda n: rate_power(chance + gap, n, chance, r.min_effect, r.alpha) >= POWER  # noqa: E731
    elif r.units:
        total = sum(u for u, _ in r.units)
        ok = lambda n: power(gap, math.sqrt(total / n), df_at(r.design, r.units, n), r.min_effect,  # noqa: E731
                             r.alpha) >= POWER
    else:
        return None
    lo, hi = 1, 2
    while not ok(hi):
        lo, hi = hi, 2 * hi
        if hi > MAX_SEEDS:
            return None
    while hi - lo > 1:  # power grows with n: the smallest n that reaches it
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def dersimonian_laird(gaps: Sequence[float], ses: Sequence[float]) -> tuple[float, float, float, float, float, float]:
    """The DerSimonian-Laird random-effects pool of per-set estimates ``gaps`` with standard errors ``ses`` (the
    estimator of ``statsmodels.stats.meta_analysis.combine_effects(method_re="dl")``): the pooled estimate, its
    standard error, the between-set variance tau², I² (the share of the spread between sets, %), Cochran's Q and its
    p-value. Needs at least two sets with positive standard errors."""
    from scipy import stats

    v = [s * s for s in ses]
    w = [1 / x for x in v]
    fixed = sum(wi * yi for wi, yi in zip(w, gaps)) / sum(w)
    q = sum(wi * (yi - fixed) ** 2 for wi, yi in zip(w, gaps))
    k = len(gaps)
    tau2 = max(0.0, (q - (k - 1)) / (sum(w) - sum(wi * wi for wi in w) / sum(w)))
    ws = [1 / (x + tau2) for x in v]
    est = sum(wi * yi for wi, yi in zip(ws, gaps)) / sum(ws)
    se = math.sqrt(1 / sum(ws))
    i2 = max(0.0, 100 * (q - (k - 1)) / q) if q > 0 else 0.0
    return est, se, tau2, i2, q, float(stats.chi2.sf(q, k - 1))


def hartung_knapp(gaps: Sequence[float], ses: Sequence[float]) -> tuple[float, float, float, float, float, float, float]:
    """The random-effects pool of :func:`dersimonian_laird` (its estimate and between-set variance tau²) with the
    Hartung-Knapp-Sidik-Jonkman variance: with ``w_i = 1 / (se_i² + tau²)`` and ``mu`` the pooled estimate,

        var_HK = sum w_i (y_i - mu)² / ((k - 1) sum w_i),

    read with Student's t on ``k - 1`` degrees of freedom (``statsmodels``' ``combine_effects(method_re="dl")``,
    the "random effect wls" row of ``summary_frame(use_t=True)``; IntHout, Ioannidis and Borm 2014). The normal
    interval on DerSimonian-Laird's ``1 / sum w_i`` ignores that tau² and the per-set variances are estimates, and
    covers the pooled effect well below 95 % with few sets (``tests/benchmarks/test_hksj.py`` simulates it). Returns
    the estimate, the HKSJ standard error, its degrees of freedom ``k - 1``, tau², I² (%), Cochran's Q and its
    p-value."""
    est, _, tau2, i2, q, q_p = dersimonian_laird(gaps, ses)
    w = [1 / (s * s + tau2) for s in ses]
    k = len(gaps)
    var = sum(wi * (yi - est) ** 2 for wi, yi in zip(w, gaps)) / ((k - 1) * sum(w))
    return est, math.sqrt(var), k - 1.0, tau2, i2, q, q_p


def information(looks: Sequence[tuple[int, int]]) -> list[float]:
    """The information fraction of each look of a claim (seeds a side ``(a, b)`` at each): the precision of a
    difference of two means, ``1 / (1/a + 1/b)`` (a paired or one-sample look, ``a == b``: proportional to ``a``), over
    the last look's."""
    info = [1 / (1 / a + 1 / b) for a, b in looks]
    return [i / info[-1] for i in info]


def spent(t: float, alpha: float, spending: str) -> float:
    """The one-sided alpha spent by information fraction ``t`` (Lan and DeMets 1983): O'Brien-Fleming-type
    ``2 - 2 Phi(z_{alpha/2} / sqrt(t))``, Pocock-type ``alpha ln(1 + (e - 1) t)``; both give ``alpha`` at ``t = 1``."""
    from scipy import stats

    if spending == "obrien-fleming":
        return float(2 - 2 * stats.norm.cdf(stats.norm.isf(alpha / 2) / math.sqrt(t))) if t > 0 else 0.0
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    raise ValueError(f"unknown alpha spending {spending!r}; choose obrien-fleming or pocock")


def boundaries(t: Sequence[float], alpha: float, spending: str) -> list[float]:
    """One-sided group-sequential critical values ``c_k`` at information fractions ``t`` (increasing, the last 1)
    spending ``alpha``: the chance under the null that the z-statistic (correlation ``sqrt(t_i / t_j)`` between looks)
    first crosses at look k is ``spent(t_k) - spent(t_{k-1})``. Computed as Armitage, McPherson and Rowe (1969) do:
    the score ``S_k = Z_k sqrt(t_k)`` is a Brownian motion, and the density of the paths that have not crossed is
    carried from look to look by the normal kernel of the increment (trapezoidal rule on a fine grid)."""
    return list(_boundaries(tuple(float(x) for x in t), float(alpha), spending))


GRID = 2001  # points of the continuation region at each look


@functools.lru_cache(maxsize=256)
def _boundaries(t: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
    import numpy as np
    from scipy import optimize, stats

    c = [float(stats.norm.isf(spent(t[0], alpha, spending)))]
    sd = math.sqrt(t[0])
    u = np.linspace(-10 * sd, c[0] * sd, GRID)  # the scores that have not crossed at look 1
    f = stats.norm.pdf(u, scale=sd)  # their density (GRID,)
    wts = np.full(GRID, u[1] - u[0])
    wts[[0, -1]] /= 2  # trapezoid
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        mass = wts * f  # (GRID,)
        want = spent(t[k], alpha, spending) - spent(t[k - 1], alpha, spending)
        ck = optimize.brentq(lambda x: float(mass @ stats.norm.sf((x * math.sqrt(t[k]) - u) / step)) - want,
                             -10.0, 40.0, xtol=1e-10)
        c.append(ck)
        s = np.linspace(-10 * math.sqrt(t[k]), ck * math.sqrt(t[k]), GRID)
        f = stats.norm.pdf((s[:, None] - u[None, :]) / step) @ mass / step  # (GRID,) the density at look k
        u = s
        wts = np.full(GRID, s[1] - s[0])
        wts[[0, -1]] /= 2
    return tuple(c)


def final_alpha(t: Sequence[float], alpha: float = ALPHA, spending: str = "obrien-fleming") -> float:
    """The two-sided nominal alpha of the last look of a claim read at information fractions ``t``, each of its
    one-sided tests spending ``alpha / 2`` over the looks (:func:`boundaries`): a verdict at the last look holds when
    its two-sided p-value is below this. One look: ``alpha``."""
    from scipy import stats

    if len(t) < 2:
        return alpha
    return 2 * float(stats.norm.sf(boundaries(t, alpha / 2, spending)[-1]))


def normal_interval(est: float, se: float, alpha: float) -> tuple[float, float]:
    """The two-sided ``1 - alpha`` normal interval of an estimate."""
    from scipy import stats

    z = float(stats.norm.ppf(1 - alpha / 2))
    return est - z * se, est + z * se


__all__ = ["ALPHA", "MAX_SEEDS", "POWER", "Tested", "Units", "binomial_tests", "blocks", "clopper_pearson", "contrast",
           "boundaries", "dersimonian_laird", "detectable_gap", "df_at", "final_alpha", "hartung_knapp", "holm",
           "information", "spent", "normal_interval", "power", "rate_critical",
           "rate_detectable", "rate_power", "seeds_needed", "std", "t_interval", "t_tests"]
