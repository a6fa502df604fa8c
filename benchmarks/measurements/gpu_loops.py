"""The plain loops of ``make gpu-bench`` (:mod:`benchmarks.measurements.gpu_bench`): each front-end's training step as
the fastest public PyTorch code writes it (same model, batch, precision, augmentation and optimiser as the suite's), and
InfoNCE as the field writes it (:func:`nt_xent`)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from suite.train import data_workers, optimizer_options, to_device

TEMPERATURE = 0.1  # the suite's InfoNCE default, which the plain loops use too


# the plain loops' fairness version, recorded with every front-end row: 2 = issue 68's loops (SimCSE tokenised once
# and indexed on the device, every host copy from pinned memory, the vision encoder converted to channels_last, the
# suite's prefetch depth, whole batches). Rows without it timed handicapped plain loops: the table leaves them out.
PLAIN_VERSION = 2


def nt_xent(a: Tensor, b: Tensor, t: float = TEMPERATURE, queue: Tensor | None = None) -> Tensor:
    """InfoNCE as the field writes it: the 2N normalised embeddings, their similarity matrix (and the queue's
    normalised keys as more candidates), cross-entropy."""
    n = a.shape[0]
    z = torch.cat([a, b])
    z = F.normalize(z.float() if z.dtype in (torch.float16, torch.bfloat16) else z, dim=1)
    cands = z if queue is None else torch.cat([z, F.normalize(queue.to(z.dtype), dim=1)])
    sim = (z @ cands.T / t).fill_diagonal_(float("-inf"))
    # the targets made on the device: a host-built copy, from pageable memory, waits for the device (PLAIN_WAITED)
    target = torch.cat([torch.arange(n, 2 * n, device=a.device), torch.arange(n, device=a.device)])
    return F.cross_entropy(sim, target)


class Plain:
    """A plain loop: ``step()`` trains one batch; ``examples`` per step."""

    examples = 0

    def step(self) -> None:
        raise NotImplementedError

    def run(self, k: int) -> None:
        for _ in range(k):
            self.step()


def suite_prefetch_depth() -> int:
    """Batches each ``DataLoader`` worker of the suite's :class:`suite.train.batches.Prefetch` keeps ready: read from
    the loader it builds (PyG's ``DataLoader`` keeps torch's default of 2), so the plain loops keep the same."""
    from suite.train.batches import Prefetch

    return int(Prefetch(lambda b: b, workers=1).loader.prefetch_factor)  # type: ignore[union-attr]


def plain_loader(items: Any, batch: int, device: torch.device, workers: int | None = None) -> Any:
    """PyG's ``DataLoader`` as the plain graph loops use it: shuffled whole batches, the suite's workers
    (:func:`suite.train.data_workers`) and prefetch depth, pinned batches on CUDA (as the engine pins its own)."""
    from torch_geometric.loader import DataLoader

    w = data_workers(device) if workers is None else workers
    return DataLoader(items, batch_size=batch, shuffle=True, drop_last=True, num_workers=w,
                      pin_memory=device.type == "cuda", persistent_workers=w > 0,
                      **({"prefetch_factor": suite_prefetch_depth()} if w else {}))


def _compiled(model: nn.Module, compile: bool) -> Any:
    """``model`` through ``torch.compile`` where the bench compares compiled sides (``--compile``)."""
    return torch.compile(model) if compile else model


class PlainSimCLR(Plain):
    """SimCLR as the fastest public loops write it: images on the device, NHWC convolutions and cuDNN's autotuner on
    CUDA, bf16 autocast, fused SGD, the loss read back never. ``channels_last`` (default: on CUDA, where the suite
    converts its own encoder) converts the encoder itself (:meth:`vision.models.Encoder.channels_last`), so its
    ``features`` keep the NHWC views as they come; ``compile``: the model through ``torch.compile``."""

    def __init__(self, images: Tensor, batch: int, encoder: str, width: float, bf16: bool, device: torch.device,
                 channels_last: bool | None = None, compile: bool = False) -> None:
        from vision.models import build_encoder
        from vision.transforms import ViewAugment, get_recipe

        self.device, self.batch, self.examples = device, batch, batch
        self.x = images.to(device)
        self.encoder = build_encoder(encoder, width, 32, 128).to(device)
        if device.type == "cuda" if channels_last is None else channels_last:
            self.encoder.channels_last()
        self.fmt = self.encoder.memory_format
        self.model = _compiled(self.encoder, compile)
        torch.backends.cudnn.benchmark = device.type == "cuda"
        self.aug = ViewAugment(get_recipe("cifar", 32), 2).to(device)
        self.opt = torch.optim.SGD(self.encoder.parameters(), lr=0.06 * batch / 256, momentum=0.9, weight_decay=5e-4,
                                   **optimizer_options(device))
        self.dtype = torch.bfloat16 if bf16 else None
        self.gen = torch.Generator(device).manual_seed(0)

    def views(self) -> Tensor:
        idx = torch.randint(0, self.x.shape[0], (self.batch,), device=self.device, generator=self.gen)
        return self.aug(self.x[idx]).views.flatten(0, 1).contiguous(memory_format=self.fmt)  # (2N, C, S, S)

    def step(self) -> None:
        v = self.views()
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            z = self.model(v)
        loss = nt_xent(*z.float().chunk(2))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class PlainMoCo(PlainSimCLR):
    """MoCo-v2: the key encoder a momentum copy (one ``_foreach_lerp_``), a queue of keys on the device; the loss the
    suite's MoCo takes with InfoNCE (the query and its key both anchors, the queue as further negatives)."""

    def __init__(self, images: Tensor, batch: int, encoder: str, width: float, bf16: bool, device: torch.device,
                 queue: int, momentum: float = 0.99, channels_last: bool | None = None, compile: bool = False) -> None:
        super().__init__(images, batch, encoder, width, bf16, device, channels_last, compile)
        self.key_encoder = copy.deepcopy(self.encoder).requires_grad_(False)
        self.key = _compiled(self.key_encoder, compile)
        self.queue = F.normalize(torch.randn(queue, 128, device=device), dim=1)
        self.ptr, self.m = 0, momentum

    def step(self) -> None:
        v = self.views()
        n = self.batch
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            q = self.model(v[:n])
            with torch.no_grad():
                k = self.key(v[n:])
        loss = nt_xent(q.float(), k.float(), queue=self.queue)
        k = F.normalize(k.float(), dim=1)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(self.key_encoder.parameters()), list(self.encoder.parameters()), 1 - self.m)
            end = min(self.ptr + n, self.queue.shape[0])
            self.queue[self.ptr:end] = k[: end - self.ptr]
            self.ptr = end % self.queue.shape[0]


def _forever(loader: Any) -> Any:
    while True:
        yield from loader


class PlainGraphCL(Plain):
    """GraphCL with PyG's own ``DataLoader`` (:func:`plain_loader`: the suite's workers and prefetch depth, pinned
    batches on CUDA), the suite's GIN and augmentation."""

    def __init__(self, data: Any, batch: int, device: torch.device, loss: str = "infonce", workers: int | None = None,
                 compile: bool = False) -> None:
        from graph.augment import build_augmentation
        from graph.tu.graphcl import TUConfig, make_views
        from graph.tu.model import GraphCLModel
        from graph.tu.presets import resolve

        cfg = TUConfig()
        self.device, self.examples, self.make_views = device, batch, make_views
        self.loader = plain_loader(data.graphs, batch, device, workers)
        self.batches = _forever(self.loader)
        _, self.mode, _ = resolve(loss, None, cfg.views)
        self.aug = build_augmentation(cfg.aug, cfg.aug_ratio)
        self.gen = torch.Generator(device).manual_seed(0)
        self.encoder = GraphCLModel(data.num_features, cfg.hidden, cfg.layers).to(device)
        self.model = _compiled(self.encoder, compile)
        self.opt = torch.optim.Adam(self.encoder.parameters(), lr=cfg.lr, **optimizer_options(device))

    def step(self) -> None:
        b = to_device(next(self.batches), self.device)
        z = [self.model(v.x, v.edge_index, v.batch, v.num_graphs)
             for v in self.make_views(b, self.mode, self.aug, self.gen)]
        loss = nt_xent(z[0], z[1])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class PlainMol(Plain):
    """Molecular pretraining (Hu et al.'s GIN) with PyG's ``DataLoader`` over the molecules as ``Data``
    (:func:`plain_loader`), the suite's two augmentations (on the host, as the suite does), each view copied to the
    device from pinned memory (:func:`suite.train.to_device`, as the suite copies its own), fused Adam."""

    def __init__(self, graphs: Any, batch: int, layers: int, dim: int, device: torch.device,
                 workers: int | None = None, compile: bool = False) -> None:
        from torch_geometric.data import Data

        from graph.mol.data import get_featurizer
        from graph.mol.model import MolGIN
        from graph.mol.pretrain import ContrastiveMolModel, PretrainMolConfig, make_augmentation

        cfg = PretrainMolConfig()
        data = []
        for i in range(len(graphs)):
            b = graphs.batch([i])
            data.append(Data(x=b.x, edge_index=b.edge_index, edge_attr=b.edge_attr))
        self.loader = plain_loader(data, batch, device, workers)
        self.batches = _forever(self.loader)
        self.aug1, self.aug2 = make_augmentation(cfg.aug1, cfg.aug_ratio), make_augmentation(cfg.aug2, cfg.aug_ratio)
        self.gen = torch.Generator().manual_seed(0)
        self.device, self.examples = device, batch
        self.encoder = ContrastiveMolModel(MolGIN(layers, dim, cfg.dropout, get_featurizer("hu"))).to(device)
        self.model = _compiled(self.encoder, compile)
        self.opt = torch.optim.Adam(self.encoder.parameters(), lr=cfg.lr, **optimizer_options(device))

    def step(self) -> None:
        b = next(self.batches)
        v1 = to_device(self.aug1(b, self.gen), self.device)
        v2 = to_device(self.aug2(b, self.gen), self.device)
        loss = nt_xent(self.model(v1), self.model(v2))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class PlainSimCSE(Plain):
    """Unsupervised SimCSE as SimCSE's own ``train.py`` writes it: the data set tokenised once before training (its
    ``datasets.map``), here held on the device padded to ``max_length`` and indexed each step, trimmed to the batch's
    longest sentence (the lengths kept on the host: no read of the device), the indices copied from pinned memory;
    one forward of the batch twice (two dropout masks), mean pooling, InfoNCE, fused AdamW, bf16 autocast."""

    def __init__(self, folder: Path, texts: list[str], batch: int, bf16: bool, device: torch.device,
                 max_length: int = 32, compile: bool = False) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(folder))
        enc = self.tok(texts, padding="max_length", truncation=True, max_length=max_length, return_tensors="pt")
        self.ids, self.mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)  # (n, max_length)
        self.lengths = enc["attention_mask"].sum(1)  # (n,) on the host
        self.encoder = AutoModel.from_pretrained(str(folder)).to(device).train()
        self.model = _compiled(self.encoder, compile)
        self.batch, self.device, self.examples = batch, device, batch
        self.opt = torch.optim.AdamW(self.encoder.parameters(), lr=3e-5, **optimizer_options(device))
        self.dtype = torch.bfloat16 if bf16 else None
        self.gen = torch.Generator().manual_seed(0)

    def tokens(self) -> tuple[Tensor, Tensor]:
        """A batch's ``input_ids`` and ``attention_mask``, (B, T) on the device, T its longest sentence."""
        idx = torch.randperm(len(self.lengths), generator=self.gen)[: self.batch]
        t = int(self.lengths[idx].max())
        idx = to_device(idx, self.device)
        return self.ids[idx, :t], self.mask[idx, :t]

    def step(self) -> None:
        ids, mask = (t.repeat(2, 1) for t in self.tokens())
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            h = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask[..., None].to(h.dtype)
        z = (h * m).sum(1) / m.sum(1).clamp_min(1)
        loss = nt_xent(*z.float().chunk(2))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
