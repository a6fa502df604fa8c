"""The fingerprint baseline in the MoleculeNet table (issue 77): its runs (suite molnet's ecfp-mol group, task
molnet-finetune, loss ecfp-rf) are a row beside the fine-tunings, and each pretrained encoder's claim against it is
judged by the rule on the sets both ran; the forest's seeds share no draw with a GNN's, so the test is Welch's."""
from __future__ import annotations

import re

from tests.benchmarks.test_tables import _job, _record, reg  # noqa: F401  (the fixture)

from benchmarks.tables import graph_molnet


def test_ecfp_is_a_row_and_a_claim(reg):  # noqa: F811
    for seed in (0, 1, 2):
        for init, v in (("none", 0.60), ("runs/bench/molnet/graphcl", 0.70)):
            (job,) = _job("molnet", command="finetune-mol", dataset="bbbp", init=init, seed=seed)
            _record(reg, job, "graph", "molnet-finetune", {("rocauc_last", "test"): v + seed / 100,
                                                           ("rocauc_bestval", "test"): v}, step=10)
        (job,) = _job("molnet", command="ecfp-mol", dataset="bbbp", seed=seed)
        _record(reg, job, "graph", "molnet-finetune", {("rocauc_last", "test"): 0.65 + seed / 50}, loss="ecfp-rf",
                dataset="bbbp")
    text = graph_molnet.table(reg)
    header = next(l for l in text.splitlines() if l.startswith("| dataset"))
    assert "ecfp-rf last" in header and header.index("graphcl last") < header.index("ecfp-rf last")
    bbbp = next(l for l in text.splitlines() if l.startswith("| bbbp"))
    assert "67.0 ± 2.0" in bbbp and "n/a (no epochs)" in bbbp
    claim = next(l for l in text.splitlines() if l.startswith("- GraphCL pretraining beats a Morgan-fingerprint"))
    # 71.0 ± 1.0 vs 67.0 ± 2.0 over three seeds: gap +4.0, Welch (the forest's seeds are its own)
    assert re.search(r"rows graphcl vs ecfp-rf, average over bbbp: 71\.0 ± 1\.0 \(n=3\) vs 67\.0 ± 2\.0 \(n=3\), "
                     r"gap \+4\.0, 95 % CI \[[^]]+\], p\([^)]+\) = [0-9.e-]+, Welch", claim), claim
    avg = next(l for l in text.splitlines() if l.startswith("| avg"))
    assert "avg (1 sets every GNN variant with results ran)" in avg
