"""2-D feature points kept in the registry for the report's pictures (the t-SimCLR Gaussian mixtures, CIFAR-10
with d_z = 2): point i of a split is the metrics ``point_x``, ``point_y`` and ``point_label`` at step i, so a
picture is drawn from the registry (or its JSONL snapshot) alone."""
from __future__ import annotations

from typing import Any

import numpy as np
from torch import Tensor


def log_points(run: Any, xy: Tensor, labels: Tensor, split: str) -> None:
    """Log the rows of ``xy`` (n, 2) with their integer ``labels`` (n,) to a registry run."""
    if xy.dim() != 2 or xy.shape[1] != 2 or labels.shape != xy.shape[:1]:
        raise ValueError(f"points must be (n, 2) with (n,) labels, got {tuple(xy.shape)} and {tuple(labels.shape)}")
    for i in range(xy.shape[0]):
        run.log_many({"point_x": float(xy[i, 0]), "point_y": float(xy[i, 1]), "point_label": float(labels[i])},
                     split=split, step=i)


def read_points(registry: Any, run_id: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The points a run logged in ``split``: ((n, 2) array, (n,) integer labels), in step order."""
    rows = {name: {r["step"]: r["value"] for r in registry.metrics(run_id, name) if r["split"] == split}
            for name in ("point_x", "point_y", "point_label")}
    steps = sorted(rows["point_x"])
    xy = np.array([[rows["point_x"][s], rows["point_y"][s]] for s in steps]).reshape(-1, 2)
    return xy, np.array([int(rows["point_label"][s]) for s in steps])
