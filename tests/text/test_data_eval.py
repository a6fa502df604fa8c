"""Readers of every SentEval layout, STS aggregation, Spearman, transfer protocol (fake data)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from text.data import (STS_YEARS, TRANSFER_TASKS, nli_triplets, read_sentences, read_sick, read_sts_pairs, read_sts_year,
                       read_stsb, read_transfer, read_triplets_csv, sick_triplets, snli_triplets)
from text.eval.sts import STSEvaluator, aggregate, spearman
from text.eval.transfer import TransferEvaluator


def test_sts_reader_skips_and_counts_empty_gold(tmp_path):
    (tmp_path / "in.txt").write_text("a b\tc d\nx  y\tz\nq\tr\n")
    (tmp_path / "gs.txt").write_text("4.0\n\n1.5\n")
    ps = read_sts_pairs(tmp_path / "in.txt", tmp_path / "gs.txt")
    assert (len(ps), ps.skipped, ps.a, ps.scores) == (2, 1, ["a b", "q"], [4.0, 1.5])
    (tmp_path / "gs2.txt").write_text("1\n")
    with pytest.raises(ValueError, match="lines"):
        read_sts_pairs(tmp_path / "in.txt", tmp_path / "gs2.txt")


def test_every_layout_parses(data_env):
    for year in STS_YEARS:
        sets = read_sts_year(year)
        assert list(sets) == list(STS_YEARS[year])
        skipped = sum(s.skipped for s in sets.values())
        assert skipped == (4 * len(sets) if year in ("STS15", "STS16") else 0)
        assert all(len(s) == 12 - (4 if year in ("STS15", "STS16") else 0) for s in sets.values())
    assert len(read_stsb("test")) == 20 and len(read_stsb("dev")) == 24
    assert len(read_sick("test")) == 20
    for t in TRANSFER_TASKS:
        d = read_transfer(t)
        assert all(len(s.x) == len(s.y) for s in d.values())
    assert read_transfer("MRPC")["train"].b is not None
    assert set(read_transfer("TREC")["train"].y) == set(range(6))
    assert len(snli_triplets()) == 16 and len(sick_triplets()) == 13
    assert len(nli_triplets()) == 29
    assert len(read_sentences(data_env / "wiki" / "wiki1m_head11914.txt", limit=50)) == 50
    with pytest.raises(ValueError, match="unknown STS year"):
        read_sts_year("STS11")


def test_triplet_csv(tmp_path):
    (tmp_path / "t.csv").write_text('sent0,sent1,hard_neg\n"a, b",c,d\ne,f,g\n')
    assert read_triplets_csv(tmp_path / "t.csv") == [("a, b", "c", "d"), ("e", "f", "g")]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 50).astype(float)  # many ties
    y = x + rng.normal(0, 2, 50)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).correlation, abs=1e-12)
    with pytest.raises(ValueError):
        spearman([1.0], [2.0])


def test_all_vs_wmean_differ_on_hand_made_case():
    # each subset perfectly ranked, but the subsets sit on different scales: pooled ("all") < 1
    a = (np.array([0.1, 0.2, 0.3]), np.array([3.0, 4.0, 5.0]))
    b = (np.array([0.7, 0.8, 0.9, 1.0]), np.array([0.0, 1.0, 2.0, 3.0]))
    agg = aggregate({"a": a, "b": b})
    assert agg["a"] == pytest.approx(1.0) and agg["b"] == pytest.approx(1.0)
    assert agg["mean"] == pytest.approx(1.0) and agg["wmean"] == pytest.approx(1.0)
    assert agg["all"] == pytest.approx(spearmanr(np.r_[a[0], b[0]], np.r_[a[1], b[1]]).correlation)
    assert agg["all"] < 0.0
    c = (np.array([0.1, 0.2]), np.array([1.0, 0.0]))  # wmean weights by pairs, mean does not
    agg = aggregate({"b": b, "c": c})
    assert agg["mean"] == pytest.approx(0.0) and agg["wmean"] == pytest.approx((4 - 2) / 6)


def test_sts_evaluator_on_fake_data(data_env):
    gen = torch.Generator().manual_seed(0)
    table: dict[str, torch.Tensor] = {}

    def fn(texts):
        return torch.stack([table.setdefault(t, torch.randn(8, generator=gen)) for t in texts])

    m = STSEvaluator()(fn)
    for k in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg", "sts12_wmean", "sts15_skipped"):
        assert k in m and np.isfinite(m[k])
    assert m["sts15_skipped"] == 20 and m["sts16_skipped"] == 20
    assert m["avg"] == pytest.approx(np.mean([m[k] for k in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")]))
    m2 = STSEvaluator(aggregation="wmean")(fn)
    assert m2["sts12"] == pytest.approx(m["sts12_wmean"])


def test_transfer_evaluator_runs_protocols(data_env):
    gen = torch.Generator().manual_seed(0)
    table: dict[str, torch.Tensor] = {}

    def fn(texts):
        return torch.stack([table.setdefault(t, torch.randn(6, generator=gen)) for t in texts])

    ev = TransferEvaluator(kfold=2, inner_kfold=2, regs=(0.5, 2.0))
    m = ev(fn)
    for t in TRANSFER_TASKS:
        assert 0.0 <= m[t] <= 100.0
    assert "MRPC_f1" in m and "avg" in m
    with pytest.raises(ValueError, match="unknown transfer"):
        TransferEvaluator(["XX"])
