"""The pooled rows' interval (benchmarks/stats.py: hartung_knapp; claims.pool): DerSimonian-Laird's tau² with the
Hartung-Knapp-Sidik-Jonkman variance and Student's t on k - 1 df, against the formula written out, against
statsmodels, and its coverage by simulation beside the normal interval it replaced."""
from __future__ import annotations

import math
import random

import numpy as np
from scipy import stats

from benchmarks.stats import ALPHA, dersimonian_laird, hartung_knapp, normal_interval, t_interval
from benchmarks.tables.claims import Claim, pool

C = Claim("t", "a", "b", "m")


def naive_hksj(y: list[float], s: list[float]) -> tuple[float, float, float]:
    """From the formulas: DL's tau² by the method of moments, then var = sum w (y - mu)² / ((k - 1) sum w)."""
    k = len(y)
    w = [1 / (x * x) for x in s]
    mu_fe = sum(a * b for a, b in zip(w, y)) / sum(w)
    q = sum(a * (b - mu_fe) ** 2 for a, b in zip(w, y))
    tau2 = max(0.0, (q - (k - 1)) / (sum(w) - sum(a * a for a in w) / sum(w)))
    ws = [1 / (x * x + tau2) for x in s]
    mu = sum(a * b for a, b in zip(ws, y)) / sum(ws)
    var = sum(a * (b - mu) ** 2 for a, b in zip(ws, y)) / ((k - 1) * sum(ws))
    return mu, math.sqrt(var), tau2


def test_hksj_is_the_formula_and_statsmodels() -> None:
    from statsmodels.stats.meta_analysis import combine_effects

    rng = random.Random(5)
    for k in (2, 3, 4, 8):
        y = [rng.gauss(1.0, 1.5) for _ in range(k)]
        s = [rng.uniform(0.3, 1.5) for _ in range(k)]
        est, se, df, tau2, *_ = hartung_knapp(y, s)
        mu, se_naive, tau2_naive = naive_hksj(y, s)
        assert math.isclose(est, mu, rel_tol=1e-12) and math.isclose(se, se_naive, rel_tol=1e-12)
        assert math.isclose(tau2, tau2_naive, rel_tol=1e-12, abs_tol=1e-15) and df == k - 1
        ref = combine_effects(np.array(y), np.array(s) ** 2, method_re="dl", use_t=True)
        if ref.tau2 < 0:  # statsmodels leaves DL's tau² untruncated (here at k = 2); ours is max(0, .), as DL's
            continue
        assert math.isclose(se, math.sqrt(ref.var_hksj_re), rel_tol=1e-9)
        lo, hi = ref.conf_int(alpha=ALPHA, use_t=True)[3]  # the random-effects row with the HKSJ scale
        got = t_interval(est, se, df, ALPHA)
        assert math.isclose(got[0], lo, rel_tol=1e-9) and math.isclose(got[1], hi, rel_tol=1e-9)


def test_pool_reads_the_hksj_interval_and_keeps_dl_heterogeneity() -> None:
    from statsmodels.stats.meta_analysis import combine_effects

    rng = random.Random(3)
    parts = [C.judge([rng.gauss(mu, 1) for _ in range(5)], [rng.gauss(0, 1) for _ in range(5)])
             for mu in (0.2, 1.5, 0.8, -0.4)]
    got = pool(parts)
    y, v = np.array([r.gap for r in parts]), np.array([r.se ** 2 for r in parts])
    ref = combine_effects(y, v, method_re="dl", use_t=True)
    frame = ref.summary_frame(alpha=ALPHA, use_t=True)
    row = frame.loc["random effect wls"]
    assert math.isclose(got.result.gap, ref.mean_effect_re, rel_tol=1e-9)
    assert math.isclose(got.result.ci[0], row["ci_low"], rel_tol=1e-9)
    assert math.isclose(got.result.ci[1], row["ci_upp"], rel_tol=1e-9)
    assert got.result.df == 3 and got.result.design == "random effects (HKSJ)"
    assert math.isclose(got.tau2, ref.tau2, rel_tol=1e-9, abs_tol=1e-12) and math.isclose(got.q, ref.q, rel_tol=1e-9)
    # its p-values are the t's on k - 1 df against the parts' minimum effect
    m = parts[0].min_effect
    assert math.isclose(got.result.p_holds, stats.t.sf((got.result.gap - m) / got.result.se, 3), rel_tol=1e-9)
    assert pool(parts[:1]) is None


def test_hksj_covers_where_the_normal_interval_does_not() -> None:
    """Four sets, true between-set spread tau = 1, per-set standard errors known: HKSJ's 95 % interval covers the
    pooled effect close to 95 % of the time (about 93 % here: tau² is estimated); DerSimonian-Laird's normal interval
    well under (about 87 %; IntHout et al. 2014)."""
    rng = np.random.default_rng(11)
    reps, k, mu, tau = 800, 4, 0.7, 1.0
    ses = np.array([0.4, 0.6, 0.8, 1.0])
    hk = dl = 0
    for _ in range(reps):
        y = rng.normal(mu, np.sqrt(tau ** 2 + ses ** 2))
        est, se, df, *_ = hartung_knapp(list(y), list(ses))
        lo, hi = t_interval(est, se, df, ALPHA)
        hk += lo <= mu <= hi
        est_dl, se_dl, *_ = dersimonian_laird(list(y), list(ses))
        lo, hi = normal_interval(est_dl, se_dl, ALPHA)
        dl += lo <= mu <= hi
    mc = 3 * math.sqrt(0.95 * 0.05 / reps)  # three Monte Carlo standard errors
    assert 0.95 - 0.025 - mc < hk / reps < 0.95 + mc, hk / reps
    assert dl / reps < hk / reps - 0.03 and dl / reps < 0.95 - mc, (dl / reps, hk / reps)
