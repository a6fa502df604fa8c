"""Seeds fixed before looking (benchmarks/stats.py: spent, boundaries, final_alpha; catalogue Plan; findings
read_at_last_look): the Lan-DeMets boundaries against their published values, their size by simulation, and a
claim read at several looks judged at the alpha left for the last."""
from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.stats import ALPHA, boundaries, final_alpha, information, spent
from benchmarks.tables.catalogue import ENTRIES, Plan
from benchmarks.tables.claims import Claim, Judged, Verdict, at_looks


def test_boundaries_are_the_published_lan_demets_values() -> None:
    # two equally spaced looks, one-sided 0.025 (e.g. Jennison and Turnbull 2000, Table 7.6 / gsDesign)
    assert boundaries([0.5, 1.0], 0.025, "obrien-fleming") == pytest.approx([2.9626, 1.9686], abs=2e-4)
    assert boundaries([0.5, 1.0], 0.025, "pocock") == pytest.approx([2.1570, 2.2010], abs=2e-4)
    assert spent(1.0, 0.025, "obrien-fleming") == pytest.approx(0.025) and spent(1.0, 0.025, "pocock") == 0.025
    assert final_alpha([1.0]) == ALPHA
    with pytest.raises(ValueError, match="spending"):
        spent(0.5, 0.025, "haybittle")


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_the_looks_spend_exactly_alpha_by_simulation(spending: str) -> None:
    """X-CLR's looks (5, 7, 11 seeds a side): under the null, a z-statistic followed as the seeds grow (a Brownian
    motion at the information fractions) crosses the boundaries at some look about alpha / 2 of the time one-sided;
    crossing 1.96 at any look (reading every look at 0.05) happens far more often."""
    t = information([(5, 5), (7, 7), (11, 11)])
    c = boundaries(t, ALPHA / 2, spending)
    rng = np.random.default_rng(7)
    reps = 200_000
    steps = np.diff([0.0, *t])
    w = np.cumsum(rng.normal(size=(reps, len(t))) * np.sqrt(steps), axis=1)  # (reps, looks)
    z = w / np.sqrt(t)
    crossed = (z >= np.array(c)).any(axis=1).mean()
    mc = 4 * math.sqrt(0.025 * 0.975 / reps)
    assert abs(crossed - ALPHA / 2) < mc, crossed
    assert (z >= 1.959964).any(axis=1).mean() > ALPHA / 2 + 10 * mc  # the unadjusted reading overspends
    from scipy import stats

    assert final_alpha(t, ALPHA, spending) == pytest.approx(2 * stats.norm.sf(c[-1]))


def test_a_verdict_that_does_not_clear_the_last_looks_alpha_is_not_confirmed() -> None:
    from benchmarks.tables.findings import read_at_last_look

    plan = Plan(((5, 5), (7, 7), (11, 11)), planned=False)
    a_last = plan.alpha_at_last(ALPHA)
    assert 0.04 < a_last < ALPHA  # O'Brien-Fleming leaves most of alpha for the last look
    assert Plan(((5, 5), (7, 7), (11, 11)), spending="pocock").alpha_at_last(ALPHA) < a_last
    # constructed seeds whose two-sided p lies between alpha_last and alpha
    from scipy import optimize

    c = Claim("t", "a", "b", "m", min_effect=0.0)
    noise = (0.3, -0.2, 0.5, -0.4, 0.1, 0.6, -0.5, 0.2, -0.1, 0.4, -0.3)

    def judged(shift: float):
        return c.judge([shift + e for e in noise], [0.0] * 11)

    shift = optimize.brentq(lambda x: judged(x).p() - (a_last + ALPHA) / 2, 0.01, 2.0)
    r = judged(shift)
    assert a_last <= r.p() < ALPHA and r.verdict is Verdict.CONFIRMED
    e = next(e for e in ENTRIES if e.id == "xclr-linear-supcon")
    assert e.plan.looks[-1] == (11, 11) and not e.plan.planned
    j = read_at_last_look(e, Judged(r.verdict, r, "constructed"))
    assert j.verdict is Verdict.NOT_CONFIRMED and j.summary.p() >= ALPHA
    assert j.summary.p() == pytest.approx(r.p() * ALPHA / e.plan.alpha_at_last(ALPHA))
    lo, hi = j.summary.ci  # the interval at 1 - alpha_last: wider, and now containing 0
    assert lo < r.ci[0] and hi > r.ci[1] and lo <= 0.0
    assert at_looks(r, ALPHA) is r  # one look: unchanged


def test_every_claim_declares_its_seeds_and_lists_added_looks() -> None:
    from benchmarks.tables.findings import looks_table

    for e in ENTRIES:
        assert e.plan.looks and all(a >= 1 and b >= 1 for a, b in e.plan.looks), e.id
        assert list(e.plan.looks) == sorted(e.plan.looks, key=lambda ab: 1 / (1 / ab[0] + 1 / ab[1])), e.id
        if not e.plan.planned:
            assert len(e.plan.looks) > 1 and e.plan.history, e.id
    ids = {e.id for e in ENTRIES if len(e.plan.looks) > 1}
    assert {"xclr-linear-supcon", "mol-macl-cpu"} <= ids
    assert dict((e.id, e.plan.looks) for e in ENTRIES)["xclr-linear-supcon"] == ((5, 5), (7, 7), (11, 11))
    assert dict((e.id, e.plan.looks) for e in ENTRIES)["mol-macl-cpu"] == ((5, 5), (6, 6), (9, 9))
    table = looks_table()
    assert "5 -> 7 -> 11" in table and "5 -> 6 -> 9" in table
    # the molecular claims' last reading is on encoders (issue 77), each claim about a pretraining method: 3 of them
    mol = [e for e in ENTRIES if e.id.startswith("mol-")]
    assert mol and all(e.plan.final and e.plan.final[0] >= 3 and e.plan.unit == "encoders/seeds" for e in mol)
    assert "5 -> 6 -> 9 -> 3/9 encoders/seeds" in table
    macl = next(e for e in ENTRIES if e.id == "mol-macl-cpu")
    assert macl.plan.alpha_at_last(0.05) < 0.05 and "then read on 3/9 encoders/seeds a side" in macl.plan.text()
