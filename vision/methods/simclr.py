"""SimCLR (Chen et al. 2020): one encoder, V augmented views, in-batch negatives, any loss of the core.

The V views (V, N, C, S, S) go through the encoder as one batch of V*N images; the projections
(V, N, d) go to ``suite.losses.apply_loss`` (two-view losses need V = 2; cacr / uaur / cmc take V
views, K = V - 1 positives per anchor). Under torch.distributed the losses gather negatives across
ranks themselves.

Shapes: views (V, N, C, S, S), labels (N,) -> scalar loss.
Example: >>> m = SimCLR(build_encoder("convnet", 8), suite.losses.build("infonce")); m(torch.randn(2, 4, 3, 8, 8))
"""
from __future__ import annotations

from typing import Any

from torch import Tensor, nn

import suite.losses as L
from vision.methods.common import loss_extras
from vision.models import Encoder


class SimCLR(nn.Module):
    def __init__(self, encoder: Encoder, loss: L.ContrastiveLoss, class_graph: Tensor | None = None,
                 iou_tau: float = 1.0) -> None:
        super().__init__()
        self.encoder, self.loss = encoder, loss
        self.iou_tau = iou_tau
        self.register_buffer("class_graph", class_graph if class_graph is not None else None, persistent=False)

    def forward(self, views: Tensor, labels: Tensor | None = None, iou: Tensor | None = None,
                embed_only: bool = False, captions: Tensor | None = None) -> Tensor:
        """The loss, or with ``embed_only`` the projections (V, N, d) (gradient caching encodes chunks
        through the (DDP-wrapped) method and takes the loss of the whole batch with :meth:`loss_of`);
        ``captions`` (N, D): each image's caption embedding, X-CLR's graph of image-caption data."""
        v, n = views.shape[:2]
        z = self.encoder(views.flatten(0, 1)).view(v, n, -1)  # (V, N, d)
        return z if embed_only else self.loss_of(z, labels, iou, captions)

    def loss_of(self, z: Tensor, labels: Tensor | None = None, iou: Tensor | None = None,
                captions: Tensor | None = None) -> Tensor:
        """The loss of projections ``z`` (V, N, d)."""
        extra: dict[str, Any] = loss_extras(self.loss, labels, self.class_graph, iou, self.iou_tau, captions)
        return L.apply_loss(self.loss, z, **extra)

    @property
    def query_encoder(self) -> Encoder:
        return self.encoder

    def after_step(self) -> None:
        """Nothing to update after the optimiser step (MoCo updates its key encoder here)."""
