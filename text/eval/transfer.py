"""SentEval's transfer tasks with scikit-learn logistic regression on frozen embeddings
(SentEval's ``usepytorch=False`` path), seeded as SentEval (seed 1111):

- MR, CR, SUBJ, MPQA: ``InnerKFoldClassifier``: outer stratified ``kfold`` (10) folds; on each
  training part an inner stratified k-fold picks C in {2^-2, ..., 2^3}; test accuracy averaged.
- SST2: ``SplitClassifier``: C chosen on dev, accuracy on test.
- TREC: ``KFoldClassifier``: C chosen by k-fold CV on train, accuracy on the TREC-10 test set.
- MRPC: ``KFoldClassifier`` on features [|u - v|, u * v]; accuracy and F1 on the test set.

    metrics = TransferEvaluator(("MR", "TREC"))(encode_fn)  # {"MR": 81.2, "TREC": 85.0, "avg": ...}
Accuracies are percentages, as SentEval reports them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
from joblib import Parallel, delayed
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits
from torch import Tensor

from suite.train.meters import progress
from text.data import TRANSFER_TASKS, LabelledSet, read_transfer

REGS = tuple(2.0 ** t for t in range(-2, 4))  # SentEval's sklearn grid


def _fit_score(c: float, seed: int, max_iter: int, xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray,
               yte: np.ndarray) -> float:
    with threadpool_limits(1):  # one BLAS thread per fit; the fits themselves run in parallel
        return float(LogisticRegression(C=c, random_state=seed, max_iter=max_iter).fit(xtr, ytr).score(xte, yte))


def _pick_c(x: np.ndarray, y: np.ndarray, regs: tuple[float, ...], k: int, seed: int, max_iter: int,
            n_jobs: int = 1) -> float:
    """C with the best mean accuracy over an inner stratified k-fold of (x, y) (first C on ties, as SentEval)."""
    folds = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(x, y))
    acc = Parallel(n_jobs=n_jobs)(delayed(_fit_score)(c, seed, max_iter, x[tr], y[tr], x[va], y[va])
                                  for c in regs for tr, va in folds)
    return regs[int(np.argmax(np.asarray(acc).reshape(len(regs), len(folds)).mean(axis=1)))]


def _outer_fold(x: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, regs: tuple[float, ...], k: int, seed: int,
                max_iter: int) -> float:
    c = _pick_c(x[tr], y[tr], regs, k, seed, max_iter)
    return _fit_score(c, seed, max_iter, x[tr], y[tr], x[te], y[te])


class TransferEvaluator:
    primary_metric = "avg"  # headline recorded in the registry
    def __init__(self, tasks: tuple[str, ...] | list[str] = TRANSFER_TASKS, kfold: int = 10, inner_kfold: int = 10,
                 regs: tuple[float, ...] = REGS, seed: int = 1111, max_iter: int = 1000, root: Path | None = None,
                 n_jobs: int = -1) -> None:
        unknown = [t for t in tasks if t not in TRANSFER_TASKS]
        if unknown:
            raise ValueError(f"unknown transfer task(s) {unknown}; valid: {list(TRANSFER_TASKS)}")
        self.tasks = list(tasks)
        self.kfold, self.inner_kfold, self.regs, self.seed, self.max_iter = kfold, inner_kfold, tuple(regs), seed, max_iter
        self.n_jobs = n_jobs  # parallel fits (joblib processes); results do not depend on it
        self.data = {t: read_transfer(t, root) for t in self.tasks}

    def protocol(self) -> dict[str, Any]:
        return {"kfold": self.kfold, "inner_kfold": self.inner_kfold, "regs": list(self.regs), "seed": self.seed,
                "classifier": "sklearn LogisticRegression"}

    def _clf(self, c: float) -> LogisticRegression:
        return LogisticRegression(C=c, random_state=self.seed, max_iter=self.max_iter)

    def _inner_kfold(self, x: np.ndarray, y: np.ndarray) -> float:
        """SentEval's InnerKFoldClassifier: outer folds in parallel, each with its own inner C search."""
        outer = StratifiedKFold(n_splits=self.kfold, shuffle=True, random_state=self.seed)
        accs = Parallel(n_jobs=self.n_jobs)(delayed(_outer_fold)(x, y, tr, te, self.regs, self.inner_kfold, self.seed, self.max_iter)
                                            for tr, te in outer.split(x, y))
        return 100.0 * float(np.mean(accs))

    def __call__(self, encode_fn: Callable[[list[str]], Tensor]) -> dict[str, float]:
        sets = [s for d in self.data.values() for s in d.values()]
        texts = list(dict.fromkeys(t for s in sets for t in s.x + (s.b or [])))
        emb = encode_fn(texts).float().numpy()  # (U, d)
        index = {t: i for i, t in enumerate(texts)}

        def feats(s: LabelledSet) -> tuple[np.ndarray, np.ndarray]:
            u = emb[[index[t] for t in s.x]]
            if s.b is not None:  # sentence pairs (MRPC)
                v = emb[[index[t] for t in s.b]]
                u = np.concatenate([np.abs(u - v), u * v], axis=1)
            return u, np.asarray(s.y)

        out: dict[str, float] = {}
        for task, d in progress(self.data.items(), desc="transfer tasks (cross-validated probes)", total=len(self.data),
                                unit="task"):
            if "all" in d:
                out[task] = self._inner_kfold(*feats(d["all"]))
            elif task == "SST2":
                (xtr, ytr), (xdv, ydv), (xte, yte) = feats(d["train"]), feats(d["dev"]), feats(d["test"])
                dev = Parallel(n_jobs=self.n_jobs)(delayed(_fit_score)(c, self.seed, self.max_iter, xtr, ytr, xdv, ydv)
                                                   for c in self.regs)
                c = self.regs[int(np.argmax(dev))]
                out[task] = 100.0 * float(self._clf(c).fit(xtr, ytr).score(xte, yte))
                out[f"{task}_dev"] = 100.0 * float(max(dev))
            else:  # TREC, MRPC
                (xtr, ytr), (xte, yte) = feats(d["train"]), feats(d["test"])
                clf = self._clf(_pick_c(xtr, ytr, self.regs, self.inner_kfold, self.seed, self.max_iter, self.n_jobs)).fit(xtr, ytr)
                out[task] = 100.0 * float(clf.score(xte, yte))
                if task == "MRPC":
                    out["MRPC_f1"] = 100.0 * float(f1_score(yte, clf.predict(xte)))
        if len(self.tasks) > 1:
            out["avg"] = float(np.mean([out[t] for t in self.tasks]))
        return out
