"""The claims rule (benchmarks/tables/claims.py): each statistic against scipy or statsmodels, and the verdicts on
constructed seeds that exercise each of them."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from benchmarks.stats import ALPHA, POWER, detectable_gap, holm, partially_paired, power, seeds_needed, std
from benchmarks.tables.claims import MIN_EFFECT, Claim, Seeded, Verdict, combine, decide, final, mean_std, pool

C = Claim("t", "a", "b", "m")
M = MIN_EFFECT


def seeded(values, seeds=None, data="d"):
    """Per-seed values named as a table names them: (seed, data set)."""
    seeds = range(len(values)) if seeds is None else seeds
    return Seeded(values, [(s, data) for s in seeds])


def noisy(n, mean, sd, shared, rng):
    """``n`` seeds of an arm: a seed effect shared with the other arm plus the arm's own noise."""
    return [mean + s + rng.gauss(0, sd) for s in shared[:n]]


# ----------------------------------------------------------------------------- the design and the tests

def test_the_design_follows_the_runs_identities():
    """the same seeds on the same data -> paired; other seeds, another data set, a repeated seed or plain lists ->
    Welch (the choice is read from the ids, never passed by hand)"""
    a, b = [1.0, 2.0, 3.5, 4.0], [0.5, 1.8, 2.9, 3.1]
    assert C.judge(seeded(a), seeded(b)).design == "paired"
    assert C.judge(seeded(a), seeded(b[::-1], seeds=[3, 2, 1, 0])).design == "paired"  # order does not matter
    assert C.judge(seeded(a), seeded(b, seeds=[4, 5, 6, 7])).design == "Welch"
    assert C.judge(seeded(a), seeded(b, data="other")).design == "Welch"
    assert C.judge(seeded(a), seeded(b, seeds=[0, 0, 1, 2])).design == "Welch"
    assert C.judge(a, b).design == "Welch" and C.judge(seeded(a), b).design == "Welch"
    # some seeds shared (at least two): partially paired; one shared: Welch
    assert C.judge(seeded(a), seeded(b[:3] + [9.0, 9.5], seeds=[0, 1, 2, 5, 6])).design == "partially paired"
    assert C.judge(seeded(a), seeded(b, seeds=[0, 5, 6, 7])).design == "Welch"


def _partover(a, b):
    """A naive T_new2 (Derrick, Toher and White 2017), written from the paper's equations on the stacked layout of
    R's ``Partover.test(stacked=TRUE)``: one row a seed, NaN where an arm did not run it."""
    seeds = sorted(set(a) | set(b))
    x = np.array([a.get(s, np.nan) for s in seeds])
    y = np.array([b.get(s, np.nan) for s in seeds])
    both = ~np.isnan(x) & ~np.isnan(y)
    x1, x2 = x[~np.isnan(x)], y[~np.isnan(y)]
    n1, n2, n12 = len(x1), len(x2), int(both.sum())
    na, nb = n1 - n12, n2 - n12
    r = np.corrcoef(x[both], y[both])[0, 1]
    s1, s2 = x1.std(ddof=1), x2.std(ddof=1)
    denom = math.sqrt(s1 ** 2 / n1 + s2 ** 2 / n2 - 2 * r * s1 * s2 * n12 / (n1 * n2))
    gamma = (s1 ** 2 / n1 + s2 ** 2 / n2) ** 2 / ((s1 ** 2 / n1) ** 2 / (n1 - 1) + (s2 ** 2 / n2) ** 2 / (n2 - 1))
    df = (n12 - 1) + (gamma - n12 + 1) / (na + nb + 2 * n12) * (na + nb)
    return x1.mean() - x2.mean(), denom, df, r


def test_partially_paired_is_the_partially_overlapping_samples_t_test():
    """two arms sharing 5 of 7 and 5 of 6 seeds: T_new2's gap (every seed's value), standard error, degrees of freedom
    and correlation; its interval is narrower than Welch's where the shared
    seed effect is large"""
    rng = random.Random(3)
    effect = {s: rng.gauss(0, 2.0) for s in range(8)}
    a = {s: 46.0 + effect[s] + rng.gauss(0, 0.5) for s in range(7)}
    b = {s: 45.0 + effect[s] + rng.gauss(0, 0.5) for s in [0, 1, 2, 3, 4, 7]}
    est, se, df, r = _partover(a, b)
    res = C.judge(seeded(list(a.values()), list(a)), seeded(list(b.values()), list(b)))
    assert res.design == "partially paired" and res.ns == (7, 6)
    assert math.isclose(res.gap, est, rel_tol=1e-12) and math.isclose(res.se, se, rel_tol=1e-12)
    assert math.isclose(res.df, df, rel_tol=1e-12) and math.isclose(res.r, r, rel_tol=1e-12)
    assert math.isclose(res.p_holds, stats.t.sf((est - M) / se, df), rel_tol=1e-9)
    assert res.design_text() == f"partially paired (5 seeds shared), r = {r:+.2f}"
    welch = C.judge(list(a.values()), list(b.values()))
    assert res.ci[1] - res.ci[0] < 0.75 * (welch.ci[1] - welch.ci[0])


def test_partially_paired_reduces_to_the_paired_test_and_keeps_its_size():
    """with every seed shared the formula is scipy's paired test (standard error and df). Under the null, on 7 and 6
    seeds sharing 5, the test (as :func:`partially_paired` computes it, vectorised over 4000 draws; each draw's
    values checked against it on a few): without a seed effect its two-sided 5 % test rejects about 5 % of the time;
    with a large shared seed effect (r about 0.94) it is conservative (about 1.5 %), never above 5 %, and rejects far
    more often than Welch's test, which ignores the seeds (under 0.1 %)"""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=6), rng.normal(size=6)
    est, se, df, _, _ = partially_paired([(1.0, seeded(list(x))), (-1.0, seeded(list(y)))],
                                         [(s, "d") for s in range(6)])
    ref = stats.ttest_rel(x, y)
    assert math.isclose(est / se, ref.statistic, rel_tol=1e-9) and math.isclose(df, ref.df)
    only_b, reps = [0, 1, 2, 3, 4, 7], 4000
    ids_a, ids_b = [(s, "d") for s in range(7)], [(s, "d") for s in only_b]
    for seed_sd, low, high in ((0.0, 0.035, 0.065), (2.0, 0.005, 0.05)):
        effect = rng.normal(0, seed_sd, size=(reps, 8))
        a = effect[:, :7] + rng.normal(0, 0.5, size=(reps, 7))
        b = effect[:, only_b] + rng.normal(0, 0.5, size=(reps, 6))
        s1, s2 = a.std(axis=1, ddof=1), b.std(axis=1, ddof=1)
        pa, pb = a[:, :5] - a[:, :5].mean(1, keepdims=True), b[:, :5] - b[:, :5].mean(1, keepdims=True)
        r = (pa * pb).sum(1) / np.sqrt((pa * pa).sum(1) * (pb * pb).sum(1))
        v1, v2 = s1 ** 2 / 7, s2 ** 2 / 6
        se = np.sqrt(v1 + v2 - 2 * r * s1 * s2 * 5 / 42)
        df = 4 + ((v1 + v2) ** 2 / (v1 ** 2 / 6 + v2 ** 2 / 5) - 4) * 3 / 13  # 2 + 1 seeds unshared
        est = a.mean(1) - b.mean(1)
        for k in range(3):  # the vectorised formula is the suite's
            ours = partially_paired([(1.0, Seeded(a[k], ids_a)), (-1.0, Seeded(b[k], ids_b))], ids_a[:5])
            assert np.allclose(ours[:3], (est[k], se[k], df[k]), rtol=1e-12)
        rejected = float(np.mean(2 * stats.t.sf(np.abs(est) / se, df) < 0.05))
        welch = float(np.mean(stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05))
        assert low < rejected < high, (seed_sd, rejected)
        if seed_sd:
            assert rejected > 5 * max(welch, 1 / reps), (rejected, welch)


def test_paired_test_is_scipys_one_sample_test_of_the_seed_differences():
    rng = random.Random(1)
    shared = [rng.gauss(0, 3) for _ in range(6)]
    a, b = noisy(6, 71.0, 0.4, shared, rng), noisy(6, 70.0, 0.4, shared, rng)
    r = C.judge(seeded(a), seeded(b))
    d = np.subtract(a, b)
    assert r.design == "paired" and math.isclose(r.gap, d.mean())
    assert math.isclose(r.p_holds, stats.ttest_1samp(d, M, alternative="greater").pvalue, rel_tol=1e-9)
    assert math.isclose(r.p_reverse, stats.ttest_1samp(d, -M, alternative="less").pvalue, rel_tol=1e-9)
    ci = stats.ttest_rel(a, b).confidence_interval(1 - ALPHA)
    assert math.isclose(r.ci[0], ci.low, rel_tol=1e-9) and math.isclose(r.ci[1], ci.high, rel_tol=1e-9)
    assert math.isclose(r.r, stats.pearsonr(a, b).statistic, rel_tol=1e-9)
    # the shared seed effect is what pairing removes: Welch on the same numbers is far wider
    w = C.judge(a, b)
    assert w.design == "Welch" and w.ci[1] - w.ci[0] > 3 * (r.ci[1] - r.ci[0])


def test_welch_is_scipys_unequal_variance_test():
    a, b = [10.0, 11.0, 12.5, 13.0, 12.0], [9.0, 9.5, 10.5, 11.0]
    r = C.judge(a, b)
    assert math.isclose(r.p_holds, stats.ttest_ind(np.subtract(a, M), b, equal_var=False,
                                                   alternative="greater").pvalue, rel_tol=1e-9)
    assert math.isclose(r.p_reverse, stats.ttest_ind(np.add(a, M), b, equal_var=False,
                                                     alternative="less").pvalue, rel_tol=1e-9)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(1 - ALPHA)
    assert math.isclose(r.ci[0], ci.low, rel_tol=1e-9) and math.isclose(r.ci[1], ci.high, rel_tol=1e-9)


def test_contrast_of_four_cells_uses_welch_satterthwaite_or_the_seed_differences():
    """(a - b) - (c - d): unpaired, Welch-Satterthwaite with every cell's variance; paired, the one-sample test of
    the per-seed contrast"""
    cells = [[5.0, 5.5, 6.0, 5.2], [3.0, 3.4, 2.8, 3.3], [4.0, 4.1, 3.8, 4.4], [3.5, 3.3, 3.9, 3.6]]
    coef = [1.0, -1.0, -1.0, 1.0]
    r = C.judge_contrast(list(zip(coef, cells)))
    v = [c * c * np.var(x, ddof=1) / len(x) for c, x in zip(coef, cells)]
    df = sum(v) ** 2 / sum(x * x / (len(c) - 1) for x, c in zip(v, cells))
    est = sum(c * np.mean(x) for c, x in zip(coef, cells))
    assert math.isclose(r.df, df) and math.isclose(r.se, math.sqrt(sum(v)))
    assert math.isclose(r.p_holds, stats.t.sf((est - M) / math.sqrt(sum(v)), df), rel_tol=1e-9)
    p = C.judge_contrast([(c, seeded(x)) for c, x in zip(coef, cells)])
    d = sum(c * np.asarray(x) for c, x in zip(coef, cells))
    assert p.design == "paired" and math.isclose(p.p_holds, stats.ttest_1samp(d, M, alternative="greater").pvalue)


def test_equivalence_is_statsmodels_two_one_sided_tests():
    from statsmodels.stats.weightstats import ttost_ind, ttost_paired

    a, b = [70.1, 70.4, 69.8, 70.0, 70.3], [70.0, 70.2, 69.9, 70.1, 70.1]
    assert math.isclose(C.judge(seeded(a), seeded(b)).p_equiv, ttost_paired(np.array(a), np.array(b), -M, M)[0],
                        rel_tol=1e-9)
    assert math.isclose(C.judge(a, b).p_equiv, ttost_ind(np.array(a), np.array(b), -M, M, usevar="unequal")[0],
                        rel_tol=1e-9)


def test_the_p_value_is_two_sided_and_names_its_hypothesis():
    r = C.judge([3.0, 3.2, 2.9, 3.1], [1.0, 1.1, 0.9, 1.2])
    assert math.isclose(r.p(), 2 * r.p_holds) and r.direction() == "gap > +0.5"
    assert r.p_text() == f"p(gap > +0.5) = {2 * r.p_holds:.3g}"
    rev = C.judge([1.0, 1.1, 0.9, 1.2], [3.0, 3.2, 2.9, 3.1])
    assert rev.direction() == "gap < -0.5" and math.isclose(rev.p(), 2 * rev.p_reverse)
    eq = C.judge([1.0, 1.05, 0.95, 1.0], [1.0, 1.02, 0.98, 1.01])
    assert eq.direction() == "gap within ±0.5" and math.isclose(eq.p(), 2 * eq.p_equiv)
    assert Claim("t", "a", "b", "m", min_effect=0.0).judge([1.0, 2.0, 3.0], [0.0, 1.0, 1.5]).direction() == "gap > 0"


# ----------------------------------------------------------------------------- the verdicts on constructed seeds

def test_each_verdict_on_constructed_seeds():
    """the interval decides against the minimum effect: above +m confirmed, below -m contradicted, inside +-m
    equivalent, else not confirmed; a side with fewer than 3 seeds is inconclusive, whatever the gap"""
    cases = {
        Verdict.CONFIRMED: ([72.0, 72.2, 71.9, 72.1], [70.0, 70.1, 69.9, 70.2]),
        Verdict.CONTRADICTED: ([70.0, 70.1, 69.9, 70.2], [72.0, 72.2, 71.9, 72.1]),
        Verdict.EQUIVALENT: ([70.0, 70.1, 69.9, 70.05], [70.02, 70.08, 69.95, 70.0]),
        Verdict.NOT_CONFIRMED: ([70.0, 72.0, 68.0, 71.0], [70.5, 69.0, 71.0, 68.5]),
        Verdict.INCONCLUSIVE: ([90.0, 90.1], [50.0, 50.1, 50.2]),
    }
    for verdict, (a, b) in cases.items():
        r = C.judge(seeded(a[:len(b)]) if len(a) == len(b) else a, seeded(b) if len(a) == len(b) else b)
        assert r.verdict is verdict, (verdict, r)
        if verdict is Verdict.CONFIRMED:
            assert r.ci[0] > M
        elif verdict is Verdict.CONTRADICTED:
            assert r.ci[1] < -M
        elif verdict is Verdict.EQUIVALENT:
            assert -M < r.ci[0] and r.ci[1] < M


def test_a_significant_gap_below_the_minimum_effect_is_not_confirmed():
    """a gap of +0.6 whose interval clears zero but not +0.5 -> not confirmed (the point estimate clearing the minimum
    effect is not enough)"""
    r = C.judge(seeded([70.6, 70.9, 70.3, 70.7, 70.5]), seeded([70.0, 70.1, 69.9, 70.2, 69.8]))
    assert r.gap > M and 0 < r.ci[0] < M and r.verdict is Verdict.NOT_CONFIRMED


def test_lower_is_better_flips_the_direction():
    c = Claim("t", "a", "b", "loss", higher_is_better=False)
    assert c.judge([1.0, 1.1, 0.9], [3.0, 3.1, 2.9]).verdict is Verdict.CONFIRMED


def test_zero_variance_cells_decide_by_the_interval():
    assert C.judge([2.0, 2.0, 2.0], [1.0, 1.0, 1.0]).verdict is Verdict.CONFIRMED
    assert C.judge([1.2, 1.2, 1.2], [1.0, 1.0, 1.0]).verdict is Verdict.EQUIVALENT


def test_a_verdict_that_does_not_survive_holm_is_nominal():
    for v in (Verdict.CONFIRMED, Verdict.CONTRADICTED, Verdict.EQUIVALENT):
        assert final(v, 0.01) is v
        assert final(v, 0.2) is not v and "confirmed" not in str(final(v, 0.2)) and "nominal" in str(final(v, 0.2))
    assert final(Verdict.NOT_CONFIRMED, 0.2) is Verdict.NOT_CONFIRMED


def test_holm_is_statsmodels_holm():
    from statsmodels.stats.multitest import multipletests

    ps = [0.03, 0.001, 0.2, 0.04, 0.011, 0.5]
    assert np.allclose(holm(ps), multipletests(ps, method="holm")[1])
    got = holm([0.03, float("nan"), 0.01])
    assert math.isnan(got[1]) and np.allclose([got[0], got[2]], multipletests([0.03, 0.01], method="holm")[1])


# ----------------------------------------------------------------------------- power

def test_power_is_the_noncentral_t_of_statsmodels():
    """paired: statsmodels' one-sample TTestPower of the effect (gap - m) / sd at one-sided alpha / 2; the detectable
    gap has power 0.8, and the seeds a side are statsmodels' solved n rounded up"""
    from statsmodels.stats.power import TTestPower

    a, b = [71.2, 70.4, 72.0, 70.9, 71.5], [70.0, 69.9, 70.8, 70.1, 70.2]
    r = C.judge(seeded(a), seeded(b))
    sd = float(np.std(np.subtract(a, b), ddof=1))
    for gap in (0.8, 1.2, 2.0):
        want = TTestPower().power((gap - M) / sd, nobs=5, alpha=ALPHA / 2, alternative="larger")
        assert math.isclose(power(gap, r.se, r.df, M), want, rel_tol=1e-7)
    assert math.isclose(power(r.detectable, r.se, r.df, M), POWER, rel_tol=1e-7)
    n = TTestPower().solve_power((1.0 - M) / sd, alpha=ALPHA / 2, power=POWER, alternative="larger")
    assert seeds_needed(r, 1.0) == math.ceil(n)
    assert seeds_needed(r, M) is None and seeds_needed(r, 0.3) is None  # at most the minimum effect: no n confirms


def test_welch_power_and_seeds_needed():
    """Welch's detectable gap solves the noncentral t at its own degrees of freedom; the seeds needed reach power 0.8
    and one seed fewer does not"""
    a, b = [10.0, 11.0, 12.5, 13.0, 12.0], [9.0, 9.5, 10.5, 11.0, 10.0]
    r = C.judge(a, b)
    crit = stats.t.ppf(1 - ALPHA / 2, r.df)
    assert math.isclose(stats.nct.sf(crit, r.df, (r.detectable - M) / r.se), POWER, rel_tol=1e-7)
    assert math.isclose(detectable_gap(r.se, r.df, M), r.detectable)
    n = seeds_needed(r, 4.0)
    units = [np.var(a, ddof=1), np.var(b, ddof=1)]

    def pw(k):
        se = math.sqrt(sum(units) / k)
        df = (k - 1) * sum(units) ** 2 / sum(u * u for u in units)
        return stats.nct.sf(stats.t.ppf(1 - ALPHA / 2, df), df, (4.0 - M) / se)
    assert n is not None and pw(n) >= POWER > pw(n - 1)


def test_a_rate_against_chance_is_the_exact_binomial_test():
    from statsmodels.stats.proportion import proportion_confint

    c = Claim("order", "x", "chance", "ordered")
    chance = 100 / 3
    ten = c.judge_rate(10, 10, chance)
    assert ten.verdict is Verdict.CONFIRMED
    assert math.isclose(ten.p_holds, stats.binomtest(10, 10, (chance + M) / 100, alternative="greater").pvalue)
    lo, hi = proportion_confint(10, 10, alpha=ALPHA, method="beta")
    assert math.isclose(ten.ci[0], 100 * lo - chance) and math.isclose(ten.ci[1], 100 * hi - chance)
    assert c.judge_rate(5, 10, chance).verdict is Verdict.NOT_CONFIRMED
    assert c.judge_rate(0, 10, chance).verdict is Verdict.CONTRADICTED
    assert c.judge_rate(2, 2, chance).verdict is Verdict.INCONCLUSIVE
    # the detectable gap is at power 0.8: the exact test's power there, not the critical count's rate
    k = next(k for k in range(11) if stats.binomtest(k, 10, (chance + M) / 100, alternative="greater").pvalue
             < ALPHA / 2)
    assert math.isclose(stats.binom.sf(k - 1, 10, (chance + ten.detectable) / 100), POWER, rel_tol=1e-6)


# ----------------------------------------------------------------------------- claims of parts, pooling

def test_a_claim_of_parts_is_one_comparison():
    """every part must hold: the largest p (intersection-union); one reversed part decides a reversal, chosen from
    two (Bonferroni: p doubled, the interval at 97.5 %); k of N: the k-th smallest p times C(N, k)"""
    up = C.judge([3.0, 3.2, 2.9, 3.1], [1.0, 1.1, 0.9, 1.2])
    up2 = C.judge([2.5, 2.9, 2.7, 3.0], [1.0, 1.1, 0.9, 1.2])
    down = C.judge([1.0, 1.1, 0.9, 1.2], [3.0, 3.2, 2.9, 3.1])
    verdict, shown = decide([up, up2])
    assert verdict is Verdict.CONFIRMED and math.isclose(shown.p(), 2 * max(up.p_holds, up2.p_holds))
    verdict, shown = decide([up, down])
    assert verdict is Verdict.CONTRADICTED and shown.bonferroni == 2
    assert math.isclose(shown.p(), 4 * down.p_reverse)
    ci = stats.ttest_ind([1.0, 1.1, 0.9, 1.2], [3.0, 3.2, 2.9, 3.1], equal_var=False).confidence_interval(
        1 - ALPHA / 2)
    assert math.isclose(shown.ci[0], ci.low) and math.isclose(shown.ci[1], ci.high)
    tie = C.judge([1.0, 2.0, 0.0, 1.5], [1.0, 0.5, 1.5, 1.0])
    parts = [up, up2, tie, tie, tie, tie]
    verdict, shown = decide(parts, need=2, total=6)
    assert math.isclose(shown.p(), min(1.0, 2 * math.comb(6, 2) * max(up.p_holds, up2.p_holds)))
    assert combine([]) is Verdict.NOT_MEASURED
    short = C.judge([3.0, 3.1], [1.0, 1.1, 0.9])
    assert combine([up, short]) is Verdict.INCONCLUSIVE  # the part with two seeds could still make it


def test_random_effects_pool_is_statsmodels_dersimonian_laird():
    from statsmodels.stats.meta_analysis import combine_effects

    rng = random.Random(3)
    parts = [C.judge([rng.gauss(mu, 1) for _ in range(5)], [rng.gauss(0, 1) for _ in range(5)])
             for mu in (0.2, 1.5, 0.8, -0.4)]
    got = pool(parts)
    ref = combine_effects(np.array([r.gap for r in parts]), np.array([r.se ** 2 for r in parts]), method_re="dl")
    assert math.isclose(got.result.gap, ref.mean_effect_re, rel_tol=1e-9)
    assert math.isclose(got.result.se, math.sqrt(ref.var_hksj_re), rel_tol=1e-9)  # issue 77: HKSJ, not DL's
    assert math.isclose(got.tau2, ref.tau2, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(got.q, ref.q, rel_tol=1e-9)
    lo, hi = ref.conf_int(alpha=ALPHA, use_t=True)[3]  # the random-effects row with the HKSJ scale, t on k - 1 df
    assert math.isclose(got.result.ci[0], lo, rel_tol=1e-9) and math.isclose(got.result.ci[1], hi, rel_tol=1e-9)
    assert math.isclose(got.i2, 100 * max(0.0, (ref.q - 3) / ref.q), rel_tol=1e-9)
    assert pool(parts[:1]) is None


def test_one_std_definition_and_formatter():
    assert std([1.0, 2.0, 3.0]) == pytest.approx(1.0) and math.isnan(std([1.0]))
    assert mean_std([0.5, 0.52, 0.54], digits=1, scale=100) == "52.0 ± 2.0 (n=3)"
    assert mean_std([], empty="not run") == "not run"
