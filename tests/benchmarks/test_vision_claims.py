"""The vision table's claim verdicts: every margin judged by the one rule of benchmarks/tables/claims.py."""
from benchmarks.tables.vision_cifar import _fmt, judge_cells

NCE, CACR, CMC = "infonce (SimCLR)", "cacr K=4 (V=5)", "cmc K=4 (V=5)"


def cell(*lin: float, knn: tuple[float, ...] = ()) -> dict[str, list[float]]:
    return {"lin": list(lin), "knn": list(knn), "seeds": list(range(len(lin))), "wall": []}


IDS = {"CACR K=4 beats CMC": "img-cacr-cmc", "MACL": "img-macl", "MACL beats NT-Xent": "img-macl",
       "CACR loses least": "img-cacr-imbalance"}


def _line(res, start):
    j = judge_cells(IDS[start], res)
    return f"-> **{j.verdict}** ({j.evidence})"


def test_cells_use_the_sample_std():
    assert _fmt([0.50, 0.52, 0.54]) == "52.0 ± 2.0"  # sample std 2.0 points (population std would be 1.6)
    assert _fmt([]) == "not run"


def test_claims_read_seed_spreads_from_the_cells():
    tight = {(CACR, 64, "none"): cell(0.500, 0.502, 0.498), (CMC, 64, "none"): cell(0.490, 0.491, 0.489)}
    loose = {(CACR, 64, "none"): cell(0.50, 0.55, 0.45), (CMC, 64, "none"): cell(0.49, 0.44, 0.54)}
    reversed_ = {(CACR, 64, "none"): cell(0.450, 0.452, 0.448), (CMC, 64, "none"): cell(0.490, 0.491, 0.489)}
    two_seeds = {(CACR, 64, "none"): cell(0.60, 0.61), (CMC, 64, "none"): cell(0.40, 0.41)}
    assert "-> **confirmed** (50.0 vs 49.0 (linear, batch 64); margin 1: gap +1.0" in _line(tight, "CACR K=4 beats CMC")
    assert "-> **not confirmed**" in _line(loose, "CACR K=4 beats CMC")
    assert "-> **contradicted**" in _line(reversed_, "CACR K=4 beats CMC")
    assert "-> **inconclusive**" in _line(two_seeds, "CACR K=4 beats CMC")
    assert "**not measured**" in _line(tight, "MACL")


def test_macl_claim_needs_both_margins():
    res = {("macl", 64, "none"): cell(0.60, 0.61, 0.59), (NCE, 64, "none"): cell(0.50, 0.51, 0.49),
           ("macl", 256, "none"): cell(0.56, 0.57, 0.55), (NCE, 256, "none"): cell(0.50, 0.51, 0.49)}
    assert "-> **confirmed**" in _line(res, "MACL beats NT-Xent")  # gain 10 at 64 > gain 6 at 256
    res[("macl", 256, "none")] = cell(0.60, 0.61, 0.59)  # same gain at both sizes: margin 2 is a tie
    line = _line(res, "MACL beats NT-Xent")
    assert "-> **not confirmed**" in line and "margin 2: gap +0.0" in line


def test_imbalance_claim_needs_cacr_to_drop_least_against_every_row():
    res = {}
    for row, bal, drop in ((NCE, 0.47, 0.03), (CACR, 0.49, 0.01), (CMC, 0.50, 0.04)):
        res[(row, 64, "none")] = cell(bal, bal + 0.001, bal - 0.001)
        for imb in ("linear", "exponential"):
            v = bal - drop
            res[(row, 64, imb)] = cell(v, v + 0.001, v - 0.001)
    assert "-> **confirmed**" in _line(res, "CACR loses least")
    res[(CMC, 64, "exponential")] = cell(0.50, 0.501, 0.499)  # CMC does not drop at all under exponential
    assert "-> **contradicted**" in _line(res, "CACR loses least")


def test_cells_of_shared_seeds_are_paired():
    """cells whose values name the same runs' identities (seed, data set) are judged paired by seed; plain lists by
    Welch's test"""
    from benchmarks.tables.claims import Seeded

    def seeded(*lin):
        return {"lin": Seeded(lin, [(s, "cifar10") for s in range(len(lin))]), "knn": [], "seeds": [], "wall": []}

    paired = {(CACR, 64, "none"): seeded(0.500, 0.520, 0.480), (CMC, 64, "none"): seeded(0.490, 0.511, 0.469)}
    assert judge_cells("img-cacr-cmc", paired).summary.design == "paired"
    tight = {(CACR, 64, "none"): cell(0.500, 0.502, 0.498), (CMC, 64, "none"): cell(0.490, 0.491, 0.489)}
    assert judge_cells("img-cacr-cmc", tight).summary.design == "Welch"
