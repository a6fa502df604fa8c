"""Contrastive pretraining of the molecular GIN (GraphCL transfer setting, You et al. 2020, Sec. 4.2).

Two augmented views of every molecule in a batch (default: node dropping and subgraph, 20 %, from
:mod:`graph.augment`), encoder -> mean pool -> projection head, any ``suite.losses`` loss.
Adam lr 1e-3, batch 256, trained by :class:`suite.train.Engine` (its epoch rule: the last partial
batch is dropped). A checkpoint ``epoch<N>.pt`` (the engine's layout: model, optimiser, sampler
position, every RNG state incl. the augmentation generator; loss buffers and history as ``extra``)
is written after every epoch, so a resumed run continues bit-for-bit; ``encoder.pt`` (encoder weights + its shape)
is what fine-tuning loads.

Example:
    >>> cfg = load_config(PretrainMolConfig, "graph/configs/mol_pretrain_cpu.yaml", {"loss": "macl"})
    >>> summary = pretrain(cfg)
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from torch import Tensor, nn

import suite.losses as L
from graph.data.molecules import MolGraphs, get_featurizer, load_smiles_file
from graph.methods.graphcl import chunk_views
from graph.methods.mol_card import save_pretrained_mol
from graph.models.gin_mol import MolGIN, projection_head
from suite import distributed as sd
from suite import presets
from suite.config import experiment_config, experiment_hash, run_option_values, run_options
from suite.paths import data_path
from suite.pretrained import load_state
from suite.train import (CachedStep, Engine, epoch_batches, latest_checkpoint, load_checkpoint, open_run, resolve_device,
                         save_checkpoint, seed_everything)

# Loss presets: suite.presets, setting "graph_transfer" (graphcl, macl, infonce). GraphCL's transfer code
# (chem/pretrain_graphcl.py) contrasts view 1 against view 2 only (cross-view negatives, one direction) with the
# positive removed from the denominator, i.e. DCL (MACL App. B.5), tau = 0.1; MACL keeps GraphCL's set-up with
# tau0 = 0.1, alpha = 0.5, A0 = 0 (MACL App. B.5).
SETTING = "graph_transfer"
CORPORA = {"zinc": ("zinc", "moses", "train.csv.gz"), "moses": ("zinc", "moses", "train.csv.gz")}


@dataclass
class PretrainMolConfig:
    # where and how it runs, not what: left out of the experiment config a resume must match
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "resume", "keep_checkpoints", "device", "registry")
    corpus: str = field(default="zinc", metadata={"help": "'zinc' (local MOSES train set) or a SMILES file path"})
    limit: int | None = field(default=None, metadata={"help": "seeded random subset of the corpus"})
    subset_seed: int = 0
    featurizer: str = "hu"
    loss: str = field(default="graphcl", metadata={"help": "preset (graphcl, macl) or any suite.losses name"})
    loss_hparams: dict[str, Any] = field(default_factory=dict)
    aug1: str = "drop_nodes"
    aug2: str = "subgraph"
    aug_ratio: float = 0.2
    epochs: int = 100
    batch_size: int = 256
    lr: float = 0.001
    weight_decay: float = 0.0
    num_layers: int = 5
    emb_dim: int = 300
    dropout: float = 0.0
    grad_cache_chunk: int = field(default=0, metadata={"help": "gradient caching: encode the batch in chunks of K "
                                                                "molecules (the loss still sees the whole batch); the "
                                                                "GIN's BatchNorm sees chunks, so K is part of the "
                                                                "experiment (0 = off)", "omit_default": True})
    seed: int = 0
    out: str = field(default="", metadata={"help": "output folder ('' = ckpt/mol/<loss>-<config hash>)"})
    resume: bool = True
    keep_checkpoints: int = 2
    device: str = "auto"
    registry: bool = True


def build_loss(name: str, hparams: dict[str, Any] | None = None) -> tuple[str, L.ContrastiveLoss]:
    """A preset (``graphcl``, ``macl``) or any registered loss; ``hparams`` override the preset."""
    base, hp = presets.resolve(SETTING, name, hparams, aliases=False)
    return base, L.build(base, **hp)


def resolve_corpus(corpus: str) -> Path:
    if corpus.lower() in CORPORA:
        p = data_path(*CORPORA[corpus.lower()])
    else:
        p = Path(corpus).expanduser()
    if not p.exists():
        raise ValueError(f"pretraining corpus not found: {p} (give 'zinc' with SUITE_DATA set, or a SMILES file)")
    return p


def output_dir(cfg: PretrainMolConfig) -> Path:
    """``cfg.out``, or by default ``ckpt/mol/<loss>-<experiment hash>`` (distinct configs never share it)."""
    if cfg.out:
        return Path(cfg.out)
    return Path("ckpt/mol") / f"{cfg.loss.lower()}-{experiment_hash(cfg)}"


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


def shard_batches(perm: Tensor, batch_size: int) -> list[Tensor]:
    """This rank's share of ``perm`` in batches (fine-tuning; contrastive pretraining uses
    :func:`suite.train.epoch_batches`). Under DDP the tail is cut to a multiple of the world
    size first, so every rank runs the same number of equally sized steps (no collective hangs)."""
    if sd.is_distributed():
        ws = sd.world_size()
        perm = perm[: perm.numel() - perm.numel() % ws][sd.rank()::ws]
    return [b for b in perm.split(batch_size) if b.numel() >= 2]


def _prune(out: Path, keep: int) -> None:
    if keep <= 0:
        return
    cks = sorted(out.glob("epoch*.pt"), key=lambda p: int(p.stem[5:]))
    for p in cks[:-keep]:
        p.unlink(missing_ok=True)


def pretrain(cfg: PretrainMolConfig, graphs: MolGraphs | None = None, stop_after: int | None = None) -> dict[str, Any]:
    """Run (or resume) pretraining; returns a summary (final loss, molecules/s, paths).

    ``stop_after`` ends the process after that many epochs of *this call* (to test resumption). A
    checkpoint in the output folder is resumed only if it records the same experiment config (else
    :class:`suite.train.ConfigMismatchError` names the differing keys)."""
    if cfg.epochs < 1 or cfg.batch_size < 2 or cfg.grad_cache_chunk < 0:
        raise ValueError(f"need epochs >= 1, batch_size >= 2 and grad_cache_chunk >= 0, got {cfg.epochs}, "
                         f"{cfg.batch_size}, {cfg.grad_cache_chunk}")
    out = output_dir(cfg)
    device = resolve_device(cfg.device)
    seed_everything(cfg.seed)
    loss_name, loss_fn = build_loss(cfg.loss, cfg.loss_hparams)  # a bad loss is refused before the corpus is read
    feat_rate = float("nan")
    if graphs is None:
        t0 = time.perf_counter()
        graphs = load_smiles_file(resolve_corpus(cfg.corpus), cfg.featurizer, cfg.limit, cfg.subset_seed)
        feat_rate = len(graphs) / max(time.perf_counter() - t0, 1e-9)  # cache hits make this large
    if len(graphs) < 2:
        raise ValueError(f"pretraining needs at least 2 molecules, got {len(graphs)}")
    encoder = MolGIN(cfg.num_layers, cfg.emb_dim, cfg.dropout, get_featurizer(cfg.featurizer))
    model = ContrastiveMolModel(encoder).to(device)
    loss_fn = loss_fn.to(device)
    out.mkdir(parents=True, exist_ok=True)  # only once the corpus and the loss are known good: a refused run leaves none
    # runs and encoders carry the name the user asked for: GraphCL pretraining is ``graphcl``, not its
    # underlying ``dcl`` (the resolved loss and hyper-parameters are in ``loss_hparams``)
    label = cfg.loss.lower() if cfg.loss.lower() in presets.names(SETTING) else loss_name
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    aug1, aug2 = make_augmentation(cfg.aug1, cfg.aug_ratio), make_augmentation(cfg.aug2, cfg.aug_ratio)
    aug_gen = torch.Generator().manual_seed(cfg.seed + 1)
    engine = Engine(model, opt, device=device, loss=loss_fn, generators={"aug": aug_gen}, desc="pretrain")
    history: list[dict[str, Any]] = []
    experiment = experiment_config(cfg)
    ck = latest_checkpoint(out, "epoch*.pt") if cfg.resume else None
    if ck is not None:
        extra = engine.load(ck, experiment, ignore=run_options(cfg))
        loss_fn.load_state_dict(extra["loss"])
        history = list(extra["history"])

    def step(idx: Tensor) -> Tensor | CachedStep:
        b = graphs.batch(idx).to_pyg()  # type: ignore[union-attr]
        v1 = aug1(b, aug_gen).to(device)  # augment on CPU (seeded generator), then move
        v2 = aug2(b, aug_gen).to(device)
        if cfg.grad_cache_chunk:  # views made once, encoded in chunks of molecules, the loss over the whole batch
            return CachedStep(lambda c: torch.stack([engine.ddp(c[0]), engine.ddp(c[1])]),
                              chunk_views([v1, v2], cfg.grad_cache_chunk), lambda z: loss_fn(z[0], z[1]), dim=1)
        return loss_fn(engine.ddp(v1), engine.ddp(v2))  # (B, D) each

    def on_epoch(epoch: int, stats: dict[str, float]) -> None:
        history.append({"epoch": epoch, **stats})
        engine.save(out / f"epoch{epoch}.pt", experiment, extra={"loss": loss_fn.state_dict(), "history": history})
        if sd.is_main():  # (the checkpoint above is a collective: every rank's random state; the main rank writes)
            save_checkpoint(out / "encoder.pt", {"encoder": model.encoder.state_dict(), "spec": encoder_spec(cfg),
                                                 "loss": label, "epoch": epoch, "config": experiment})
            save_pretrained_mol(out / "pretrained", model.encoder, cfg, label, loss_fn, epoch, len(graphs), run=engine.run)
            _prune(out, cfg.keep_checkpoints)

    last = cfg.epochs if stop_after is None else min(cfg.epochs, engine.epoch + stop_after)
    with ExitStack() as stack:
        run = open_run(cfg.registry and engine.epoch < cfg.epochs, stack, resume_id=engine.resume_run_id, modality="graph", task="mol-pretrain",
                       dataset=Path(cfg.corpus).name, loss=label, loss_hparams=loss_fn.hparams(),
                       config=experiment, run_options={**run_option_values(cfg), "out": str(out)}, seed=cfg.seed)
        engine.run = run
        n = len(graphs)
        engine.fit(lambda epoch: epoch_batches(n, cfg.batch_size, cfg.seed, epoch), step, epochs=last, on_epoch=on_epoch,
                   rate_name="mol_per_s")
        if run is not None:
            run.log_many({"molecules": len(graphs), "skipped": graphs.skipped, "featurize_mol_per_s": feat_rate}, split="data")
    return {"loss": label, "epochs_done": history[-1]["epoch"] if history else 0,
            "final_loss": history[-1]["loss"] if history else float("nan"),
            "pretrain_mol_per_s": history[-1]["mol_per_s"] if history else float("nan"),
            "featurize_mol_per_s": feat_rate, "molecules": len(graphs), "skipped": graphs.skipped,
            "encoder": str(out / "encoder.pt"), "history": history}


def load_encoder(path: str | Path, dropout: float = 0.0) -> tuple[MolGIN, dict[str, Any]]:
    """An encoder from ``encoder.pt`` (or a directory holding it, or an ``epoch<N>.pt`` checkpoint). A checkpoint
    that loads as data but lacks its ``spec`` (encoder.pt) or ``config`` (a pretraining checkpoint), or holds one
    that is not a mapping or has a field of the wrong type, is a ValueError naming the file and what is wrong."""
    p = Path(path)
    if p.is_dir():
        cand = p / "encoder.pt"
        p = cand if cand.exists() else (latest_checkpoint(p, "epoch*.pt") or cand)
    state = load_checkpoint(p)
    if "encoder" in state:
        entry, what = "spec", "an encoder checkpoint ('encoder' entry)"
    elif "model" in state:  # a full pretraining checkpoint
        entry, what = "config", "a pretraining checkpoint ('model' entry)"
    else:
        raise ValueError(f"{p} is not a molecular encoder checkpoint (no 'encoder' or 'model' entry)")
    if entry not in state:
        raise ValueError(f"{p}: {what} with no '{entry}' entry, so the encoder cannot be rebuilt (num_layers, "
                         f"emb_dim, featurizer)")
    c = state[entry]
    if not isinstance(c, dict):
        raise ValueError(f"{p}: '{entry}' must be a mapping (num_layers, emb_dim, featurizer), got {type(c).__name__}")
    weights = state["encoder" if entry == "spec" else "model"]
    if not isinstance(weights, dict):
        raise ValueError(f"{p}: the weights must be a mapping of tensors, got {type(weights).__name__}")
    lacking = {"num_layers", "emb_dim", "featurizer"} - set(c)
    if lacking:
        raise ValueError(f"{p}: the encoder {entry} lacks {sorted(lacking)}")
    spec = {"num_layers": c["num_layers"], "emb_dim": c["emb_dim"], "featurizer": c["featurizer"]}
    if entry == "spec":
        spec = {**c, **spec}
    for key in ("num_layers", "emb_dim"):
        v = spec[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{p}: {entry} {key} must be an integer >= 1, got {v!r}")
    if not isinstance(spec["featurizer"], str):
        raise ValueError(f"{p}: {entry} featurizer must be a name ('hu' or 'ogb'), got {spec['featurizer']!r}")
    sd_ = weights if entry == "spec" else {k[len("encoder."):]: v for k, v in weights.items()
                                          if isinstance(k, str) and k.startswith("encoder.")}
    try:
        enc = MolGIN(spec["num_layers"], spec["emb_dim"], dropout, get_featurizer(spec["featurizer"]))
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
    load_state(enc, sd_, p)  # tensor names and shapes checked, a mismatch named with the file
    config = state.get("config")
    loss = state.get("loss", config.get("loss", "?") if isinstance(config, dict) else "?")
    return enc, {**spec, "loss": loss, "path": str(p)}

