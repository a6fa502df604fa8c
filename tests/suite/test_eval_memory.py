"""Evaluation whose memory is the features alone (issue 76): the bank filled in place, kNN over chunks of it against
the whole-bank computation, the probe trained in torch against scikit-learn's, the file index of a data identity
packed, and the progress bars."""
from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from suite.eval.bank import FeatureBank, bar
from suite.eval.knn import knn_predict
from suite.eval.linear import logistic_probe


def naive_knn_votes(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, c: int, k: int,
                    t: float) -> torch.Tensor:
    """(M, C) votes of the pre-issue computation in float64: the whole bank normalised, one similarity block, top-k,
    exp(s / T) summed per class."""
    tx, q = F.normalize(train_x.double(), dim=1), F.normalize(test_x.double(), dim=1)
    sim, idx = (q @ tx.T).topk(min(k, len(tx)), dim=1)
    return torch.zeros(len(q), c, dtype=torch.float64).scatter_add_(1, train_y[idx], (sim / t).exp())


def agree_off_ties(pred: torch.Tensor, votes: torch.Tensor, rel: float = 1e-4) -> None:
    """``pred`` is the vote's argmax wherever the best two classes are more than ``rel`` apart (a near tie may go
    either way under another summation order)."""
    top2 = votes.topk(2, dim=1).values
    clear = (top2[:, 0] - top2[:, 1]) > rel * top2[:, 0]
    assert clear.float().mean() > 0.9
    assert torch.equal(pred[clear], votes.argmax(1)[clear])


@pytest.mark.parametrize("n,d,k,chunk", [(500, 16, 20, 64), (300, 8, 200, 1000), (257, 5, 50, 50), (40, 4, 200, 7)])
def test_chunked_knn_matches_the_whole_bank_computation(n: int, d: int, k: int, chunk: int) -> None:
    """the running top-k merged over bank chunks (chunks smaller than k, than the bank, a last short one, k past the
    bank) predicts what the whole similarity block did, on raw and on already unit rows, fp16 rows included"""
    g = torch.Generator().manual_seed(n + d)
    c = 5
    x, y = torch.randn(n, d, generator=g) * 3, torch.randint(0, c, (n,), generator=g)
    q = torch.randn(90, d, generator=g)
    votes = naive_knn_votes(x, y, q, c, k, 0.1)
    agree_off_ties(knn_predict(x, y, q, c, k=k, chunk_size=chunk, batch_size=32), votes)
    bank, queries = FeatureBank.of(x, y), FeatureBank.of(q, torch.zeros(90))
    agree_off_ties(knn_predict(bank.x, bank.y, queries.x, c, k=k, chunk_size=chunk, unit=True), votes)
    half, qhalf = FeatureBank(n), FeatureBank(90)  # fp16, filled in uneven batches
    for s in range(0, n, 33):
        half.add(x[s : s + 33], y[s : s + 33])
    qhalf.add(q, torch.zeros(90))
    pred16 = knn_predict(half.x, half.y, qhalf.x, c, k=k, chunk_size=chunk, unit=True)
    assert (pred16 == votes.argmax(1)).float().mean() >= 0.95  # fp16 rounding moves only near ties


def test_chunked_knn_keeps_exact_duplicates_and_tied_similarities() -> None:
    """a bank of repeated rows (ties at the k-th place across chunks): the votes, a sum over equal similarities,
    are the same whichever tied rows are kept, so the predictions equal the whole-bank ones"""
    g = torch.Generator().manual_seed(3)
    base, labels = torch.randn(6, 4, generator=g), torch.tensor([0, 1, 2, 0, 1, 2])
    x, y = base.repeat(30, 1), labels.repeat(30)  # (180, 4): every row 30 times, spread over the chunks
    q = torch.randn(50, 4, generator=g)
    votes = naive_knn_votes(x, y, q, 3, 45, 0.1)
    for chunk in (7, 45, 1000):
        agree_off_ties(knn_predict(x, y, q, 3, k=45, chunk_size=chunk), votes)


def test_bank_is_preallocated_fp16_unit_rows_with_their_norms() -> None:
    """the bank is one (n, d) fp16 block of unit rows written in place, 2 bytes a value; the raw features come back
    from row times norm; more rows than counted are refused, fewer are trimmed"""
    x, y = torch.randn(10, 32) * 5, torch.arange(10)
    bank = FeatureBank(10)
    ptr = None
    for s in range(0, 10, 4):
        bank.add(x[s : s + 4], y[s : s + 4])
        ptr = ptr or bank.x.data_ptr()
        assert bank.x.data_ptr() == ptr  # no reallocation, no concatenation
    assert bank.x.dtype == torch.float16 and bank.x.shape == (10, 32)
    assert bank.nbytes == 10 * 32 * 2 + 10 * 4 + 10 * 8
    assert torch.allclose(bank.x.float().norm(dim=1), torch.ones(10), atol=1e-3)
    assert torch.allclose(bank.raw(0, 10), x, rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match="11 rows for a bank of 10"):
        bank.add(x[:1], y[:1])
    short = FeatureBank(10, torch.float32)
    short.add(x[:6], y[:6])
    assert len(short.trim()) == 6 and short.x.shape == (6, 32) and torch.allclose(short.raw(0, 6), x[:6])


def _blobs(n: int, d: int, c: int, spread: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(c, d, generator=g) * 2
    y = torch.randint(0, c, (n,), generator=g)
    scale = torch.rand(d, generator=g) * 5 + 0.1  # features of very different scales: the standardisation matters
    return (centers[y] + spread * torch.randn(n, d, generator=g)) * scale + 3, y


@pytest.mark.parametrize("spread", [0.5, 2.0])
def test_torch_probe_matches_scikit_learn(spread: float) -> None:
    """the probe trained in torch on a bank (fp32 and fp16, read in chunks) fits scikit-learn's model: the same
    weights on the standardised features and the same accuracies, on a separable problem and on an overlapping one"""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from suite.eval.linear import linear_probe

    x, y = _blobs(400, 12, 4, spread, seed=1)
    tr, te = slice(0, 300), slice(300, 400)
    ref = linear_probe(x[tr], y[tr], x[te], y[te])
    sc = StandardScaler().fit(x[tr].numpy())
    lr = LogisticRegression().fit(sc.transform(x[tr].numpy()), y[tr].numpy())
    fitted: dict[str, torch.Tensor] = {}
    got = logistic_probe(FeatureBank.of(x[tr], y[tr]), y[tr], FeatureBank.of(x[te], y[te]), y[te], chunk_size=64,
                         fitted=fitted)
    assert got["train_acc"] == pytest.approx(ref["train_acc"], abs=0.01)
    assert got["test_acc"] == pytest.approx(ref["test_acc"], abs=0.01)
    assert np.allclose(fitted["mean"].numpy(), sc.mean_, rtol=1e-4) and np.allclose(fitted["std"].numpy(), sc.scale_,
                                                                                     rtol=1e-4)
    assert np.abs(fitted["w"].numpy() - lr.coef_).max() < 0.02 * np.abs(lr.coef_).max()
    z = sc.transform(x.numpy())
    logits = z @ fitted["w"].numpy().T + fitted["b"].numpy()  # (N, C): the fitted models' scores
    assert np.abs(logits - lr.decision_function(z)).max() < 0.02 * np.abs(logits).max()
    half = logistic_probe(FeatureBank.of(x[tr], y[tr], torch.float16), y[tr], x[te], y[te])
    assert half["test_acc"] == pytest.approx(ref["test_acc"], abs=0.03)


def test_torch_probe_regularisation_follows_C() -> None:
    """C is scikit-learn's: a smaller C shrinks the weights as it shrinks scikit-learn's"""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = _blobs(200, 6, 3, 1.0, seed=2)
    z = StandardScaler().fit_transform(x.numpy())
    for C in (0.01, 10.0):
        fitted: dict[str, torch.Tensor] = {}
        logistic_probe(x, y, x, y, C=C, fitted=fitted)
        ref = LogisticRegression(C=C, max_iter=2000).fit(z, y.numpy()).coef_
        assert np.abs(fitted["w"].numpy() - ref).max() < 0.02 * np.abs(ref).max()


def _naive_listing(folder: Path) -> list[tuple[str, int]]:
    files = [(p.relative_to(folder).as_posix(), p) for p in folder.rglob("*")
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    return sorted((rel, p.stat().st_size) for rel, p in files)


def test_data_listing_is_packed_and_sorted_as_the_path_walk_was(tmp_path: Path) -> None:
    """the os.scandir walk lists the files rglob listed (hidden ones and links to folders left out), in the order of
    their sorted relative names (names sorting before and after '/', nested folders), so recorded digests stay the
    same; it keeps a few dozen bytes a file, not a Path each"""
    from suite.inputs import _listing, data_identity

    root = tmp_path / "d"
    names = ["a/x", "a-b", "a.txt", "a0/y", "a/b/c", "a/b-c", "b", "A/z", ".hidden", "a/.swp", ".git/obj", "é/ü"]
    for i, n in enumerate(names):
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        (root / n).write_bytes(bytes(i))
    (root / "link").symlink_to(root / "a", target_is_directory=True)
    listing = _listing(root)
    assert [(listing.name(i), listing.sizes[i]) for i in range(len(listing))] == _naive_listing(root)
    assert data_identity(root)["files"].keys() == {n for n, _ in _naive_listing(root)}
    many = tmp_path / "many"
    for c in range(4):
        (many / f"n{c:02d}").mkdir(parents=True)
        for i in range(600):
            (many / f"n{c:02d}" / f"image_{i:06d}.JPEG").touch()
    tracemalloc.start()
    kept = _listing(many)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(kept) == 2400 and held / 2400 < 120  # bytes a file: its ~25-byte name and four int64


def test_eval_progress_bars_show_rate_and_eta_unless_turned_off(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """the probe shows a bar (passes, rate, ETA) on stderr; SUITE_NO_PROGRESS=1 keeps it quiet"""
    x, y = _blobs(60, 4, 2, 1.0, seed=4)
    monkeypatch.delenv("SUITE_NO_PROGRESS", raising=False)
    logistic_probe(x, y, x, y, desc="probe under test")
    err = capsys.readouterr().err
    assert "probe under test" in err and "pass/s" in err and "<" in err  # tqdm's "elapsed<remaining"
    monkeypatch.setenv("SUITE_NO_PROGRESS", "1")
    logistic_probe(x, y, x, y, desc="probe under test")
    with bar(10, "quiet") as b:
        b.update(10)
    assert capsys.readouterr().err == ""
    assert os.environ["SUITE_NO_PROGRESS"] == "1"
