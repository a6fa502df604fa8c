"""The one claims rule (benchmarks/tables/claims.py) on constructed cases."""
import math

import pytest
from scipy import stats

from benchmarks.tables.claims import Claim, Verdict, combine, mean_std, std, welch

C = Claim("text/simcse", "macl", "infonce", "avg", "MACL ≥ SimCSE-InfoNCE on STS")


def test_two_seeds_and_a_twentieth_of_a_point_is_inconclusive():
    """The make-demo case: 87.06 ± 0.02 vs 87.01 ± 0.02 from 2 seeds each is no evidence either way."""
    r = C.judge([87.04, 87.08], [86.99, 87.03])
    assert mean_std([87.04, 87.08]) == "87.06 ± 0.03 (n=2)"
    assert r.verdict is Verdict.INCONCLUSIVE and str(r.verdict) == "inconclusive (n < 3)"
    assert r.gap == pytest.approx(0.05)
    # even a huge gap from 2 seeds says nothing
    assert C.judge([95.0, 95.1], [80.0, 80.1]).verdict is Verdict.INCONCLUSIVE
    assert C.judge([95.0, 95.1, 95.2], [80.0, 80.1]).verdict is Verdict.INCONCLUSIVE


def test_clear_three_seed_win_is_confirmed():
    r = C.judge([88.0, 88.3, 87.9], [86.0, 86.2, 85.9])
    assert r.verdict is Verdict.CONFIRMED and r.p < 0.01 and r.ns == (3, 3)


def test_three_seed_tie_is_not_confirmed():
    r = C.judge([87.0, 87.5, 86.5], [87.1, 86.6, 87.4])
    assert r.verdict is Verdict.NOT_CONFIRMED and r.p > 0.05 and r.p_reverse > 0.05


def test_reversed_case_is_contradicted():
    r = C.judge([86.0, 86.2, 85.9], [88.0, 88.3, 87.9])
    assert r.verdict is Verdict.CONTRADICTED and r.gap < 0


def test_significant_but_below_the_minimum_effect_is_not_confirmed():
    r = C.judge([87.10, 87.11, 87.12], [87.00, 87.01, 87.02])  # p tiny, gap 0.1 < 0.5
    assert r.p < 1e-3 and r.verdict is Verdict.NOT_CONFIRMED
    assert Claim("t", "a", "b", "m", min_effect=0.05).judge([87.10, 87.11, 87.12], [87.00, 87.01, 87.02]).verdict \
        is Verdict.CONFIRMED


def test_lower_is_better_flips_the_direction():
    lower = Claim("t", "a", "b", "loss", higher_is_better=False)
    assert lower.judge([1.0, 1.1, 0.9], [3.0, 3.1, 2.9]).verdict is Verdict.CONFIRMED
    assert C.judge([1.0, 1.1, 0.9], [3.0, 3.1, 2.9]).verdict is Verdict.CONTRADICTED


def test_p_value_is_scipys_one_sided_welch_test():
    a, b = [88.0, 87.1, 88.9, 87.5], [86.0, 87.6, 85.2]
    r = C.judge(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
    assert r.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert r.p_reverse == pytest.approx(stats.ttest_ind(a, b, equal_var=False, alternative="less").pvalue, rel=1e-10)


def test_contrast_of_four_cells_uses_welch_satterthwaite():
    """(a1 - b1) - (a2 - b2) > 0: the variance of the contrast is the sum of the cells' var/n."""
    cells = [[0.5, 0.6, 0.55], [0.4, 0.45, 0.42], [0.7, 0.72, 0.71], [0.69, 0.70, 0.71]]
    est, p, _, df = welch([(1, cells[0]), (-1, cells[1]), (-1, cells[2]), (1, cells[3])])
    v = [stats.tvar(c) / 3 for c in cells]
    assert est == pytest.approx(sum(s * sum(c) / 3 for s, c in zip((1, -1, -1, 1), cells)))
    assert df == pytest.approx(sum(v) ** 2 / sum(x * x / 2 for x in v))
    assert p == pytest.approx(stats.t.sf(est / math.sqrt(sum(v)), df))


def test_zero_variance_cells_decide_by_the_sign():
    assert C.judge([90.0] * 3, [80.0] * 3).verdict is Verdict.CONFIRMED
    assert C.judge([80.0] * 3, [80.0] * 3).verdict is Verdict.NOT_CONFIRMED
    assert C.judge([70.0] * 3, [80.0] * 3).verdict is Verdict.CONTRADICTED


def test_combine_over_data_sets():
    win = C.judge([88.0, 88.3, 87.9], [86.0, 86.2, 85.9])
    tie = C.judge([87.0, 87.5, 86.5], [87.1, 86.6, 87.4])
    lose = C.judge([86.0, 86.2, 85.9], [88.0, 88.3, 87.9])
    few = C.judge([88.0, 88.3], [86.0, 86.2])
    assert combine([win, win, tie], need=2) is Verdict.CONFIRMED
    assert combine([win, tie, few], need=2) is Verdict.INCONCLUSIVE  # the 2-seed set could still make it
    assert combine([win, tie, tie], need=2) is Verdict.NOT_CONFIRMED
    assert combine([win, lose, lose], need=2) is Verdict.CONTRADICTED
    assert combine([win, tie]) is Verdict.NOT_CONFIRMED  # default: every part must hold
    assert combine([]) is Verdict.NOT_MEASURED
    assert combine([win, win], need=4) is Verdict.INCONCLUSIVE  # 2 of 4 data sets measured: 4 could still come
    assert combine([win, tie, tie], need=4, total=6) is Verdict.INCONCLUSIVE  # 3 of 6 unmeasured
    assert combine([win, tie, tie, tie], need=4, total=6) is Verdict.NOT_CONFIRMED
    assert combine([lose, lose, tie, tie, tie, tie], need=4) is Verdict.NOT_CONFIRMED
    assert combine([lose, lose, lose, tie, tie, tie], need=4) is Verdict.CONTRADICTED  # 4 of 6 out of reach


def test_one_std_definition_and_formatter():
    assert std([1.0, 2.0, 3.0]) == pytest.approx(1.0)  # sample std, not population (0.816)
    assert math.isnan(std([1.0]))
    assert mean_std([0.5, 0.6], scale=100, digits=1) == "55.0 ± 7.1 (n=2)"
    assert mean_std([0.5], digits=1, show_n=False) == "0.5"
    assert mean_std([], empty="not run") == "not run"
    assert C.judge([], [1.0, 2.0, 3.0]).verdict is Verdict.INCONCLUSIVE
