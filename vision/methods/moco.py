"""MoCo-v2 (He et al. 2020; Chen et al. 2020c) with any loss of the core.

- query encoder f_q (trained) and key encoder f_k, an exponential moving average of f_q:
  theta_k <- m * theta_k + (1 - m) * theta_q after every optimiser step (m = 0.99 by default);
- two-view losses: view 0 is the query, view 1 the key from f_k (no gradient): loss(q, k_1);
- losses that take ``keys=`` (CACR, App. Algorithm 3): every view is a query from f_q and every view
  a key from f_k; the loss gets the queries (V, N, d) and ``keys=`` (V, N, d), positives are the other
  views' keys and negatives the queue plus the same-view queries; the last view's keys are enqueued;
- other multi-view losses (CMC) get the stack (q, k_1, ..., k_K) of shape (V, N, d);
- a FIFO queue of the last Q keys (:class:`KeyQueue`, with their labels) is passed to the loss as
  ``queue=`` (and ``queue_labels`` / ``queue_similarity`` for supcon / xclr); the current keys are
  enqueued after the loss (gathered over ranks under torch.distributed);
- key BN: the key batch is shuffled and run in ``bn_splits`` chunks so BatchNorm statistics cannot
  leak which key belongs to which query (MoCo's Shuffle-BN, single-process form).

Shapes: views (V, N, C, S, S), labels (N,) -> scalar loss.
"""
from __future__ import annotations

import copy
import inspect
from typing import Any

import torch
from torch import Tensor, nn

import suite.losses as L
from suite import distributed as sd
from vision.methods.common import loss_extras
from vision.models import Encoder


class KeyQueue(nn.Module):
    """Ring buffer of the last ``size`` keys (Q, d) and their labels (Q,); ``get()`` returns the
    filled entries newest first. ``random_init`` fills it with random unit vectors (label -1) as
    MoCo does, so the first step already has negatives."""

    def __init__(self, size: int, dim: int, random_init: bool = False) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"queue size must be >= 1, got {size}")
        self.size = int(size)
        self.register_buffer("keys", torch.zeros(size, dim))
        self.register_buffer("labels", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))  # next slot to write
        self.register_buffer("count", torch.zeros((), dtype=torch.long))  # filled slots
        if random_init:
            self.keys.copy_(torch.nn.functional.normalize(torch.randn(size, dim), dim=1))
            self.count.fill_(size)
        self._count: int | None = int(self.count)  # the host's copy of ``count``: no device read per step

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self._count = None  # read once from the loaded buffer

    def filled(self) -> int:
        """Filled slots (the host's copy of ``count``; read from the device once after a load)."""
        if self._count is None:
            self._count = int(self.count)
        return self._count

    @torch.no_grad()
    def enqueue(self, keys: Tensor, labels: Tensor | None = None) -> None:
        """Write ``keys`` (B, d) over the oldest entries (B > size keeps the last ``size``)."""
        b = keys.shape[0]
        if labels is None:
            labels = torch.full((b,), -1, dtype=torch.long, device=keys.device)
        if b > self.size:
            keys, labels, b = keys[-self.size :], labels[-self.size :], self.size
        idx = (self.ptr + torch.arange(b, device=keys.device)) % self.size
        self.keys[idx] = keys.detach().to(self.keys.dtype)
        self.labels[idx] = labels.long()
        self.ptr.copy_((self.ptr + b) % self.size)
        self.count.copy_(torch.clamp(self.count + b, max=self.size))
        self._count = min(self.filled() + b, self.size)

    def get(self) -> tuple[Tensor, Tensor]:
        """Filled entries, newest first: keys (q, d), labels (q,) with q = min(enqueued, size)."""
        c = self.filled()
        order = (self.ptr - 1 - torch.arange(c, device=self.keys.device)) % self.size
        return self.keys[order], self.labels[order]

    def __len__(self) -> int:
        return self.filled()


@torch.no_grad()
def momentum_update(key: nn.Module | list[Tensor], query: nn.Module | list[Tensor], m: float) -> None:
    """theta_k <- m theta_k + (1 - m) theta_q for every parameter (the key encoder's BN running
    statistics stay its own, as in MoCo); the modules, or their parameter lists (:class:`MoCo` keeps them, so a step
    does not walk the modules again: a GPU step is bound by the host)."""
    kp = key if isinstance(key, list) else list(key.parameters())
    torch._foreach_mul_(kp, m)
    torch._foreach_add_(kp, query if isinstance(query, list) else list(query.parameters()), alpha=1.0 - m)


class MoCo(nn.Module):
    def __init__(self, encoder: Encoder, loss: L.ContrastiveLoss, queue_size: int = 4096, momentum: float = 0.99,
                 class_graph: Tensor | None = None, bn_splits: int = 1, iou_tau: float = 1.0) -> None:
        super().__init__()
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must be in [0, 1], got {momentum}")
        self.encoder, self.loss = encoder, loss
        self.key_encoder = copy.deepcopy(encoder)
        for p in self.key_encoder.parameters():
            p.requires_grad_(False)
        self.momentum, self.bn_splits, self.iou_tau = float(momentum), max(1, int(bn_splits)), iou_tau
        out_dim = encoder.head.out_dim
        self.queue = KeyQueue(queue_size, out_dim, random_init=True)
        self.register_buffer("class_graph", class_graph if class_graph is not None else None, persistent=False)
        # CACR's Algorithm 3 form (all V views through both encoders) for a loss that takes keys=
        self._takes_keys = loss.multi_view and "keys" in inspect.signature(loss.forward).parameters
        self._params: tuple[list[Tensor], list[Tensor]] | None = None  # (key's, query's): see momentum_update

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> "MoCo":
        self._params = None  # .to() / .cuda() may give the parameters new tensors: walked again at the next update
        return super()._apply(fn, *args, **kwargs)

    @property
    def query_encoder(self) -> Encoder:
        return self.encoder

    @torch.no_grad()
    def _keys(self, x: Tensor) -> Tensor:
        """Key projections of x (B, C, S, S) with shuffled, split BatchNorm batches -> (B, d)."""
        perm = torch.randperm(x.shape[0], device=x.device)
        chunks = x[perm].chunk(self.bn_splits)
        k = torch.cat([self.key_encoder(c) for c in chunks])  # a loop over bn_splits chunks
        return k[torch.argsort(perm)]

    def forward(self, views: Tensor, labels: Tensor | None = None, iou: Tensor | None = None) -> Tensor:
        v, n = views.shape[:2]
        takes_keys = self._takes_keys
        if takes_keys:  # CACR Algorithm 3: all V views through both encoders
            q = self.encoder(views.flatten(0, 1)).view(v, n, -1)  # (V, N, d)
            k = self._keys(views.flatten(0, 1)).view(v, n, -1).to(q.dtype)  # (V, N, d)
        else:
            q = self.encoder(views[0])[None]  # (1, N, d)
            k = self._keys(views[1:].flatten(0, 1)).view(v - 1, n, -1).to(q.dtype)  # (V-1, N, d)
        extra: dict[str, Any] = loss_extras(self.loss, labels, self.class_graph, iou, self.iou_tau)
        if len(self.queue) > 0 and self.loss.has_negatives:
            qk, ql = self.queue.get()
            extra["queue"] = qk
            if "labels" in self.loss.requires:
                extra["queue_labels"] = ql
            if "similarity" in self.loss.requires and self.class_graph is not None and labels is not None:
                g = self.class_graph.to(q.device)
                sim = g[labels][:, ql.clamp_min(0)]  # (N, Q)
                extra["queue_similarity"] = sim.masked_fill(ql[None] < 0, float("-inf"))  # unlabelled: pure negatives
        if takes_keys:
            loss = self.loss(q, queue=extra.pop("queue", None), keys=k, **extra)
        else:
            z = torch.cat([q, k])  # (V, N, d): the query, then the keys
            loss = L.apply_loss(self.loss, z if self.loss.multi_view else z[:2], **extra)
        self._pending = (k[-1].detach(), labels)
        return loss

    @torch.no_grad()
    def after_step(self) -> None:
        """Momentum update of the key encoder, then enqueue this step's keys."""
        if self._params is None:
            self._params = (list(self.key_encoder.parameters()), list(self.encoder.parameters()))
        momentum_update(*self._params, self.momentum)
        pending = getattr(self, "_pending", None)
        if pending is not None:
            keys, labels = pending
            keys = sd.gather_nograd(keys.float())
            labels = sd.gather_nograd(labels) if labels is not None else None
            self.queue.enqueue(keys, labels)
            self._pending = None
