"""Linear probe on frozen features: standardised features, multinomial logistic regression."""
from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def _np(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def linear_probe(train_x: Any, train_y: Any, test_x: Any, test_y: Any, C: float = 1.0, max_iter: int = 1000,
                 seed: int = 0) -> dict[str, float]:
    """Fit on (train_x, train_y), report ``{"train_acc", "test_acc"}``."""
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter, random_state=seed))
    clf.fit(_np(train_x), _np(train_y))
    return {"train_acc": float(clf.score(_np(train_x), _np(train_y))), "test_acc": float(clf.score(_np(test_x), _np(test_y)))}
