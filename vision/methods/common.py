"""What a loss needs besides the embeddings, built from the batch: labels (supcon), the X-CLR
soft graph indexed by labels (xclr), IoU weights (tsimclr).

Shapes: labels (N,), class_graph (C, C), iou (N,) -> keyword arguments for ``loss(...)``.
"""
from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor

import suite.losses as L
from suite import distributed as sd
from suite.losses.graphs import sample_graph


def check_views_for_loss(loss: L.ContrastiveLoss, views: int) -> None:
    if views < 2:
        raise ValueError(f"contrastive pretraining needs views >= 2, got {views}")
    if views > 2 and not loss.multi_view:
        raise ValueError(f"loss {loss.name!r} takes two views; got views = {views} (multi-view losses: cacr, uaur, cmc)")


def loss_extras(loss: L.ContrastiveLoss, labels: Tensor | None = None, class_graph: Tensor | None = None,
                iou: Tensor | None = None, iou_tau: float = 1.0, captions: Tensor | None = None) -> dict[str, Any]:
    """Keyword inputs for ``loss``: labels, similarity (N, N) from the (C, C) class graph (or, with ``captions``
    (N, D), each sample's caption embedding as ``similarity_embeddings``: X-CLR on image-caption data), IoU
    weights."""
    extra: dict[str, Any] = {}
    params = inspect.signature(loss.forward).parameters
    if "labels" in loss.requires:
        if labels is None:
            raise ValueError(f"loss {loss.name!r} needs labels")
        extra["labels"] = labels
    if "similarity" in loss.requires and captions is not None:
        extra["similarity_embeddings"] = captions
    elif "similarity" in loss.requires:
        if labels is None or class_graph is None:
            raise ValueError(f"loss {loss.name!r} needs labels and a class similarity graph")
        g = class_graph.to(labels.device)
        if sd.is_distributed():  # local samples x all ranks' samples: (N, W*N)
            extra["similarity"] = g[labels][:, sd.gather_nograd(labels)]
        else:
            extra["similarity"] = sample_graph(g, labels)
    if iou is not None and "weights" in params:
        extra["weights"] = L.iou_weights(iou, iou_tau)
    return extra
