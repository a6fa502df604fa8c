"""One judgement per claim (benchmarks/tables/catalogue.py): every claim declared once, and no results file states a claim
with a verdict other than the findings table's; the intervals and the exact test behind the verdicts."""
from __future__ import annotations

import html
import importlib
import math
import re
from pathlib import Path

from benchmarks.report.figures import forest
from benchmarks.tables.catalogue import ENTRIES
from benchmarks.tables.claims import Claim, Judged, Verdict
from benchmarks.tables.findings import findings_table, reading

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
VERDICTS = "|".join(re.escape(str(v)) for v in Verdict)


def test_every_claim_is_declared_once_with_a_judge() -> None:
    assert len({e.id for e in ENTRIES}) == len(ENTRIES)
    assert len({(e.claim, e.paper) for e in ENTRIES}) == len(ENTRIES)
    for e in ENTRIES:
        mod, fn, *_ = e.judge.split(":", 2)
        assert callable(getattr(importlib.import_module(mod), fn)), e.judge


def test_no_document_gives_a_claim_another_verdict() -> None:
    """the findings table of results/README.md is the catalogue's verdict after Holm's correction; every other
    mention of the claim in benchmarks/results (the task tables, the report page) says the same"""
    readme = (RESULTS / "README.md").read_text(encoding="utf-8")
    docs = {p.name: p.read_text(encoding="utf-8") for p in RESULTS.glob("*.md")}
    docs["report.html"] = (RESULTS / "report.html").read_text(encoding="utf-8")
    for e in ENTRIES:
        row = re.search(rf"\| {re.escape(e.paper)} \| {re.escape(e.claim)} \|.*\| \*\*({VERDICTS})\*\* \|", readme)
        assert row, f"{e.id} is missing from the findings table"
        verdict = row.group(1)
        for name, text in docs.items():
            said = re.findall(rf"{re.escape(e.claim)} \({re.escape(e.paper)}\): \*\*({VERDICTS})\*\*", text)
            assert all(v == verdict for v in said), (e.id, name, said, verdict)
        html_row = re.search(rf"<td>{re.escape(html.escape(e.claim))}</td>(?:<td>[^<]*</td>){{7}}<td>([^<]*)</td>",
                             docs["report.html"])
        assert html_row and html.unescape(html_row.group(1)) == verdict, e.id


def test_the_claims_name_their_papers_authors() -> None:
    """every claim's paper is one of the catalogue's papers, cited by its authors (t-SimCLR: Hu et al. 2023, as the
    loss's own module says; Böhm et al. 2022 is another paper), and no results file names another author for it"""
    import suite.losses.tsimclr as tsimclr
    from benchmarks.tables.catalogue import PAPERS

    by_short = {p.short: p for p in PAPERS}
    for e in ENTRIES:
        if e.paper.startswith("none"):
            continue
        short, _, rest = e.paper.partition(" (")
        assert short in by_short and rest.startswith(f"{by_short[short].authors})"), e.paper
    assert by_short["t-SimCLR"].authors == "Hu et al. 2023" and "Stochastic Neighbor" in by_short["t-SimCLR"].title
    assert "Hu et al. 2023" in (tsimclr.__doc__ or "")
    for path in [*RESULTS.glob("*.md"), RESULTS / "report.html", RESULTS.parents[1] / "docs" / "evidence.md"]:
        assert "Böhm" not in path.read_text(encoding="utf-8"), path


def test_gmm_orders_exactly_as_the_paper_so_its_gap_is_not_excluded() -> None:
    """10 of 10 orderings against chance 1/3 is the paper's 'consistently' exactly: our upper bound is the paper's
    gap, and the reading is never 'excluded'"""
    from benchmarks.tables.catalogue import BY_ID
    from benchmarks.tables.findings import against_paper
    from benchmarks.tables.gmm import CHANCE_ORDER

    e = BY_ID["gmm-order"]
    r = Claim("o", "x", "chance", "ordered").judge_rate(10, 10, CHANCE_ORDER)
    assert r.ci[1] == e.paper_gap and against_paper(e, Judged(r.verdict, r, "e")) != "excluded"


def test_findings_table_forest_and_reading() -> None:
    res = Claim("t", "a", "b", "m").judge([1.0, 3.0, -1.0], [1.0, 2.0, 0.0])
    judged = [(ENTRIES[0], Judged(res.verdict, res, "e")), (ENTRIES[1], Judged(Verdict.NOT_MEASURED, None, "none"))]
    table = findings_table(judged)
    assert "| +0.73 | +0.00 [" in table and "**not measured**" in table and table.count("\n") == 4
    assert f"| {res.p_text()} / " in table  # the p-value names its hypothesis
    read = reading(ENTRIES[0], judged[0][1])  # the paper's +0.73 inside our interval, below the detectable gap
    assert read.startswith("underpowered") and "seeds a side" in read and "| underpowered (~" in table
    fig = forest(judged)
    assert len(fig.axes[0].get_yticks()) == 1  # measured claims only


def test_findings_open_with_what_holds_up(monkeypatch) -> None:
    """the findings of a registry where one claim is confirmed and one contradicted -> confirmed first, then
    contradicted, then the rest in the catalogue's order (the report opens with what holds up)"""
    from benchmarks.tables import findings as catalogue

    class Fake:
        def __init__(self, e, verdict):
            self.id, self.verdict = e.id, verdict

        def judged(self, registry):
            return Judged(self.verdict, None, "")

    verdicts = [Verdict.NOT_CONFIRMED, Verdict.CONTRADICTED, Verdict.NOT_MEASURED, Verdict.CONFIRMED,
                Verdict.NOT_CONFIRMED]
    fakes = [Fake(e, v) for e, v in zip(ENTRIES, verdicts)]
    monkeypatch.setattr(catalogue, "ENTRIES", fakes)
    monkeypatch.setattr(catalogue, "family", lambda judged: {e.id: 0.0 for e, _ in judged})
    catalogue._VERDICTS.clear()
    assert [e for e, _ in catalogue.findings(None)] == [fakes[3], fakes[1], fakes[0], fakes[4], fakes[2]]
    catalogue._VERDICTS.clear()


def test_the_papers_gap_excluded_exceeded_below_the_minimum_effect_detectable_or_underpowered() -> None:
    """constructed seeds: a tight gap near 0 against the paper's +0.73 -> excluded, a tight gap near +2 -> exceeded; a
    paper's gap at most the minimum effect -> below the minimum effect (never 'underpowered': no number of seeds
    confirms it); a wide spread -> underpowered with the seeds its own test needs; a tight spread around +1.5 ->
    detectable"""
    from dataclasses import replace

    from benchmarks.stats import power, seeds_needed
    from benchmarks.tables.findings import against_paper

    c = Claim("t", "a", "b", "m")
    tight = c.judge([0.1, 0.0, -0.1, 0.05, -0.05], [0.0, 0.1, -0.1, 0.0, 0.0])
    assert tight.ci[1] < 0.73 and against_paper(ENTRIES[0], Judged(tight.verdict, tight, "e")) == "excluded"
    above = c.judge([2.1, 2.0, 1.9, 2.05, 1.95], [0.0, 0.1, -0.1, 0.0, 0.0])  # confirmed, and above the paper's gap
    assert above.ci[0] > 0.73 and against_paper(ENTRIES[0], Judged(above.verdict, above, "e")) == "exceeded"
    wide = c.judge([3.0, -2.0, 1.0, -1.5, 0.5], [0.0, 0.5, -0.5, 1.0, -1.0])
    small = replace(ENTRIES[0], paper_gap=0.26)
    assert wide.ci[1] > 0.26 and against_paper(small, Judged(wide.verdict, wide, "e")) == "below the minimum effect"
    n = seeds_needed(wide, 0.73)
    assert wide.ci[1] > 0.73 and wide.detectable > 0.73 and n is not None and n > 5
    assert against_paper(ENTRIES[0], Judged(wide.verdict, wide, "e")) == f"underpowered (~{n} seeds a side)"
    sharp = c.judge([1.48, 1.53, 1.50, 1.51, 1.49], [0.0, 0.01, -0.01, 0.0, 0.0])
    paper = replace(ENTRIES[0], paper_gap=1.5)
    assert sharp.detectable <= 1.5 and sharp.ci[0] <= 1.5 <= sharp.ci[1] and power(1.5, sharp.se, sharp.df, 0.5) >= 0.8
    assert against_paper(paper, Judged(sharp.verdict, sharp, "e")) == "detectable"


def test_holm_by_hand() -> None:
    """Holm's step-down on a fixed vector, computed by hand: sorted 0.01, 0.02, 0.03, 0.04 of m = 4 -> 0.04, 0.06,
    0.06 (monotone), 0.06; NaN entries are outside the family"""
    from benchmarks.stats import holm

    got = holm([0.03, float("nan"), 0.01, 0.04, 0.02])
    want = [0.06, float("nan"), 0.04, 0.06, 0.06]
    assert all((math.isnan(a) and math.isnan(b)) or math.isclose(a, b) for a, b in zip(got, want))
    assert holm([0.5, 0.9]) == [1.0, 1.0]


def test_intervals_agree_with_verdicts_on_the_snapshot() -> None:
    """every claim of the committed snapshot: one p-value and one interval per row, from the same comparison: a
    confirmed gap's interval lies above +m, a contradicted one's below -m, an equivalent one's inside +-m, and the
    row's two-sided p is below alpha exactly then; a confirmed verdict survives Holm (else it reads nominal)"""
    from benchmarks.report.page import SNAPSHOT
    from benchmarks.stats import ALPHA
    from benchmarks.tables.findings import family, findings, shown
    from suite.registry import open_registry

    judged = findings(open_registry(str(SNAPSHOT)))
    adjusted = family(judged)
    assert sum(p == p for p in adjusted.values()) >= 20
    for e, j in judged:
        r = j.summary
        if r is None or r.ci[0] != r.ci[0] or j.verdict is Verdict.INCONCLUSIVE:
            continue
        m = r.min_effect
        decided = {Verdict.CONFIRMED: r.ci[0] > m, Verdict.CONTRADICTED: r.ci[1] < -m,
                   Verdict.EQUIVALENT: -m < r.ci[0] and r.ci[1] < m}
        for v, holds in decided.items():
            assert holds == (j.verdict is v), (e.id, v, r.ci)
        assert (j.p_value() < ALPHA) == (j.verdict in decided), e.id
        assert adjusted[e.id] >= j.p_value(), e.id
        assert (shown(j, adjusted[e.id]) is Verdict.CONFIRMED) == (j.verdict is Verdict.CONFIRMED
                                                                   and adjusted[e.id] < ALPHA), e.id
