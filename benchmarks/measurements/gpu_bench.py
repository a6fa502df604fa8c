"""``make gpu-bench`` (``python -m benchmarks.measurements.gpu_bench``): the suite's training step beside a plain
PyTorch loop of the same model, batch, precision, augmentation and optimiser, on one device, interleaved (issue 47).

Front-ends (``--size full``, the issue's sizes; ``tiny``: the same code at a size the CPU runs in seconds, for CI):

* ``vision-simclr`` / ``vision-moco``: SimCLR and MoCo-v2, CIFAR ResNet-18 (``tiny``: the small convnet), batch 512,
  bf16 on CUDA, the suite's own ``ViewAugment``, SGD; 10,240 synthetic CIFAR-sized images written as CIFAR pickles;
* ``graph-tu``: GraphCL on a generated TU-like set (1,152 graphs of 39 nodes on average, about PROTEINS' 1,113),
  batch 128,
  the suite's GIN and augmentation; the plain loop collates with PyG's own ``DataLoader`` (workers on CUDA);
* ``graph-mol``: molecular pretraining with Hu et al.'s GIN (5 x 300) on 20,480 generated molecular graphs, batch 256;
  the plain loop: PyG's ``DataLoader`` over the molecules as ``Data``;
* ``text-simcse``: unsupervised SimCSE with a MiniLM-L6-sized BERT (6 x 384, random weights and a WordPiece vocabulary
  trained on the generated sentences: no download), batch 128, max length 32, bf16 on CUDA; the plain loop: the
  Hugging Face model, the tokenizer called every step, mean pooling, InfoNCE, AdamW.

Every loss is InfoNCE (NT-Xent, 2N - 1 candidates, both directions; MoCo: the query against its key and the queue),
the plain loops computing it as the field writes it (normalise, matrix product, cross-entropy). The suite side is the
front-end's own :meth:`~suite.train.run.Task.build` driven by :class:`suite.train.Engine` (what ``suite ... train``
runs, less evaluation and export). After the size's ``warmup`` steps of each, ``rounds`` rounds of ``steps`` steps
(``full``: 10, 9 and 20) alternate between the two (the plain round runs inside the suite's step callback, the device
synchronised at each round's ends); rates are medians over rounds, the ratio the median of the per-round ratios
(their lowest and highest recorded beside it). On CUDA each side's peak
step memory is the most allocated above what was allocated when its round began (both models live together).

The loss core: every loss, dense and tiled (the rows per tile ``chunk_size="auto"`` takes above its dense limit; on
CUDA the tiles are the fused kernels of :mod:`suite.losses.fused` where a loss takes them), forward and backward at
2N = 8,192 and 32,768
(``tiny``: 256), d = 128, fp32, against the plain InfoNCE at the same 2N (three-view losses against three plain pairs),
interleaved round by round.

Every number is recorded in the registry (task ``gpu-bench`` per front-end, ``gpu-bench-loss`` per loss, path and 2N;
the device, torch and CUDA versions in the config), then ``benchmarks/results/gpu_bench.md`` is rendered from the
registry alone (:func:`table`). ``--no-record`` prints the table of this call only.
"""
from __future__ import annotations

import argparse
import copy
import inspect
import math
import os
import pickle
import random
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from suite.train import data_workers, optimizer_options, to_device

RESULTS = Path(__file__).resolve().parents[1] / "results" / "gpu_bench.md"
OUT = RESULTS  # the file :func:`table` renders (benchmarks.report: TABLES)
TASK, LOSS_TASK = "gpu-bench", "gpu-bench-loss"
TEMPERATURE = 0.1  # the suite's InfoNCE default, which the plain loops use too
FRONT_END_TARGET = 0.9  # the suite's rate / the plain loop's (issue 47)
# the loss core's targets (issue 47): time / the plain InfoNCE's (three-view: / three plain pairs'), dense paths
LOSS_TARGETS = {"infonce-dense": 1.1, **{f"{n}-dense": 1.5 for n in ("dcl", "macl", "supcon", "xclr", "tsimclr",
                                                                     "cacr", "cmc", "uaur")}}


@dataclass(frozen=True)
class Size:
    images: int
    image_batch: int
    encoder: str
    width: float
    queue: int
    graphs: int
    graph_nodes: int
    graph_batch: int
    molecules: int
    mol_batch: int
    mol_layers: int
    mol_dim: int
    sentences: int
    text_batch: int
    text_layers: int
    text_hidden: int
    text_heads: int
    loss_n: tuple[int, ...]  # 2N of the loss core
    warmup: int
    rounds: int
    steps: int


# Each data set a whole number of batches: the suite keeps an epoch's last partial batch in one process, the plain
# loops draw full ones, so a remainder gave the suite cheaper steps (10,000 images at 512: one step in 20 of 272).
SIZES = {
    "full": Size(images=10_240, image_batch=512, encoder="resnet18", width=0, queue=4096, graphs=1152, graph_nodes=39,
                 graph_batch=128, molecules=20_480, mol_batch=256, mol_layers=5, mol_dim=300, sentences=20_480,
                 text_batch=128, text_layers=6, text_hidden=384, text_heads=12, loss_n=(8192, 32768), warmup=10,
                 rounds=9, steps=20),
    "tiny": Size(images=256, image_batch=32, encoder="convnet", width=8, queue=64, graphs=64, graph_nodes=12,
                 graph_batch=16, molecules=128, mol_batch=16, mol_layers=2, mol_dim=32, sentences=256,
                 text_batch=16, text_layers=2, text_hidden=32, text_heads=2, loss_n=(256,), warmup=2, rounds=2,
                 steps=3),
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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


RATIO_TEXT = ("ratio = the median over interleaved rounds of one side's rate / the median of the other's (front-ends: "
              "suite / plain, >= 0.9 the target; the loss core: time / the plain InfoNCE's time, lower is better), "
              "its lowest and highest per-round ratio beside it in brackets")


def median_ratio(side: Sequence[float], other: Sequence[float]) -> dict[str, float]:
    """The one ratio of the bench (:data:`RATIO_TEXT`): ``median(side) / median(other)`` over rounds that alternated
    the two, and the lowest and highest per-round ``side[i] / other[i]`` as its range.

    Example: >>> median_ratio([2.0, 4.0, 3.0], [2.0, 2.0, 3.0])["ratio"]
    1.5
    """
    per = [a / b for a, b in zip(side, other)]
    return {"ratio": statistics.median(side) / statistics.median(other), "ratio_min": min(per), "ratio_max": max(per)}


# the plain loops' fairness version, recorded with every front-end row: 2 = issue 68's loops (SimCSE tokenised once
# and indexed on the device, every host copy from pinned memory, the vision encoder converted to channels_last, the
# suite's prefetch depth, whole batches). Rows without it timed handicapped plain loops: the table leaves them out.
PLAIN_VERSION = 2

# code versions whose GPU rows timed the plain loops with their targets copied from the host each step (from pageable
# memory: a wait for the device): their ratios may favour the suite by an amount not measured
PLAIN_WAITED = {"acf966b5329e", "b6dde2f308c1", "1a8b50dc6148", "6e37ede529db"}


# ----------------------------------------------------------------------------- the data (generated, seeded)

def write_cifar(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` random 32 x 32 images in CIFAR-10's pickle layout (5 training batches, a test batch of n / 10)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    per = max(1, n // 5)
    for i in range(1, 7):
        m = per if i <= 5 else max(10, n // 10)
        x = torch.randint(0, 256, (m, 3 * 32 * 32), generator=g, dtype=torch.uint8).numpy()
        name = f"data_batch_{i}" if i <= 5 else "test_batch"
        with open(folder / name, "wb") as f:
            pickle.dump({"data": x, "labels": [j % 10 for j in range(m)]}, f)
    return root


def tu_graphs(n: int, nodes: int, seed: int = 0) -> Any:
    """A TU-like set: ``n`` connected random graphs of ``nodes`` nodes on average, 3 one-hot node labels, 2 classes."""
    from torch_geometric.data import Data

    from graph.tu.data import TUData

    rng = random.Random(seed)
    graphs = []
    for g in range(n):
        k = rng.randint(max(3, nodes // 2), nodes * 3 // 2)
        src = list(range(k - 1)) + [rng.randrange(k) for _ in range(k)]
        dst = list(range(1, k)) + [rng.randrange(k) for _ in range(k)]
        e = torch.tensor([src + dst, dst + src])
        e = e[:, e[0] != e[1]]
        x = F.one_hot(torch.tensor([rng.randrange(3) for _ in range(k)]), 3).float()
        graphs.append(Data(x=x, edge_index=e, y=torch.tensor([g % 2])))
    return TUData("GPUBENCH", graphs, 3, 2, "generated")


def mol_graphs(n: int, seed: int = 0) -> Any:
    """``n`` molecule-sized graphs (9-38 atoms, a chain plus rings) with Hu et al.'s feature columns, packed as the
    molecular front-end holds a featurised corpus (no RDKit needed)."""
    from graph.mol.data import HU, MolGraphs

    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(9, 39, (n,), generator=g)
    xs, es, eas, nptr, eptr = [], [], [], [0], [0]
    for k in sizes.tolist():
        xs.append(torch.stack([torch.randint(0, d, (k,), generator=g) for d in HU.atom_dims], 1))
        src = torch.cat([torch.arange(k - 1), torch.randint(0, k, (k // 6 + 1,), generator=g)])
        dst = torch.cat([torch.arange(1, k), torch.randint(0, k, (k // 6 + 1,), generator=g)])
        keep = src != dst
        e = torch.stack([torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])])
        es.append(e)
        eas.append(torch.stack([torch.randint(0, d - 2, (e.shape[1],), generator=g) for d in HU.bond_dims], 1))
        nptr.append(nptr[-1] + k)
        eptr.append(eptr[-1] + e.shape[1])
    return MolGraphs(torch.cat(xs).short(), torch.cat(es, 1).short(), torch.cat(eas).short(), torch.tensor(nptr),
                     torch.tensor(eptr), [""] * n)


WORDS = ("a the of and to in is was for on as with by he it at from his an were are which this also be has or had "
         "first one their its new after who they two her she been other when there all during into school time may "
         "years more most only over city some world would where later up such used many can state about national "
         "out known university united then made").split()


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(n)]


def write_bert(folder: Path, texts: list[str], layers: int, hidden: int, heads: int) -> Path:
    """A BERT of the given size with random weights and a WordPiece vocabulary trained on ``texts``, saved as a
    Hugging Face model folder (MiniLM-L6: 6 x 384, 12 heads, 1,536 intermediate)."""
    from transformers import BertConfig, BertModel

    from text.mlm.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, 4096, folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=512),
              add_pooling_layer=False).save_pretrained(folder)
    return folder


# ----------------------------------------------------------------------------- the plain loops

class Plain:
    """A plain loop: ``step()`` trains one batch; ``examples`` per step."""

    examples = 0

    def step(self) -> None:
        raise NotImplementedError

    def run(self, k: int) -> None:
        for _ in range(k):
            self.step()


def suite_prefetch_depth() -> int:
    """Batches each ``DataLoader`` worker of the suite's :class:`suite.train.engine.Prefetch` keeps ready: read from
    the loader it builds (PyG's ``DataLoader`` keeps torch's default of 2), so the plain loops keep the same."""
    from suite.train.engine import Prefetch

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
        z = [self.model(v.x, v.edge_index, v.batch, v.num_graphs) for v in self.make_views(b, self.mode, self.aug, self.gen)]
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


# ----------------------------------------------------------------------------- the suite's side

def suite_side(task: Any, cfg: Any, device: torch.device, folder: Path) -> tuple[Any, Any]:
    """The front-end's own training (``task.build``) and the :class:`suite.train.Engine` the run owner makes for it."""
    from suite.train import Engine
    from suite.train.run import RunContext
    from suite.train.seeding import seed_everything

    seed_everything(cfg.seed)
    ctx = RunContext(cfg, device, folder, cfg.seed)
    training = task.build(cfg, ctx)
    takes = inspect.signature(Engine).parameters
    kw = {k: getattr(training, k) for k in ("log_every", "compile") if k in takes and hasattr(training, k)}
    engine = Engine(training.model, training.optimizer, device=device, scheduler=training.scheduler,
                    precision=training.precision, grad_clip=training.grad_clip, loss=training.loss,
                    generators=ctx.generators, desc=f"gpu-bench {task.name}", **kw)
    ctx.engine = engine
    return engine, training


@dataclass
class Work:
    name: str
    unit: str  # what an example is
    suite: Callable[[Path], tuple[Any, Any]]  # scratch folder -> (engine, training)
    plain: Callable[[Path], Plain]
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rounds:
    suite_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)
    suite_peak: float = math.nan  # the CPU: none measured
    plain_peak: float = math.nan


def _peak_above(device: torch.device, base: int) -> float:
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20 if device.type == "cuda" else float("nan")


def _max(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def _mark(device: torch.device) -> int:
    if device.type != "cuda":
        return 0
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def interleave(engine: Any, training: Any, plain: Plain, device: torch.device, warmup: int, rounds: int,
               steps: int) -> Rounds:
    """``warmup`` steps of each, then ``rounds`` rounds of ``steps`` steps alternating plain, suite (the plain round
    runs in the suite's step callback; the device is synchronised at every round's ends)."""
    out = Rounds()
    total = warmup + rounds * steps
    clock: dict[str, float] = {}

    def plain_round() -> None:
        sync(device)
        base = _mark(device)
        t0 = time.perf_counter()
        plain.run(steps)
        sync(device)
        out.plain_s.append(time.perf_counter() - t0)
        out.plain_peak = _max(out.plain_peak, _peak_above(device, base))

    def on_step() -> None:
        if training.on_step is not None:
            training.on_step()
        s = engine.step
        if s < warmup or (s - warmup) % steps:
            return
        sync(device)
        if "t0" in clock:
            out.suite_s.append(time.perf_counter() - clock["t0"])
            out.suite_peak = _max(out.suite_peak, _peak_above(device, int(clock["base"])))
        else:
            plain.run(warmup)
        if s < total:
            plain_round()
            clock["base"] = _mark(device)
            clock["t0"] = time.perf_counter()

    engine.fit(training.batches, training.step, max_steps=total, size=training.size, on_step=on_step,
               **_prefetch(training))
    return out


def _prefetch(training: Any) -> dict[str, Any]:
    """The engine's collate / workers arguments of a training (none for code from before they existed)."""
    if getattr(training, "collate", None) is None:
        return {}
    return {"collate": training.collate, "workers": training.workers}


def _batch_size(training: Any) -> int:
    return len(training.batches(0)[0])


def front_ends(size: Size, device: torch.device, bf16: bool, scratch: Path, compile: bool = False) -> list[Work]:
    """The five front-ends at ``size``: the suite's task and the plain loop, on the same generated data; ``compile``:
    both sides' models through ``torch.compile`` (the suite's ``--compile``)."""
    works: list[Work] = []
    images = scratch / "images"

    def vision(framework: str) -> Callable[[Path], tuple[Any, Any]]:
        def build(folder: Path) -> tuple[Any, Any]:
            from vision.config import PretrainConfig
            from vision.train import PretrainTask

            cfg = PretrainConfig(dataset="cifar10", data_root=str(images), framework=framework, loss="infonce",
                                 encoder=size.encoder, width=size.width, batch_size=size.image_batch,
                                 queue_size=size.queue, bf16=bf16, device=str(device), eval_every=0,
                                 registry=False, out=str(folder / framework), compile=compile)
            return suite_side(PretrainTask(cfg), cfg, device, folder)
        return build

    def plain_vision(framework: str) -> Callable[[Path], Plain]:
        def build(folder: Path) -> Plain:
            from vision.data import load_cifar_pickle

            x = load_cifar_pickle(images).train_x
            if framework == "moco":
                return PlainMoCo(x, size.image_batch, size.encoder, size.width, bf16, device, size.queue,
                                 compile=compile)
            return PlainSimCLR(x, size.image_batch, size.encoder, size.width, bf16, device, compile=compile)
        return build

    write_cifar(images, size.images)
    common = {"precision": "bf16" if bf16 else "fp32"}
    for fw in ("simclr", "moco"):
        works.append(Work(f"vision-{fw}", "images", vision(fw), plain_vision(fw),
                          {**common, "encoder": size.encoder, "batch": size.image_batch, "images": size.images}))

    tu = tu_graphs(size.graphs, size.graph_nodes)

    def graph_suite(folder: Path) -> tuple[Any, Any]:
        from graph.tu.graphcl import TUConfig, TUTask

        cfg = TUConfig(dataset="GPUBENCH", loss="infonce", batch_size=size.graph_batch, device=str(device),
                       epochs=10**6, eval_epochs=[], out=str(folder / "tu"), compile=compile)
        return suite_side(TUTask(tu), cfg, device, folder)

    works.append(Work("graph-tu", "graphs", graph_suite,
                      lambda folder: PlainGraphCL(tu, size.graph_batch, device, compile=compile),
                      {"precision": "fp32", "batch": size.graph_batch, "graphs": size.graphs}))

    mols = mol_graphs(size.molecules)

    def mol_suite(folder: Path) -> tuple[Any, Any]:
        from graph.mol.pretrain import MolPretrainTask, PretrainMolConfig

        cfg = PretrainMolConfig(loss="infonce", batch_size=size.mol_batch, num_layers=size.mol_layers,
                                emb_dim=size.mol_dim, device=str(device), registry=False, out=str(folder / "mol"),
                                compile=compile)
        return suite_side(MolPretrainTask(mols), cfg, device, folder)

    works.append(Work("graph-mol", "molecules", mol_suite,
                      lambda folder: PlainMol(mols, size.mol_batch, size.mol_layers, size.mol_dim, device,
                                              compile=compile),
                      {"precision": "fp32", "batch": size.mol_batch, "gin": f"{size.mol_layers}x{size.mol_dim}"}))

    texts = sentences(size.sentences)
    (scratch / "sentences.txt").write_text("\n".join(texts) + "\n")
    bert = write_bert(scratch / "bert", texts, size.text_layers, size.text_hidden, size.text_heads)

    def text_suite(folder: Path) -> tuple[Any, Any]:
        from suite.gpu_check import write_data
        from text.methods.simcse import SimCSEConfig, SimCSETask

        cfg = SimCSEConfig(backbone=str(bert), pooling="mean", mlp_head=False, data=str(scratch / "sentences.txt"),
                           loss="infonce", batch_size=size.text_batch, max_steps=10**6, eval_every=0, bf16=bf16,
                           device=str(device), out=str(folder / "text"), compile=compile)
        stand_in = write_data(scratch / "data")["root"]  # a stand-in STS-B dev split: the task reads it when built
        was = os.environ.get("SUITE_DATA")
        os.environ["SUITE_DATA"] = str(stand_in)
        try:
            return suite_side(SimCSETask(cfg), cfg, device, folder)
        finally:
            if was is None:
                os.environ.pop("SUITE_DATA", None)
            else:
                os.environ["SUITE_DATA"] = was

    works.append(Work("text-simcse", "sentences", text_suite,
                      lambda folder: PlainSimCSE(bert, texts, size.text_batch, bf16, device, compile=compile),
                      {**common, "batch": size.text_batch,
                       "bert": f"{size.text_layers}x{size.text_hidden}"}))
    return works


def profile(engine: Any, training: Any, plain: Plain, device: torch.device, steps: int, path: Path) -> None:
    """torch.profiler tables of ``steps`` more steps of each side (the operators by device and by host time)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    kw = _prefetch(training)
    parts = []
    for side, run in (("suite", lambda: engine.fit(training.batches, training.step, max_steps=engine.step + steps,
                                                     size=training.size, on_step=training.on_step, **kw)),
                      ("plain", lambda: plain.run(steps))):
        sync(device)
        with torch_profile(activities=acts) as prof:
            run()
            sync(device)
        parts += [f"== {side}: {steps} steps, by {key}", prof.key_averages().table(sort_by=key, row_limit=25),
                  f"== {side}: by self_cpu_time_total", prof.key_averages().table(sort_by="self_cpu_time_total",
                                                                                   row_limit=25)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))


def measure_front_end(work: Work, size: Size, device: torch.device, scratch: Path,
                      profile_to: Path | None = None) -> dict[str, float]:
    engine, training = work.suite(scratch)
    batch = _batch_size(training)
    plain = work.plain(scratch)
    if profile_to is not None:
        engine.fit(training.batches, training.step, max_steps=size.warmup, size=training.size,
                   on_step=training.on_step, **_prefetch(training))
        plain.run(size.warmup)
        profile(engine, training, plain, device, size.steps, profile_to / f"profile-{work.name}.txt")
        return {}
    r = interleave(engine, training, plain, device, size.warmup, size.rounds, size.steps)
    suite_rates, plain_rates = [size.steps / t for t in r.suite_s], [size.steps / t for t in r.plain_s]
    suite_rate, plain_rate = statistics.median(suite_rates), statistics.median(plain_rates)
    out = {"suite_steps_per_s": suite_rate, "plain_steps_per_s": plain_rate,
           "suite_examples_per_s": suite_rate * batch, "plain_examples_per_s": plain_rate * plain.examples,
           **median_ratio(suite_rates, plain_rates), "suite_peak_mb": r.suite_peak, "plain_peak_mb": r.plain_peak,
           "batch": float(batch), "host_reads_per_step": getattr(engine, "host_reads", float("nan")) / max(engine.step, 1)}
    del engine, training, plain
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------------------- the loss core

def loss_cases(n: int, device: torch.device) -> dict[str, tuple[Callable[[], Tensor], list[Tensor], int]]:
    """Every loss of the core (installed plugins left out), dense and tiled, at 2N = ``n``, d = 128, fp32; the plain
    InfoNCE at 2N (and three plain pairs for the three-view losses). Value: (forward, leaves, views)."""
    import suite.losses as L
    from suite.losses.tiling import auto_rows

    gen = torch.Generator().manual_seed(0)
    out: dict[str, tuple[Callable[[], Tensor], list[Tensor], int]] = {}
    a, b, c = (torch.randn(n // 2, 128, generator=gen).to(device).requires_grad_() for _ in range(3))
    out["plain-infonce"] = (lambda: nt_xent(a, b), [a, b], 2)
    out["plain-infonce-3pairs"] = (lambda: nt_xent(a, b) + nt_xent(a, c) + nt_xent(b, c), [a, b, c], 3)
    labels = torch.randint(0, 10, (n // 2,), generator=gen).to(device)
    cg = torch.rand(10, 10, generator=gen)
    cg = ((cg + cg.T) / 2).fill_diagonal_(1.0).to(device)
    plugins = set(L.plugins())
    for name in sorted(set(L.available()) - plugins):
        for path, chunk in (("dense", None), ("tiled", auto_rows(n))):
            loss = L.build(name, chunk_size=chunk).to(device)
            cls = type(loss)
            extra: dict[str, Any] = {}
            if "labels" in cls.requires:
                extra["labels"] = labels
            if "similarity" in cls.requires:
                if chunk is None:
                    extra["similarity"] = cg[labels][:, labels]
                else:
                    extra["similarity_embeddings"] = F.one_hot(labels, 10).float() + 0.3
            if cls.multi_view:
                views = torch.stack([a, b, c]).detach().requires_grad_()
                out[f"{name}-{path}"] = ((lambda loss=loss, views=views, extra=extra: loss(views, **extra)), [views], 3)
            else:
                out[f"{name}-{path}"] = ((lambda loss=loss, extra=extra: loss(a, b, **extra)), [a, b], 2)
    return out


def measure_losses(n: int, device: torch.device, repeats: int) -> dict[str, dict[str, float]]:
    """Median forward + backward time of every case, interleaved; the ratio to the plain InfoNCE (three-view losses:
    to three plain pairs) by :func:`median_ratio`. The losses run as the engine runs them: their input checks deferred to
    the engine's read (:func:`suite.losses.checks.deferred`)."""
    from suite.losses.checks import DeferredChecks, deferred

    cases = loss_cases(n, device)
    times: dict[str, list[float]] = {k: [] for k in cases}
    peaks: dict[str, float] = {}
    failed: dict[str, str] = {}

    checks = DeferredChecks()

    def once(k: str) -> float:
        fn, leaves, _ = cases[k]
        for t in leaves:
            t.grad = None
        sync(device)
        base = _mark(device)
        t0 = time.perf_counter()
        with deferred(checks):  # as the engine runs a loss: its input checks read with the loss, not in the step
            fn().backward()
        sync(device)
        checks.pending.clear()
        peaks[k] = _max(peaks.get(k, math.nan), _peak_above(device, base))
        return time.perf_counter() - t0

    for k in list(cases):  # warm-up (and cases that cannot run at this size: out of memory)
        try:
            once(k)
        except torch.cuda.OutOfMemoryError as exc:
            failed[k] = f"out of memory ({str(exc).splitlines()[0][:80]})"
            del cases[k]
            torch.cuda.empty_cache()
    for _ in range(repeats):
        for k in cases:
            times[k].append(once(k))
    out: dict[str, dict[str, float]] = {}
    for k in cases:
        ref = times["plain-infonce-3pairs" if cases[k][2] == 3 else "plain-infonce"]
        out[k] = {"ms": 1e3 * statistics.median(times[k]), **median_ratio(times[k], ref),
                  "peak_mb": peaks.get(k, math.nan)}
    for k, why in failed.items():
        out[k] = {"ms": math.nan, "ratio": math.nan, "peak_mb": math.nan, "failed": why}  # type: ignore[dict-item]
    return out


# ----------------------------------------------------------------------------- record, table

def device_info(device: torch.device) -> dict[str, Any]:
    """What the rows were measured on (:func:`suite.machine.environment`: device, driver, CUDA, torch, Triton, machine)
    and the host's torch threads."""
    from suite.machine import environment

    return {**environment(device), "threads": str(torch.get_num_threads())}


def _record(registry: Any, task: str, dataset: str, config: dict[str, Any], metrics: dict[str, float]) -> None:
    from benchmarks.measurements.measured import Measurement, record

    record(registry, Measurement(task, dataset, "infonce" if task == TASK else dataset.rsplit("-", 2)[0], config,
                                 {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}, "ratio"))


def _fmt(v: float, digits: int = 0) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:,.{digits}f}"


def _range(m: dict[str, float]) -> str:
    """" (lowest-highest)" of a row's per-round ratios, where its run recorded them under :data:`RATIO_TEXT`'s
    definition (issue 68 on)."""
    if "ratio_min" not in m:
        return ""
    return f" ({_fmt(m['ratio_min'], 2)}-{_fmt(m['ratio_max'], 2)})"


def _env(c: dict[str, Any]) -> str:
    """The versions and machine a row names (those it recorded: rows before issue 68 have no driver or machine)."""
    parts = [f"{label} {c[k]}" for k, label in (("torch", "torch"), ("cuda", "CUDA"), ("driver", "driver"),
                                                ("triton", "Triton"), ("machine", "machine")) if c.get(k)]
    return ", ".join(parts)


def _reference(case: str) -> str:
    """The plain case a loss-core case is timed against: three plain pairs for a multi-view loss."""
    import suite.losses as L

    name = case.rsplit("-", 1)[0]
    multi = case == "plain-infonce-3pairs" or (name in L.available() and L.loss_class(name).multi_view)
    return "plain-infonce-3pairs" if multi else "plain-infonce"


def fair_front_end(r: Any) -> bool:
    """A front-end row timed against issue 68's plain loops (:data:`PLAIN_VERSION` recorded with it)."""
    return int(r.config.get("plain", 1)) >= PLAIN_VERSION


def front_end_ratio(m: dict[str, float]) -> float:
    """:data:`RATIO_TEXT` from a row's median rates (a row before issue 68 recorded the median of per-round ratios as
    its ``ratio``: the table never shows that one)."""
    return m["suite_steps_per_s"] / m["plain_steps_per_s"]


def table(registry: Any, allow_dirty: bool = False) -> str:
    """``gpu_bench.md`` from the registry alone: the newest fair run of each front-end and loss case per device and
    size (front-ends: :func:`fair_front_end`; the loss core: not at :data:`PLAIN_WAITED`), each row naming its code
    version and machine; the runs left out named by their code versions."""
    from benchmarks.measurements.measured import every

    def fe_key(r: Any) -> tuple[Any, ...]:
        return (r.config.get("device"), r.config.get("size"),
                r.row["dataset"] + (" (compiled)" if r.config.get("compile") else ""))

    fe_every = every(registry, TASK, fe_key, allow_dirty)
    fe_all = {k: [r for r in runs if fair_front_end(r)] for k, runs in fe_every.items()}
    fe = {k: runs[-1] for k, runs in fe_all.items() if runs}
    ls_every = every(registry, LOSS_TASK, lambda r: (r.config.get("device"), r.config.get("size"), r.row["dataset"],
                                                     int(r.config.get("n", 0))), allow_dirty)
    ls = {k: [r for r in runs if r.code_version not in PLAIN_WAITED] for k, runs in ls_every.items()}
    ls = {k: runs[-1] for k, runs in ls.items() if runs}
    plain_ms = {(k[0], k[1], k[3], r.code_version, k[2]): r.metrics.get("ms", math.nan)
                for k, runs in ls_every.items() if k[2].startswith("plain-") for r in runs}
    lines = ["# The suite beside plain PyTorch loops (`make gpu-bench`)", "",
             "Made by `python -m benchmarks.measurements.gpu_bench` from the registry alone (tasks `gpu-bench`, "
             "`gpu-bench-loss`). Each front-end's training step (the front-end's own task driven by the engine) "
             "beside a plain loop of the same model, batch, precision, augmentation and optimiser, interleaved on "
             f"one device, whole batches on both sides; {RATIO_TEXT}. Each row names its code version and the "
             "machine it ran on. Peak memory: the most allocated above the round's start (CUDA only). `tiny` is the "
             "CI size on the CPU: it checks the plumbing, its ratios say little.", ""]
    left = sorted({r.code_version[:7] for runs in fe_every.values() for r in runs if not fair_front_end(r)})
    if left:
        lines += [f"Front-end runs at code {', '.join(left)} are left out: they timed plain loops before issue 68's "
                  "fixes (SimCSE tokenising every step in the training thread, the molecule views and SimCSE's "
                  "tokens copied from pageable memory, the vision encoder not converted to channels_last, PyG's "
                  "prefetch depth of 2 against the suite's 4, and at the older codes InfoNCE's targets built on the "
                  "host), which favoured the suite by amounts not measured.", ""]
    waited = sorted({r.code_version[:7] for runs in ls_every.values() for r in runs} & {v[:7] for v in PLAIN_WAITED})
    if waited:
        lines += [f"Loss-core runs at code {', '.join(waited)} are left out: their plain InfoNCE built its targets on "
                  "the host and copied them from pageable memory every step (a wait for the device).", ""]
    for dev, sz in sorted({(k[0], k[1]) for k in fe_every} | {(k[0], k[1]) for k in ls_every}, key=str):
        rows = sorted((k, r) for k, r in fe.items() if k[:2] == (dev, sz))
        lines += [f"## {dev}, size `{sz}`", ""]
        if not rows:
            lines += [f"No front-end run against the fair plain loops yet: the target (>= {FRONT_END_TARGET} of the "
                      "plain loop for every front-end) is open, with no fair value.", ""]
        else:
            lines += ["| front-end | batch | suite steps/s | plain steps/s | suite examples/s | plain examples/s | ratio "
                      "(per-round range) | suite peak MB | plain peak MB | host reads / step | code | versions, machine "
                      "| earlier fair runs: ratio (code) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for k, r in rows:
                m = r.metrics
                lines.append(f"| {k[2]} | {int(m.get('batch', 0))} | {_fmt(m['suite_steps_per_s'], 1)} | "
                             f"{_fmt(m['plain_steps_per_s'], 1)} | {_fmt(m['suite_examples_per_s'])} | "
                             f"{_fmt(m['plain_examples_per_s'])} | **{_fmt(front_end_ratio(m), 2)}**{_range(m)} | "
                             f"{_fmt(m.get('suite_peak_mb', math.nan))} | {_fmt(m.get('plain_peak_mb', math.nan))} | "
                             f"{_fmt(m.get('host_reads_per_step', math.nan), 2)} | {r.code_version[:7]} | "
                             f"{_env(r.config)} | "
                             + (", ".join(f"{_fmt(front_end_ratio(e.metrics), 2)} ({e.code_version[:7]})"
                                          for e in fe_all[k][:-1]) or "-") + " |")
            short = [f"{k[2]} {front_end_ratio(r.metrics):.2f}" for k, r in rows
                     if front_end_ratio(r.metrics) < FRONT_END_TARGET]
            lines += ["", f"Short of the target ({FRONT_END_TARGET}): " + (", ".join(short) if short else "none") + "."]
            lines.append("")
        lrows = sorted(((k, r) for k, r in ls.items() if k[:2] == (dev, sz)), key=lambda kr: (kr[0][3], kr[0][2]))
        if lrows:
            lines += [f"### The loss core on {dev}, size `{sz}`: forward + backward, d = 128, fp32", "",
                      "Ratio: the case's median time / the plain InfoNCE's (normalise, matrix product, cross-entropy) "
                      "in the same interleaved call; three-view losses (cacr, cmc, uaur) against three plain pairs. "
                      "Targets: dense InfoNCE <= 1.1, two-view seed losses <= 1.5, three-view <= 1.5.", "",
                      "| 2N | case | ms | ratio (per-round range) | peak MB | code | versions, machine |",
                      "|---|---|---|---|---|---|---|"]
            ratios = {}
            for k, r in lrows:
                m = r.metrics
                ref = plain_ms.get((k[0], k[1], k[3], r.code_version, _reference(k[2])), math.nan)
                ratios[k] = m.get("ms", math.nan) / ref
                lines.append(f"| {int(r.config.get('n', 0)):,} | {k[2]} | {_fmt(m.get('ms', math.nan), 2)} | "
                             f"{_fmt(ratios[k], 2)}{_range(m)} | {_fmt(m.get('peak_mb', math.nan))} | "
                             f"{r.code_version[:7]} | {_env(r.config)} |")
            short = [f"{k[2]} at 2N = {k[3]:,}: {ratios[k]:.2f} ({r.code_version[:7]}; target {LOSS_TARGETS[k[2]]})"
                     for k, r in lrows if k[2] in LOSS_TARGETS and not ratios[k] <= LOSS_TARGETS[k[2]]]
            lines += ["", "Short of the targets (dense paths), open at their last fair value: "
                      + ("; ".join(short) if short else "none") + "."]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.measurements.gpu_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA where there is one), cpu or cuda[:N]")
    ap.add_argument("--size", choices=sorted(SIZES), default=None, help="full on a GPU, tiny on the CPU (default)")
    ap.add_argument("--only", default="", help="comma-separated: front-end names, or 'losses'")
    ap.add_argument("--skip-losses", action="store_true")
    ap.add_argument("--repeats", type=int, default=0, help="loss-core rounds (default: 10 full, 3 tiny)")
    ap.add_argument("--registry", default=None, help="registry (default: $SUITE_REGISTRY)")
    ap.add_argument("--no-record", action="store_true", help="print this call's table only")
    ap.add_argument("--compile", action="store_true", help="both sides of each front-end through torch.compile (the "
                    "suite's --compile beside a compiled plain loop); recorded as its own rows")
    ap.add_argument("--out", default=str(RESULTS), help="the Markdown table (from the registry)")
    ap.add_argument("--profile", default="", help="a folder: instead of measuring, torch.profiler tables of each "
                    "front-end's two sides (a profiler slows every launch after it: never in a measuring process)")
    args = ap.parse_args(argv)
    from suite.train import resolve_device

    device = resolve_device(args.device)
    size_name = args.size or ("full" if device.type == "cuda" else "tiny")
    size = SIZES[size_name]
    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    info = {**device_info(device), "size": size_name, **({"compile": True} if args.compile else {})}
    only = {s for s in args.only.split(",") if s}
    from suite.registry import Registry

    reg = Registry(args.registry) if not args.no_record else Registry(str(Path(tempfile.mkdtemp()) / "r.sqlite"))
    os.environ.setdefault("SUITE_NO_PROGRESS", "1")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        scratch = Path(tmp)
        # the loss core first, in a process nothing else has run in yet (front-ends leave workers and caches behind)
        if not args.skip_losses and not args.profile and (not only or "losses" in only):
            for n in size.loss_n:
                res = measure_losses(n, device, args.repeats or (10 if size_name == "full" else 3))
                for case, m in res.items():
                    print(f"loss 2N={n} {case}: {m['ms']:.2f} ms, ratio {m['ratio']:.2f}", flush=True)
                    _record(reg, LOSS_TASK, case, {**info, "n": n, "d": 128, "precision": "fp32",
                                                   **({"failed": m["failed"]} if "failed" in m else {})}, m)
        if not only or only - {"losses"}:
            for work in front_ends(size, device, bf16, scratch, args.compile):
                if only and work.name not in only:
                    continue
                try:
                    m = measure_front_end(work, size, device, scratch, Path(args.profile) if args.profile else None)
                except Exception:  # noqa: BLE001 - one front-end's fault is reported, the others still measured
                    failures.append(work.name)
                    traceback.print_exc()
                    continue
                if args.profile:
                    continue
                print(f"{work.name}: suite {m['suite_examples_per_s']:,.0f} {work.unit}/s, plain "
                      f"{m['plain_examples_per_s']:,.0f}/s, ratio {m['ratio']:.2f}", flush=True)
                _record(reg, TASK, work.name, {**info, **work.config, "plain": PLAIN_VERSION}, m)
    text = table(reg, allow_dirty=True)
    if args.no_record:
        print(text)
    else:
        Path(args.out).write_text(text)
        print(f"gpu-bench: {args.out}")
    if failures:
        print(f"gpu-bench: {len(failures)} front-end(s) failed: {', '.join(failures)} (tracebacks above)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
