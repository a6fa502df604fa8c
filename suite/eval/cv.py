"""Cross-validated classifier accuracy: outer stratified k-fold, inner grid search (nested CV).

The fold split is seeded (unlike GraphCL's original evaluation), and every protocol choice is
returned with the result so it can be recorded.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

SVM_CS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)


def cv_accuracy(
    x: Any, y: Any, make_estimator: Callable[[], Any], param_grid: dict[str, Any] | None = None, *, folds: int = 10,
    inner_folds: int = 5, seed: int = 0, n_jobs: int | None = None,
) -> dict[str, Any]:
    """Mean/std accuracy over ``folds`` outer stratified folds; hyper-parameters chosen on the
    training part of each fold by an inner ``inner_folds`` grid search (never on the test fold)."""
    x = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)
    y = np.asarray(y.detach().cpu() if hasattr(y, "detach") else y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"features ({x.shape[0]}) and labels ({y.shape[0]}) differ in length")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or inf")
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
                    cs: tuple[float, ...] = SVM_CS, n_jobs: int | None = None) -> dict[str, Any]:
    """GraphCL's SVM protocol with a seeded split: RBF SVC, C chosen by inner grid search."""
    out = cv_accuracy(x, y, lambda: SVC(kernel="rbf"), {"C": list(cs)}, folds=folds, inner_folds=inner_folds,
                      seed=seed, n_jobs=n_jobs)
    out["protocol"]["classifier"] = "SVC(kernel='rbf')"
    return out
