"""One judgement per claim (benchmarks/tables/catalogue.py): every claim declared once, and no results file states a claim
with a verdict other than the findings table's; the intervals and the exact test behind the verdicts."""
from __future__ import annotations

import html
import importlib
import math
import re
from pathlib import Path

from scipy import stats

from benchmarks.tables.catalogue import ENTRIES, findings_table, forest, reading, Judged
from benchmarks.tables.claims import Claim, Verdict, interval

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
VERDICTS = "|".join(re.escape(str(v)) for v in Verdict)


def test_every_claim_is_declared_once_with_a_judge() -> None:
    assert len({e.id for e in ENTRIES}) == len(ENTRIES)
    assert len({(e.claim, e.paper) for e in ENTRIES}) == len(ENTRIES)
    for e in ENTRIES:
        mod, fn, *_ = e.judge.split(":", 2)
        assert callable(getattr(importlib.import_module(mod), fn)), e.judge


def test_no_document_gives_a_claim_another_verdict() -> None:
    """the findings table of results/README.md is the catalogue's verdict (with Holm's reading beside it); every other
    mention of the claim in benchmarks/results (the task tables, the report page) says the same"""
    readme = (RESULTS / "README.md").read_text(encoding="utf-8")
    docs = {p.name: p.read_text(encoding="utf-8") for p in RESULTS.glob("*.md")}
    docs["report.html"] = (RESULTS / "report.html").read_text(encoding="utf-8")
    for e in ENTRIES:
        row = re.search(rf"\| {re.escape(e.paper)} \| {re.escape(e.claim)} \|.*\| \*\*({VERDICTS})\*\*(?:, not after Holm)? \|",
                        readme)
        assert row, f"{e.id} is missing from the findings table"
        verdict = row.group(1)
        for name, text in docs.items():
            said = re.findall(rf"{re.escape(e.claim)} \({re.escape(e.paper)}\): \*\*({VERDICTS})\*\*", text)
            assert all(v == verdict for v in said), (e.id, name, said, verdict)
        html_row = re.search(rf"<td>{re.escape(html.escape(e.claim))}</td>(?:<td>[^<]*</td>){{5}}<td>([^<]*)</td>",
                             docs["report.html"])
        assert html_row and html.unescape(html_row.group(1)).removesuffix(", not after Holm") == verdict, e.id


def test_interval_and_detectable_gap() -> None:
    a, b = [10.0, 11.0, 12.0, 13.0], [9.0, 9.5, 10.5, 11.0]
    res = Claim("t", "a", "b", "m").judge(a, b)
    t = stats.ttest_ind(a, b, equal_var=False)
    ci = t.confidence_interval(0.90)  # the two-sided 90 % interval: the one-sided test at alpha = 0.05's bounds
    assert math.isclose(res.ci[0], ci.low, rel_tol=1e-9) and math.isclose(res.ci[1], ci.high, rel_tol=1e-9)
    assert math.isclose(res.ci[0], stats.ttest_ind(
        a, b, equal_var=False, alternative="greater").confidence_interval(0.95).low, rel_tol=1e-9)
    se = (res.gap - res.ci[0]) / stats.t.ppf(0.95, res.df)
    assert math.isclose(res.detectable, (stats.t.ppf(0.95, res.df) + stats.t.ppf(0.8, res.df)) * se, rel_tol=1e-9)
    (lo, hi), det = interval([(1.0, [1.0, 1.0]), (-1.0, [0.0, 0.0])], math.inf)
    assert (lo, hi, det) == (1.0, 1.0, 0.0)  # no spread: the gap is exact


def test_a_rate_against_chance_uses_the_exact_binomial_test() -> None:
    c = Claim("order", "x", "chance", "ordered")
    ten = c.judge_rate(10, 10, 100 / 3)
    assert ten.verdict is Verdict.CONFIRMED and math.isclose(ten.p, (1 / 3) ** 10, rel_tol=1e-9)
    assert c.judge_rate(5, 10, 100 / 3).verdict is Verdict.NOT_CONFIRMED  # p = 0.21
    assert c.judge_rate(0, 10, 100 / 3).verdict is Verdict.CONTRADICTED
    assert c.judge_rate(2, 2, 100 / 3).verdict is Verdict.INCONCLUSIVE
    assert ten.detectable == 100 * 7 / 10 - 100 / 3  # 7 of 10 is the fewest with p < 0.05


def test_findings_table_forest_and_reading() -> None:
    res = Claim("t", "a", "b", "m").judge([1.0, 3.0, -1.0], [1.0, 2.0, 0.0])
    judged = [(ENTRIES[0], Judged(res.verdict, res, "e")), (ENTRIES[1], Judged(Verdict.NOT_MEASURED, None, "none"))]
    table = findings_table(judged)
    assert "| +0.73 | +0.00 [" in table and "**not measured**" in table and table.count("\n") == 4
    read = reading(ENTRIES[0], judged[0][1])  # the paper's +0.73 inside our interval, below the detectable gap
    assert read.startswith("underpowered") and "below what these seeds detect" in read and "seeds a side" in read
    assert "| underpowered (~" in table
    fig = forest(judged)
    assert len(fig.axes[0].get_yticks()) == 1  # measured claims only


def test_findings_open_with_what_holds_up(monkeypatch) -> None:
    """the findings of a registry where one claim is confirmed and one contradicted -> confirmed first, then
    contradicted, then the rest in the catalogue's order (the report opens with what holds up)"""
    from benchmarks.tables import catalogue

    class Fake:
        def __init__(self, e, verdict):
            self.id, self.verdict = e.id, verdict

        def judged(self, registry):
            return Judged(self.verdict, None, "")

    verdicts = [Verdict.NOT_CONFIRMED, Verdict.CONTRADICTED, Verdict.NOT_MEASURED, Verdict.CONFIRMED,
                Verdict.NOT_CONFIRMED]
    fakes = [Fake(e, v) for e, v in zip(ENTRIES, verdicts)]
    monkeypatch.setattr(catalogue, "ENTRIES", fakes)
    assert [e for e, _ in catalogue.findings(None)] == [fakes[3], fakes[1], fakes[0], fakes[4], fakes[2]]


def test_the_papers_gap_excluded_detectable_or_underpowered() -> None:
    """constructed seeds: a tight gap near 0 against the paper's +0.73 -> excluded (the upper bound lies below it); a
    wide spread -> underpowered with the seeds that would detect it (the detectable gap shrinks with sqrt(n)); a tight
    spread around +0.73 -> detectable"""
    from benchmarks.tables.catalogue import against_paper
    from benchmarks.tables.claims import seeds_needed

    c = Claim("t", "a", "b", "m")
    tight = c.judge([0.1, 0.0, -0.1, 0.05, -0.05], [0.0, 0.1, -0.1, 0.0, 0.0])
    assert tight.ci[1] < 0.73 and against_paper(ENTRIES[0], Judged(tight.verdict, tight, "e")) == "excluded"
    wide = c.judge([3.0, -2.0, 1.0, -1.5, 0.5], [0.0, 0.5, -0.5, 1.0, -1.0])
    n = seeds_needed(wide, 0.73)
    assert wide.ci[1] > 0.73 and wide.detectable > 0.73 and n is not None and n > 5
    assert against_paper(ENTRIES[0], Judged(wide.verdict, wide, "e")) == f"underpowered (~{n} seeds a side)"
    assert math.isclose(n, math.ceil(5 * (wide.detectable / 0.73) ** 2))
    sharp = c.judge([0.70, 0.75, 0.72, 0.74, 0.73], [0.0, 0.01, -0.01, 0.0, 0.0])
    assert sharp.detectable <= 0.73 <= sharp.ci[1]
    assert against_paper(ENTRIES[0], Judged(sharp.verdict, sharp, "e")) == "detectable"


def test_holm_by_hand() -> None:
    """Holm's step-down on a fixed vector, computed by hand: sorted 0.01, 0.02, 0.03, 0.04 of m = 4 -> 0.04, 0.06,
    0.06 (monotone), 0.06; NaN entries are outside the family"""
    from benchmarks.tables.claims import holm

    got = holm([0.03, float("nan"), 0.01, 0.04, 0.02])
    want = [0.06, float("nan"), 0.04, 0.06, 0.06]
    assert all((math.isnan(a) and math.isnan(b)) or math.isclose(a, b) for a, b in zip(got, want))
    assert holm([0.5, 0.9]) == [1.0, 1.0]


def test_intervals_agree_with_verdicts_on_the_snapshot() -> None:
    """every claim of the committed snapshot: a confirmed gap's 90 % interval lies above zero, a contradicted one's
    below; a not-confirmed one's contains zero unless the gap is significant but smaller than the minimum effect; a
    claim's family p-value matches its verdict (below alpha for a confirmed or contradicted verdict)"""
    from benchmarks.report.page import SNAPSHOT
    from benchmarks.tables.catalogue import family, findings
    from benchmarks.tables.claims import ALPHA, MIN_EFFECT
    from suite.registry import open_registry

    judged = findings(open_registry(str(SNAPSHOT)))
    adjusted = family(judged)
    assert sum(p == p for p in adjusted.values()) >= 20
    for e, j in judged:
        r = j.summary
        if r is None or r.ci[0] != r.ci[0]:
            continue
        if j.verdict is Verdict.CONFIRMED:
            assert r.ci[0] > 0 and j.p_value() < ALPHA, e.id
        elif j.verdict is Verdict.CONTRADICTED:  # a combined claim's family p-value carries its choice of part
            assert r.ci[1] < 0 and (bool(j.parts) or j.p_value() < ALPHA), e.id
        elif j.verdict is Verdict.NOT_CONFIRMED:
            assert r.ci[0] <= 0 <= r.ci[1] or abs(r.gap) < MIN_EFFECT, e.id
        assert adjusted[e.id] != adjusted[e.id] or adjusted[e.id] >= j.p_value(), e.id
