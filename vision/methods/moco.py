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
- key BN (MoCo's Shuffle-BN, Sec. 3.3): the key batch's BatchNorm statistics must not be those of its queries.
  Under torch.distributed (``shuffle_ranks``, the default) every rank's keys are gathered, shuffled by one random
  permutation drawn on rank 0 and broadcast, each rank encodes its slice of the shuffled batch and the keys are
  gathered and unshuffled by the inverse permutation (``_batch_shuffle_ddp`` / ``_batch_unshuffle_ddp`` of MoCo's
  ``builder.py``): a rank's keys are normalised with statistics of other ranks' images. In one process the key
  batch is shuffled and run in ``bn_splits`` chunks (the single-process form); with one chunk the shuffle changes
  no key, and a GPU skips it;
- projection head (``vision.models.ProjectionHead``): MoCo v2's is Linear-ReLU-Linear (``head="mocov2"``, no
  BatchNorm; the query's statistics cannot reach the key through the head), chosen by the trainer's ``proj_head``.

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
    MoCo does, so the first step already has negatives.

    The write position and the fill count live on the host (a step's enqueue is one slice copy per buffer, and
    ``get()`` a flip and a roll, no index arithmetic on the device: a GPU step is bound by the host); their buffers
    ``ptr`` and ``count`` are written when the state is saved, and read once after a load."""

    def __init__(self, size: int, dim: int, random_init: bool = False) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"queue size must be >= 1, got {size}")
        self.size = int(size)
        self.register_buffer("keys", torch.zeros(size, dim))
        self.register_buffer("labels", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))  # next slot to write (saved state)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))  # filled slots (saved state)
        if random_init:
            self.keys.copy_(torch.nn.functional.normalize(torch.randn(size, dim), dim=1))
            self.count.fill_(size)
        # the host's copies of ``ptr`` and ``count`` (None: read from the buffers at the next use, after a load)
        self._ptr: int | None = 0
        self._count: int | None = int(self.count)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self._ptr = self._count = None  # read once from the loaded buffers

    def _save_to_state_dict(self, *args: Any, **kwargs: Any) -> None:
        self.ptr.fill_(self.position())
        self.count.fill_(self.filled())
        super()._save_to_state_dict(*args, **kwargs)

    def filled(self) -> int:
        """Filled slots (the host's copy of ``count``; read from the device once after a load)."""
        if self._count is None:
            self._count = int(self.count)
        return self._count

    def position(self) -> int:
        """The next slot to write (the host's copy of ``ptr``; read from the device once after a load)."""
        if self._ptr is None:
            self._ptr = int(self.ptr) % self.size
        return self._ptr

    @torch.no_grad()
    def enqueue(self, keys: Tensor, labels: Tensor | None = None) -> None:
        """Write ``keys`` (B, d) over the oldest entries (B > size keeps the last ``size``)."""
        b = keys.shape[0]
        if b > self.size:
            keys, b = keys[-self.size :], self.size
            labels = labels[-self.size :] if labels is not None else None
        p = self.position()
        for lo, hi, src in ((p, min(p + b, self.size), 0), (0, p + b - self.size, self.size - p)):  # at most 2 spans
            if hi > lo:
                self.keys[lo:hi] = keys[src : src + hi - lo]
                if labels is None:
                    self.labels[lo:hi] = -1
                else:
                    self.labels[lo:hi] = labels[src : src + hi - lo]
        self._ptr = (p + b) % self.size
        self._count = min(self.filled() + b, self.size)

    @torch.compiler.disable  # the position is a host int: a compiled forward would be recompiled for each of its values
    def get(self, labels: bool = True) -> tuple[Tensor, Tensor | None]:
        """Filled entries, newest first: keys (q, d), labels (q,) (None with ``labels=False``) with q = min(enqueued,
        size). The newest key stands at slot ptr - 1: slots ptr - 1, ..., 0, size - 1, ..., ptr."""
        c, p = self.filled(), self.position()

        def newest_first(x: Tensor) -> Tensor:
            if c == self.size:
                return x.flip(0).roll(p, 0) if p else x.flip(0)
            if p >= c:  # not yet wrapped: slots [p - c, p)
                return x[p - c : p].flip(0)
            return torch.cat([x[:p].flip(0), x[self.size - (c - p) :].flip(0)])

        return newest_first(self.keys), newest_first(self.labels) if labels else None

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
                 class_graph: Tensor | None = None, bn_splits: int = 1, iou_tau: float = 1.0,
                 shuffle_ranks: bool = True) -> None:
        super().__init__()
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must be in [0, 1], got {momentum}")
        self.encoder, self.loss = encoder, loss
        self.key_encoder = copy.deepcopy(encoder)
        for p in self.key_encoder.parameters():
            p.requires_grad_(False)
        self.momentum, self.bn_splits, self.iou_tau = float(momentum), max(1, int(bn_splits)), iou_tau
        self.shuffle_ranks = bool(shuffle_ranks)  # Shuffle-BN across ranks under torch.distributed
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
    def _keys(self, x: Tensor, shuffle: bool | None = None) -> Tensor:
        """Key projections of x (B, C, S, S) with shuffled BatchNorm batches -> (B, d).

        Under torch.distributed with ``shuffle_ranks``: MoCo's cross-rank shuffle (:meth:`_keys_shuffled_ranks`;
        every rank must pass the same B). In one process: shuffled and split into ``bn_splits`` BatchNorm batches.
        With one BatchNorm batch (``bn_splits`` 1) that shuffle changes no key (the batch statistics are over the same
        images, summed in another order): on a GPU it is skipped, its randperm, gathers and argsort being launches of
        a step bound by the host; the CPU keeps it (``shuffle`` None: that rule), and with it the random stream of its
        committed results."""
        if self.shuffle_ranks and sd.is_distributed() and shuffle is not False:
            return self._keys_shuffled_ranks(x)
        if shuffle is None:
            shuffle = self.bn_splits > 1 or x.device.type != "cuda"
        perm = torch.randperm(x.shape[0], device=x.device) if shuffle else None
        xs = x if perm is None else x[perm]
        k = self._encode_keys(xs)
        return k if perm is None else k[torch.argsort(perm)]

    def _encode_keys(self, x: Tensor) -> Tensor:
        if self.bn_splits == 1:
            return self.key_encoder(x)
        return torch.cat([self.key_encoder(c) for c in x.chunk(self.bn_splits)])  # a loop over bn_splits chunks

    @torch.no_grad()
    def _keys_shuffled_ranks(self, x: Tensor) -> Tensor:
        """MoCo's ``_batch_shuffle_ddp`` / ``_batch_unshuffle_ddp``: x (B, ...) on each of W ranks -> keys (B, d) of
        this rank's images, each computed on the rank the permutation sent it to (in ``bn_splits`` chunks there)."""
        import torch.distributed as dist

        w, r, b = sd.world_size(), sd.rank(), x.shape[0]
        xg = sd.gather_nograd(x)  # (W*B, ...) in rank order
        perm = torch.randperm(w * b, device=x.device) if r == 0 else torch.empty(w * b, dtype=torch.long,
                                                                                device=x.device)
        dist.broadcast(perm, src=0)  # one permutation on every rank
        k = self._encode_keys(xg[perm.view(w, b)[r]])  # (B, d): this rank's slice of the shuffled batch
        kg = sd.gather_nograd(k)  # (W*B, d): the keys of xg[perm]
        inverse = torch.argsort(perm)  # xg[i] is at position inverse[i] of the shuffled batch
        return kg[inverse.view(w, b)[r]]

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
            qk, ql = self.queue.get(labels="labels" in self.loss.requires or "similarity" in self.loss.requires)
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
