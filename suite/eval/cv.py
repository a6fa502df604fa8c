"""Cross-validated classifier accuracy: outer stratified k-fold, inner grid search (nested CV).

The fold split is seeded (unlike GraphCL's original evaluation), and every protocol choice is
returned with the result so it can be recorded.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

SVM_CS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)


def _as_xy(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels as numpy arrays (tensors accepted), checked for length and finiteness."""
    x = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)
    y = np.asarray(y.detach().cpu() if hasattr(y, "detach") else y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"features ({x.shape[0]}) and labels ({y.shape[0]}) differ in length")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or inf")
    return x, y


def cv_accuracy(
    x: Any, y: Any, make_estimator: Callable[[], Any], param_grid: dict[str, Any] | None = None, *, folds: int = 10,
    inner_folds: int = 5, seed: int = 0, n_jobs: int | None = None,
) -> dict[str, Any]:
    """Mean/std accuracy over ``folds`` outer stratified folds; hyper-parameters chosen on the
    training part of each fold by an inner ``inner_folds`` grid search (never on the test fold)."""
    x, y = _as_xy(x, y)
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    accs, chosen = [], []
    for tr, te in outer.split(x, y):
        est = make_estimator()
        if param_grid:
            inner = StratifiedKFold(n_splits=inner_folds, shuffle=True, random_state=seed)
            est = GridSearchCV(est, param_grid, cv=inner, n_jobs=n_jobs)
        est.fit(x[tr], y[tr])
        accs.append(float(est.score(x[te], y[te])))
        if param_grid:
            chosen.append(est.best_params_)
    return {
        "acc_mean": float(np.mean(accs)), "acc_std": float(np.std(accs)), "fold_accs": accs, "chosen_params": chosen,
        "protocol": {"outer_folds": folds, "inner_folds": inner_folds, "seed": seed, "param_grid": param_grid or {}},
    }


def svm_cv_accuracy(x: Any, y: Any, *, seed: int = 0, folds: int = 10, inner_folds: int = 5,
                    cs: tuple[float, ...] = SVM_CS, n_jobs: int | None = None, precomputed: bool = True) -> dict[str, Any]:
    """GraphCL's SVM protocol with a seeded split: RBF SVC (gamma="scale"), C chosen by an inner grid search.

    ``precomputed=True`` (default) computes the pairwise squared distances once and fits
    ``SVC(kernel="precomputed")`` on exp(-gamma * D) slices, with gamma = 1 / (d * Var(X_fit)) of each
    fit's own training part, exactly sklearn's "scale", and the grid search's rule (highest mean inner
    accuracy, first C on ties). It is the same estimator as ``GridSearchCV(SVC(kernel="rbf"))`` up to
    floating-point rounding of the kernel, and about twice as fast; ``precomputed=False`` runs that reference.
    """
    if not precomputed:
        out = cv_accuracy(x, y, lambda: SVC(kernel="rbf"), {"C": list(cs)}, folds=folds, inner_folds=inner_folds,
                          seed=seed, n_jobs=n_jobs)
        out["protocol"]["classifier"] = "SVC(kernel='rbf')"
        return out
    x, y = _as_xy(x, y)
    x = x.astype(np.float64, copy=False)
    sq = np.einsum("ij,ij->i", x, x)
    dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)  # (n, n) squared distances, once
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    inner = StratifiedKFold(n_splits=inner_folds, shuffle=True, random_state=seed)
    res = Parallel(n_jobs=n_jobs)(delayed(_svm_outer_fold)(x, y, dist, tr, te, inner, cs) for tr, te in outer.split(x, y))
    accs = [a for a, _ in res]
    return {
        "acc_mean": float(np.mean(accs)), "acc_std": float(np.std(accs)), "fold_accs": accs,
        "chosen_params": [{"C": c} for _, c in res],
        "protocol": {"outer_folds": folds, "inner_folds": inner_folds, "seed": seed, "param_grid": {"C": list(cs)},
                     "classifier": "SVC(kernel='rbf', gamma='scale') via precomputed kernel"},
    }


def _rbf_fit_score(x: np.ndarray, y: np.ndarray, dist: np.ndarray, fit: np.ndarray, test: np.ndarray,
                   cs: tuple[float, ...]) -> list[float]:
    """Accuracy on ``test`` of an RBF SVC fitted on ``fit`` for every C (gamma = sklearn's "scale")."""
    gamma = 1.0 / (x.shape[1] * x[fit].var())
    k_fit = np.exp(-gamma * dist[np.ix_(fit, fit)])
    k_test = np.exp(-gamma * dist[np.ix_(test, fit)])
    return [float(SVC(kernel="precomputed", C=c).fit(k_fit, y[fit]).score(k_test, y[test])) for c in cs]


def _svm_outer_fold(x: np.ndarray, y: np.ndarray, dist: np.ndarray, tr: np.ndarray, te: np.ndarray,
                    inner: StratifiedKFold, cs: tuple[float, ...]) -> tuple[float, float]:
    scores = np.array([_rbf_fit_score(x, y, dist, tr[itr], tr[iva], cs) for itr, iva in inner.split(x[tr], y[tr])])
    best = float(cs[int(np.argmax(scores.mean(axis=0)))])  # GridSearchCV: first C with the highest mean
    return _rbf_fit_score(x, y, dist, tr, te, (best,))[0], best
