"""The vision table's claim verdicts: margins against noise floors from the seed spreads."""
from benchmarks.vision_cifar import _claims, _verdict

NCE, CACR, CMC = "infonce (SimCLR)", "cacr K=4 (V=5)", "cmc K=4 (V=5)"


def cell(*lin: float, knn: tuple[float, ...] = ()) -> dict[str, list[float]]:
    return {"lin": list(lin), "knn": list(knn), "seeds": list(range(len(lin))), "wall": []}


def test_verdict_uses_two_standard_errors_with_a_half_point_minimum():
    assert _verdict([(0.02, 0.005)]) == "**confirmed**"  # 2 points > 2 SE = 1 point
    assert _verdict([(-0.02, 0.005)]) == "**not confirmed**"
    assert _verdict([(0.008, 0.005)]).startswith("**inconclusive** (margin +0.8 points, inside the 1.0-point")
    assert _verdict([(0.006, 0.0)]) == "**confirmed**"  # tiny spread: the 0.5-point minimum applies
    assert _verdict([(0.004, 0.0)]).startswith("**inconclusive**")
    assert _verdict([(0.009, None)]).startswith("**inconclusive**")  # single seed: 1-point floor
    assert _verdict([(0.011, None)]) == "**confirmed**"
    # every margin must clear its floor; any margin clearly negative refutes
    assert _verdict([(0.05, 0.001), (0.002, 0.001)]).startswith("**inconclusive** (margin +0.2")
    assert _verdict([(0.05, 0.001), (-0.05, 0.001)]) == "**not confirmed**"


def test_claims_read_seed_spreads_from_the_cells():
    tight = {(CACR, 64, "none"): cell(0.500, 0.502, 0.498), (CMC, 64, "none"): cell(0.490, 0.491, 0.489)}
    loose = {(CACR, 64, "none"): cell(0.50, 0.55, 0.45), (CMC, 64, "none"): cell(0.49, 0.44, 0.54)}
    line = next(c for c in _claims(tight, (64, 256)) if c.startswith("CACR K=4 beats CMC"))
    assert line.endswith("**confirmed**.")
    line = next(c for c in _claims(loose, (64, 256)) if c.startswith("CACR K=4 beats CMC"))
    assert "**inconclusive**" in line
    assert any("MACL" in c and "**not checked**" in c for c in _claims(tight, (64, 256)))


def test_imbalance_claim_needs_cacr_to_drop_least_against_every_row():
    res = {}
    for row, bal, drop in ((NCE, 0.47, 0.03), (CACR, 0.49, 0.01), (CMC, 0.50, 0.04)):
        res[(row, 64, "none")] = cell(bal, bal + 0.001, bal - 0.001)
        for imb in ("linear", "exponential"):
            v = bal - drop
            res[(row, 64, imb)] = cell(v, v + 0.001, v - 0.001)
    line = next(c for c in _claims(res, (64, 256)) if c.startswith("CACR loses least"))
    assert line.endswith("**confirmed**.")
    res[(CMC, 64, "exponential")] = cell(0.50, 0.501, 0.499)  # CMC does not drop at all under exponential
    line = next(c for c in _claims(res, (64, 256)) if c.startswith("CACR loses least"))
    assert line.endswith("**not confirmed**.")
