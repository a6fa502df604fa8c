"""Contrastive pretraining of the molecular GIN (GraphCL transfer setting, You et al. 2020, Sec. 4.2).

Two augmented views of every molecule in a batch (default: node dropping and subgraph, 20 %, from
:mod:`graph.augment`), encoder -> mean pool -> projection head, any ``suite.losses`` loss.
Adam lr 1e-3, batch 256. The run owner (:func:`suite.train.run.run`) does the rest: a checkpoint after every
epoch (``<out>/checkpoints/step-<N>.pt``: model, optimiser, sampler position, every RNG state incl. the
augmentation generator; loss buffers and history as task state), so a resumed run continues bit-for-bit, and at
the end the encoder in ``<out>/export`` (``MolGIN.from_pretrained``, with its model card), which fine-tuning loads.

Example:
    >>> cfg = load_config(PretrainMolConfig, "graph/configs/mol_pretrain_cpu.yaml", {"loss": "macl"})
    >>> res = pretrain(cfg)  # the run owner's RunResult: res.export is the encoder
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor, nn

from graph.augment import chunk_views
from graph.mol.data import MolGraphs, get_featurizer, load_smiles_file
from graph.mol.card import mol_card
from graph.mol.model import MolGIN, MolGINConfig, projection_head
from suite import presets
from suite.config import RunOptions
from suite.paths import data_path
from suite.train import CachedStep, data_workers, optimizer_options, to_device
from suite.train.legacy import Earlier
from suite.train.run import EXPORT, RunContext, RunResult, Task, Training, run

# Loss presets: suite.presets, setting "graph_transfer" (graphcl, macl, infonce). GraphCL's transfer code
# (chem/pretrain_graphcl.py) contrasts view 1 against view 2 only (cross-view negatives, one direction) with the
# positive removed from the denominator, i.e. DCL (MACL App. B.5), tau = 0.1; MACL keeps GraphCL's set-up with
# tau0 = 0.1, alpha = 0.5, A0 = 0 (MACL App. B.5).
SETTING = "graph_transfer"
CORPORA = {"zinc": ("zinc", "moses", "train.csv.gz"), "moses": ("zinc", "moses", "train.csv.gz")}


@dataclass
class PretrainMolConfig(MolGINConfig, RunOptions):
    # where and how it runs, not what (RunOptions): left out of the experiment config a resume must match
    RUN_HELP: ClassVar[dict[str, str]] = {
        "out": "output folder (default: runs/mol-pretrain/<loss>-<config hash>)",
        "keep_checkpoints": "newest checkpoints kept (0: none once the run has finished)"}
    corpus: str = field(default="zinc", metadata={"help": "'zinc' (local MOSES train set) or a SMILES file path"})
    limit: int | None = field(default=None, metadata={"help": "a seeded random subset of this many molecules (default: the whole corpus)"})
    subset_seed: int = 0
    loss: str = field(default="graphcl", metadata={"help": "preset (graphcl, macl) or any suite.losses name"})
    loss_hparams: dict[str, Any] = field(default_factory=dict)
    aug1: str = "drop_nodes"
    aug2: str = "subgraph"
    aug_ratio: float = 0.2
    batch_size: int = 256
    dropout: float = 0.0
    grad_cache_chunk: int = field(default=0, metadata={"help": "gradient caching: encode the batch in chunks of K "
                                                                "molecules (the loss still sees the whole batch); the "
                                                                "GIN's BatchNorm sees chunks, so K is part of the "
                                                                "experiment (0 = off)", "omit_default": True})
    seed: int = 0


def resolve_corpus(corpus: str) -> Path:
    if corpus.lower() in CORPORA:
        p = data_path(*CORPORA[corpus.lower()])
    else:
        p = Path(corpus).expanduser()
    if not p.exists():
        raise ValueError(f"pretraining corpus not found: {p} (give 'zinc' with SUITE_DATA set, or a SMILES file)")
    return p


class ContrastiveMolModel(nn.Module):
    """Encoder + projection head. Shapes: graph batch -> (B, D)."""

    def __init__(self, encoder: MolGIN) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = projection_head(encoder.dim)

    def forward(self, b: Any) -> Tensor:
        return self.head(self.encoder.embed(b))


def make_augmentation(name: str, ratio: float) -> Callable[..., Any]:
    """``aug(pyg_batch, generator) -> pyg_batch`` from :mod:`graph.augment` (TU front-end, issue 3)."""
    from graph.augment import build_augmentation

    return build_augmentation(name, ratio)


def encoder_spec(cfg: PretrainMolConfig) -> dict[str, Any]:
    return {"num_layers": cfg.num_layers, "emb_dim": cfg.emb_dim, "featurizer": cfg.featurizer}


class MolPretrainTask(Task[PretrainMolConfig]):
    """Molecular contrastive pretraining as a :class:`suite.train.run.Task`: the run owner seeds, places, checkpoints
    (every epoch), resumes, records (task ``mol-pretrain``, the training loss as headline) and exports the encoder
    (``<out>/export``: ``MolGIN.from_pretrained``, with its card)."""

    modality, name, primary, eval_split = "graph", "mol-pretrain", ("loss", "train"), None
    earlier = Earlier(checkpoints=("epoch*.pt",))  # the layout before the run owner: <out>/epoch<N>.pt

    def __init__(self, graphs: MolGraphs | None = None) -> None:
        self.graphs = graphs
        self.history: list[dict[str, Any]] = []
        self.feat_rate = float("nan")

    def dataset(self, cfg: PretrainMolConfig) -> str:
        return Path(cfg.corpus).name

    def data_inputs(self, cfg: PretrainMolConfig) -> dict[str, str | Path]:
        """The SMILES corpus read (a corpus handed in as graphs: none); reuse and resume decide on its identity (a
        manifest with a sample's content above 256 MiB, :func:`suite.inputs.data_identity`)."""
        if self.graphs is not None:
            return {}
        try:
            return {"data": resolve_corpus(cfg.corpus)}
        except ValueError:  # not there: the task's own build names it
            return {}

    def loss_name(self, cfg: PretrainMolConfig) -> str:
        # runs and encoders carry the name the user asked for: GraphCL pretraining is ``graphcl``, not its
        # underlying ``dcl`` (the resolved loss and hyper-parameters are in ``loss_hparams``)
        return presets.loss_label(SETTING, cfg.loss, presets_keep_name=True)

    def stem(self, cfg: PretrainMolConfig) -> str:
        return cfg.loss.lower()

    def build(self, cfg: PretrainMolConfig, ctx: RunContext[PretrainMolConfig]) -> Training:
        if cfg.epochs < 1 or cfg.batch_size < 2 or cfg.grad_cache_chunk < 0:
            raise ValueError(f"need epochs >= 1, batch_size >= 2 and grad_cache_chunk >= 0, got {cfg.epochs}, "
                             f"{cfg.batch_size}, {cfg.grad_cache_chunk}")
        # a bad loss is refused before the corpus is read
        loss_fn = presets.make_loss(SETTING, cfg.loss, cfg.loss_hparams, aliases=False, provides=()).loss
        graphs = self.graphs
        if graphs is None:
            t0 = time.perf_counter()
            graphs = load_smiles_file(resolve_corpus(cfg.corpus), cfg.featurizer, cfg.limit, cfg.subset_seed)
            self.feat_rate = len(graphs) / max(time.perf_counter() - t0, 1e-9)  # cache hits make this large
        if len(graphs) < 2:
            raise ValueError(f"pretraining needs at least 2 molecules, got {len(graphs)}")
        self.graphs, device = graphs, ctx.device
        model = ContrastiveMolModel(MolGIN(cfg.num_layers, cfg.emb_dim, cfg.dropout, get_featurizer(cfg.featurizer)))
        model, loss_fn = model.to(device), loss_fn.to(device)
        aug1, aug2 = make_augmentation(cfg.aug1, cfg.aug_ratio), make_augmentation(cfg.aug2, cfg.aug_ratio)
        aug_gen = ctx.generator("aug")

        def step(b: Any) -> Tensor | CachedStep:  # b: the batch collated ahead (Training.collate), in workers on a GPU
            ddp = ctx.engine.ddp  # type: ignore[union-attr]
            v1, v2 = (to_device(aug(b, aug_gen), device) for aug in (aug1, aug2))  # augmented on the CPU (seeded), moved
            if cfg.grad_cache_chunk:  # views made once, encoded in chunks of molecules, the loss over the whole batch
                return CachedStep(lambda c: torch.stack([ddp(c[0]), ddp(c[1])]),
                                  chunk_views([v1, v2], cfg.grad_cache_chunk), lambda z: loss_fn(z[0], z[1]), dim=1)
            return loss_fn(ddp(v1), ddp(v2))  # (B, D) each

        n = len(graphs)
        return Training(model, torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                                **optimizer_options(device)),
                        lambda epoch: ctx.epoch_batches(n, cfg.batch_size, epoch), step, epochs=cfg.epochs,
                        loss=loss_fn, rate_name="mol_per_s", collate=lambda idx: graphs.batch(idx).to_pyg(),
                        workers=data_workers(device), compile=cfg.compile,
                        data_info={"molecules": n, "skipped": graphs.skipped, "featurize_mol_per_s": self.feat_rate})

    def on_epoch(self, cfg: PretrainMolConfig, ctx: RunContext[PretrainMolConfig], training: Training, epoch: int,
                 stats: dict[str, float]) -> None:
        self.history.append({"epoch": epoch, **stats})

    def state(self, cfg: PretrainMolConfig, ctx: RunContext[PretrainMolConfig], training: Training) -> dict[str, Any]:
        return {"loss": training.loss.state_dict(), "history": self.history}

    def restore(self, cfg: PretrainMolConfig, ctx: RunContext[PretrainMolConfig], training: Training,
                state: dict[str, Any]) -> None:
        training.loss.load_state_dict(state["loss"])
        self.history = list(state["history"])

    def export_module(self, cfg: PretrainMolConfig, training: Training) -> nn.Module:
        return training.model.encoder  # MolGIN.save_pretrained

    def card(self, cfg: PretrainMolConfig, ctx: RunContext[PretrainMolConfig], training: Training) -> dict[str, Any]:
        return mol_card(cfg, self.loss_name(cfg), training.loss, ctx.engine.epoch, len(self.graphs),  # type: ignore[arg-type, union-attr]
                        ctx.engine.step, ctx.run, str(ctx.folder / EXPORT))  # type: ignore[union-attr]


def pretrain(cfg: PretrainMolConfig, graphs: MolGraphs | None = None, stop_after: int | None = None) -> RunResult:
    """Run (or resume) pretraining through the run owner; returns the owner's result (``epochs``, ``export``: the
    encoder) with the front-end's summary in ``info``: {"loss", "final_loss", "pretrain_mol_per_s",
    "featurize_mol_per_s", "molecules", "skipped", "history"}.

    ``stop_after`` ends the call after that many epochs, as an interruption would (the owner raises
    KeyboardInterrupt; to test resumption). A checkpoint in the output folder is resumed only if it records the same
    experiment config (else :class:`suite.train.ConfigMismatchError` names the differing keys)."""
    task = MolPretrainTask(graphs)
    res = run(task, cfg, stop_after=stop_after)
    h, g = task.history, task.graphs
    res.info = {"loss": task.loss_name(cfg), "final_loss": h[-1]["loss"] if h else float("nan"),
                "pretrain_mol_per_s": h[-1]["mol_per_s"] if h else float("nan"),
                "featurize_mol_per_s": task.feat_rate, "molecules": len(g) if g is not None else 0,
                "skipped": g.skipped if g is not None else 0, "history": h}
    return res
