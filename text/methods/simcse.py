"""SimCSE (Gao et al. 2021) with any loss of the core.

Unsupervised: every sentence is encoded ``V`` times in ONE forward pass (dropout gives the views;
V = 2, or 3 for multi-view losses such as cacr) and the views go to ``suite.losses.apply_loss``.
Supervised: (anchor, entailment, contradiction) triplets in one forward pass; ``infonce`` is
SimCSE's objective exactly (in-batch + hard negatives, with the hard-negative weight as a logit
offset on each anchor's own hard negative, gradients through all three) in the loss's arrangement
(``negatives``, ``symmetric``: SimCSE's one-directional one by default, the text preset; another one given
in ``loss_hparams`` is used and recorded, as the sentence-transformers adapter does); other losses get the
hard negatives as extra negatives via ``queue=`` (the core detaches queue entries, so no gradient
flows through the hard negatives for them).

Losses by name with the text presets of :mod:`suite.presets`, or a user's own loss (``file.py:Class``); ``xclr`` gets a soft graph from a frozen
teacher sentence model (default: the packaged all-MiniLM-L6-v2): cosine similarities of the
teacher's embeddings of the batch sentences, diagonal 1.

STS-B dev is evaluated every ``eval_every`` steps and the best model is kept (SimCSE's protocol).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import suite.losses as L
from suite import distributed as sd
from suite.losses.base import ContrastiveLoss
from suite.objectives import sup_simcse_loss  # noqa: F401 (re-exported: text.methods.sup_simcse_loss)
from suite.config import RUN_OPTION, RunOptions, check_ints, check_numbers, is_int
from suite.paths import data_path
from suite import presets
from suite.registry import Registry
from suite.train import CachedStep, data_workers, optimizer_options
from suite.train.legacy import Earlier
from suite.train.run import RunContext, RunResult, Task, Training, run
from text.data import Triplet, nli_triplets, read_sentences, read_supervised_csv, unlabelled_sentences
from text.eval.encode import EncodeFn
from text.eval.sts import STSEvaluator
from text.models.encoder import SentenceEncoder, build_encoder
from text.models.save import load_encoder, save_encoder, simcse_card

# Text settings of each loss, views and dropout: suite.presets, setting "text" (SimCSE's tau = 0.05 and its
# one-directional cross-view arrangement, anchors z1 and candidates z2, for the InfoNCE family; MACL App. B.4 for
# macl). The symmetric 2N arrangement stays available: loss_hparams={"negatives": "all", "symmetric": True}.
WIKI = ("wiki", "wiki1m_head11914.txt")


@dataclass
class SimCSEConfig(RunOptions):
    # where and how it runs, not what (left out of the experiment config a resume must match): RunOptions, and
    # grad_cache_chunk (marked RUN_OPTION: the same gradient, in chunks)
    RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"checkpoint_every": 0, "keep_checkpoints": 1}
    RUN_HELP: ClassVar[dict[str, str]] = {
        "out": "run folder: checkpoints, the trained model in export/ (default: "
               "runs/simcse-<mode>/<loss>-s<seed>-<config hash>)",
        "checkpoint_every": "resume checkpoint every N steps (0 = at each eval)",
        "keep_checkpoints": "checkpoints (optimizer state) kept after training (0: none)"}
    RENAMED_FIELDS: ClassVar[dict[str, str]] = {"keep_checkpoint": "keep_checkpoints"}  # a switch before (false: 0)
    mode: Literal["unsup", "sup"] = "unsup"
    backbone: str = field(default="default", metadata={"help": "HF path/name or 'default' (packaged all-MiniLM-L6-v2)"})
    pooling: str = field(default="auto", metadata={"help": "cls|mean|max|auto (auto: the backbone's ST pooling, else cls)"})
    mlp_head: bool = True
    head_at_test: bool = field(default=False, metadata={"help": "keep the MLP head at test time (SimCSE sup)"})
    dropout: float = field(default=-1.0, metadata={"help": "encoder dropout; -1: the loss preset (0.2 for macl, "
                                                           "MACL App. B.4; else SimCSE's 0.1)"})
    loss: str = "infonce"
    loss_hparams: dict[str, Any] = field(default_factory=dict, metadata={"help": "overrides of the loss preset"})
    n_views: int = field(default=0, metadata={"help": "dropout views per sentence (0: 3 for cacr/uaur/cmc, else 2)"})
    data: str = field(default="", metadata={"help": "sentences file (unsup) / triplet CSV (sup) (default: the local wiki sentences / NLI triplets)"})
    add_sts_sick_train: bool = field(default=False, metadata={"help": "unsup: add STS-B + SICK train sentences"})
    limit: int = field(default=0, metadata={"help": "use the first N sentences / triplets (0 = all)"})
    max_length: int = 32
    batch_size: int = 64
    lr: float = 3e-5
    weight_decay: float = 0.0
    epochs: int = 1
    max_steps: int = field(default=0, metadata={"help": "stop after N steps (0 = epochs)"})
    eval_every: int = field(default=125, metadata={"help": "STS-B dev every N steps, best kept (0 = only at the end)"})
    eval_batch_size: int = 128
    dev_eval: bool = field(default=True, metadata={
        "help": "evaluate STS-B dev (every --eval-every steps and at the end) and export the best model; false: train "
                "without SentEval's data, export the last model (no dev score)", "omit_default": True})
    hard_negative_weight: float = field(default=0.0, metadata={"help": "sup infonce: log-weight added to own hard negative"})
    teacher: str = field(default="default", metadata={"help": "xclr: frozen teacher sentence model"})
    seed: int = 0
    bf16: bool = False
    grad_cache_chunk: int = field(default=0, metadata={"help": "gradient caching: encode the batch in chunks of K sentences "
                                                                "(same gradient, memory of a K batch; 0 = off)",
                                                        RUN_OPTION: True})


def dropout_for(cfg: SimCSEConfig) -> float:
    """The encoder dropout: ``cfg.dropout`` if set (>= 0), else the loss's text preset."""
    return presets.text_dropout(cfg.loss, cfg.dropout)


def n_views_for(loss: ContrastiveLoss, requested: int, default: int) -> int:
    """The dropout views per sentence: ``requested`` (0: the loss's ``default``, :func:`suite.presets.views`)."""
    v = requested or default
    if v != 2 and not loss.multi_view:
        raise ValueError(f"loss {loss.name!r} takes two views; n_views = {v} needs a multi-view loss (cacr, uaur, cmc)")
    if v < 2:
        raise ValueError(f"n_views must be >= 2, got {v}")
    return v


# ----------------------------------------------------------------------------- data

def load_training_data(cfg: SimCSEConfig) -> list[str] | list[Triplet]:
    if cfg.mode == "unsup":
        path = Path(cfg.data) if cfg.data else data_path(*WIKI)
        texts = read_sentences(path)
        if cfg.add_sts_sick_train:
            texts = list(dict.fromkeys(texts + unlabelled_sentences()))
        return texts[: cfg.limit] if cfg.limit else texts
    if cfg.mode == "sup":
        rows = read_supervised_csv(cfg.data) if cfg.data else nli_triplets()  # triplets, or pairs
        return rows[: cfg.limit] if cfg.limit else rows  # type: ignore[return-value]
    raise ValueError(f"mode must be 'unsup' or 'sup', got {cfg.mode!r}")


# ----------------------------------------------------------------------------- teacher graph (xclr)

def teacher_embeddings(teacher: str, texts: list[str], device: torch.device, batch_size: int) -> Tensor:
    """(N, d) normalised embeddings of a frozen teacher (cached on disk by model + data hash)."""
    enc = load_encoder(teacher).to(device)
    emb = EncodeFn(enc, batch_size=batch_size, max_length=128, device=device, cache=True)(texts)
    return F.normalize(emb, dim=-1)


# ----------------------------------------------------------------------------- training

def _state(encoder: SentenceEncoder) -> dict[str, Tensor]:
    return {k: v.detach().cpu().clone() for k, v in encoder.state_dict().items()}


def check_config(cfg: SimCSEConfig) -> None:
    """Refuse settings no run can use before any model or data is loaded (``ValueError`` naming the field)."""
    if cfg.mode not in ("unsup", "sup"):
        raise ValueError(f"mode must be 'unsup' or 'sup', got {cfg.mode!r}")
    check_ints(cfg, {**dict.fromkeys(("grad_cache_chunk", "max_steps", "eval_every", "checkpoint_every",
                                      "keep_checkpoints", "limit", "n_views"), 0),
                     **dict.fromkeys(("batch_size", "eval_batch_size", "max_length"), 1)})
    if cfg.max_steps == 0 and not (is_int(cfg.epochs) and cfg.epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1 (or give max_steps), got {cfg.epochs!r}")
    if not (cfg.dropout == -1 or 0 <= cfg.dropout < 1):
        raise ValueError(f"dropout must be in [0, 1) (or -1 for the loss preset), got {cfg.dropout!r}")
    check_numbers(cfg, {"lr": 0.0, "weight_decay": 0.0, "hard_negative_weight": None})
    # a flag of the other mode is refused, not recorded unused (it would change the config hash of the same run)
    if cfg.mode == "unsup" and cfg.hard_negative_weight:
        raise ValueError(f"--hard-negative-weight {cfg.hard_negative_weight} applies to --mode sup (the triplets' hard "
                         "negatives); unsupervised SimCSE has none")
    if cfg.mode == "sup" and cfg.add_sts_sick_train:
        raise ValueError("--add-sts-sick-train adds unlabelled sentences to --mode unsup; supervised SimCSE trains on "
                         "triplets")


def check_dev_file(cfg: SimCSEConfig) -> None:
    """The STS-B dev file the dev evaluation reads, checked before any model or data is loaded: a missing one is a
    ``ValueError`` naming it, the option that needs it and the one that trains without it."""
    if not cfg.dev_eval:
        return
    from text.data import senteval_root

    path = senteval_root() / "STS" / "STSBenchmark" / "sts-dev.csv"
    if not path.is_file():
        when = (f"every {cfg.eval_every} steps (--eval-every) and at the end" if cfg.eval_every else
                "once at the end even with --eval-every 0")
        raise ValueError(f"STS-B dev file not found: {path}; SimCSE evaluates it {when} to export the best model: set "
                         "SUITE_DATA to the data root holding senteval/downstream, or train without it with "
                         "--no-dev-eval (the last model is exported, no dev score)")


class SimCSETask(Task[SimCSEConfig]):
    """SimCSE as a :class:`suite.train.run.Task` (task ``simcse-<mode>``, headline: the best STS-B dev Spearman).

    STS-B dev is evaluated every ``eval_every`` steps (and at the end) and the best encoder state is kept: a
    checkpoint follows every evaluation (and every ``checkpoint_every`` steps), so an interrupted run resumes with
    its best state. The run owner seeds, places, resumes and records it, and exports the best encoder to
    ``<out>/export``: a sentence-transformers model that is also a transformers checkpoint (:mod:`text.models.save`),
    with its card and ``run.json``."""

    modality, primary, eval_split = "text", ("best_stsb_dev", "dev"), "dev"
    earlier = Earlier(checkpoints=("checkpoint.pt",))  # the layout before the run owner: <out>/checkpoint.pt

    def __init__(self, cfg: SimCSEConfig) -> None:
        check_config(cfg)  # before the run owner takes the folder or reads anything
        self.name = f"simcse-{cfg.mode}"  # type: ignore[misc]
        self.best, self.best_state = -math.inf, None
        self.history: list[dict[str, float]] = []

    def dataset(self, cfg: SimCSEConfig) -> str:
        return _dataset_name(cfg)

    def loss_name(self, cfg: SimCSEConfig) -> str:
        return presets.loss_label("text", cfg.loss)

    def stem(self, cfg: SimCSEConfig) -> str:
        return f"{self.loss_name(cfg)}-s{cfg.seed}"

    def data_inputs(self, cfg: SimCSEConfig) -> dict[str, str | Path]:
        """The training sentences (or triplet CSV) and, with the dev evaluation, the STS-B dev file: reuse and resume
        decide on their content (issue 69, class A). The default NLI triplets are built in: not declared."""
        out: dict[str, str | Path] = {}
        if cfg.data or cfg.mode == "unsup":
            out["data"] = Path(cfg.data) if cfg.data else data_path(*WIKI)
        if cfg.dev_eval:
            from text.data import senteval_root

            out["sts_dev"] = senteval_root() / "STS" / "STSBenchmark" / "sts-dev.csv"
        return out

    def run_info(self, cfg: SimCSEConfig) -> dict[str, Any]:
        """A start model built here (``suite text mlm``): the registry run and code version that built it, so rows
        from two builds of ``models:NAME`` are never mistaken for one start model."""
        from text.models.backbone import build_record, resolve_backbone

        done = build_record(resolve_backbone(cfg.backbone))
        if done is None:
            return {}
        try:
            rec = json.loads(done.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return {"backbone_run": rec.get("run_id"), "backbone_code_version": rec.get("code_version")}

    def build(self, cfg: SimCSEConfig, ctx: RunContext[SimCSEConfig]) -> Training:
        check_config(cfg)
        built = presets.make_loss("text", cfg.loss, cfg.loss_hparams,
                                  provides=("similarity",) if cfg.mode == "unsup" else ())
        loss = built.loss
        device = ctx.device
        if cfg.mode == "sup" and built.name != "infonce" and cfg.hard_negative_weight:
            raise ValueError("hard_negative_weight is only defined for the supervised infonce (SimCSE) objective")
        self.data = data = load_training_data(cfg)  # a bad data file is named first
        triplets = cfg.mode == "sup" and len(data[0]) == 3
        if triplets and not loss.has_negatives:
            raise ValueError(f"loss {built.name!r} takes no extra negatives (has_negatives = False): supervised SimCSE "
                             "passes each pair's hard negative as one (queue=); use --mode unsup, or a file of pairs")
        if cfg.mode == "sup" and not triplets and cfg.hard_negative_weight:
            raise ValueError(f"--hard-negative-weight needs triplets; {cfg.data} holds pairs (anchor, positive)")
        self.views = views = n_views_for(loss, cfg.n_views, built.views) if cfg.mode == "unsup" else 2
        kind = ("sentences" if cfg.mode == "unsup" else "triplets (anchor, positive, hard negative)" if triplets
                else "pairs (anchor, positive; in-batch negatives)")
        print(f"training on {len(data):,} {kind} from {cfg.data or _dataset_name(cfg) + ' (the local default)'}"
              f"{f' (the first {cfg.limit:,})' if cfg.limit else ''}", flush=True)  # what it trains on (issue 80)
        check_dev_file(cfg)  # before any model is loaded
        self.encoder = encoder = build_encoder(cfg.backbone, cfg.pooling, cfg.mlp_head, cfg.head_at_test,
                                               dropout_for(cfg)).to(device)
        graph_emb = None
        if "similarity" in loss.requires:
            if cfg.mode != "unsup" or sd.world_size() > 1:
                raise ValueError("xclr (teacher graph) is supported for single-process unsupervised SimCSE only")
            graph_emb = teacher_embeddings(cfg.teacher, list(data), device, cfg.eval_batch_size)  # type: ignore[arg-type]
        if getattr(encoder.backbone, "pooler", None) is not None:  # BERT's pooler is never used: freeze it (DDP needs
            encoder.backbone.pooler.requires_grad_(False)            # every trainable parameter to receive a gradient)
        opt = torch.optim.AdamW([p for p in encoder.parameters() if p.requires_grad], lr=cfg.lr,
                                weight_decay=cfg.weight_decay, **optimizer_options(device))
        steps_per_epoch = len(ctx.epoch_batches(len(data), cfg.batch_size, 0))
        total = cfg.max_steps or steps_per_epoch * cfg.epochs
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))  # HF linear decay, no warm-up
        dev_eval = STSEvaluator(["STSB-dev"]) if cfg.dev_eval else None

        def evaluate() -> float:
            assert dev_eval is not None
            m = dev_eval(EncodeFn(encoder, cfg.eval_batch_size, 512, device))["stsb_dev"]
            if m > self.best:
                self.best, self.best_state = m, _state(encoder)
            return m

        def on_step() -> None:
            engine = ctx.engine
            assert engine is not None
            if cfg.eval_every and engine.step % cfg.eval_every == 0:
                if cfg.dev_eval:
                    self.history.append(_log_eval(ctx, evaluate()))
                ctx.checkpoint()

        self.evaluate_dev, self.ctx = evaluate, ctx
        self.t0 = time.perf_counter()
        return Training(encoder, opt, lambda epoch: ctx.epoch_batches(len(data), cfg.batch_size, epoch),
                        lambda b: simcse_step(ctx.engine.ddp, encoder, loss, data, b["idx"], cfg, views, graph_emb,  # type: ignore[union-attr]
                                              device, tokens=b),
                        collate=lambda idx: simcse_tokens(encoder, data, idx, cfg), workers=data_workers(device),
                        compile=cfg.compile,
                        epochs=None if cfg.max_steps else cfg.epochs, max_steps=total, scheduler=sched, loss=loss,
                        precision="bf16" if cfg.bf16 else "fp32", on_step=on_step, rate_name="sentences_per_s",
                        checkpoint_unit="step", log_epochs=False)

    def state(self, cfg: SimCSEConfig, ctx: RunContext[SimCSEConfig], training: Training) -> dict[str, Any]:
        return {"best": self.best, "best_state": self.best_state, "history": self.history}

    def restore(self, cfg: SimCSEConfig, ctx: RunContext[SimCSEConfig], training: Training, state: dict[str, Any]) -> None:
        self.best, self.best_state = state["best"], state["best_state"]
        self.history = list(state.get("history", []))

    def evaluate(self, cfg: SimCSEConfig, ctx: RunContext[SimCSEConfig], training: Training) -> dict[str, float]:
        engine = ctx.engine
        assert engine is not None
        if not cfg.dev_eval:  # the last model is exported
            return {"train_wall_s": time.perf_counter() - self.t0}
        if not self.history or self.history[-1]["step"] != engine.step:
            self.history.append(_log_eval(ctx, self.evaluate_dev()))
        if self.best_state is not None:
            self.encoder.load_state_dict(self.best_state)
        return {"best_stsb_dev": self.best, "train_wall_s": time.perf_counter() - self.t0}

    def export_module(self, cfg: SimCSEConfig, training: Training) -> nn.Module:
        return self.encoder

    def export(self, cfg: SimCSEConfig, ctx: RunContext[SimCSEConfig], training: Training, module: nn.Module,
               path: Path) -> None:
        save_encoder(self.encoder, path, card=simcse_card(cfg, training.loss, _dataset_name(cfg), len(self.data),
                                                          ctx.engine.step, ctx.run, path))  # type: ignore[union-attr]


def train_simcse(cfg: SimCSEConfig, registry: Registry | None = None) -> RunResult:
    """Train, keep the best STS-B-dev model and export it (``<out>/export``: sentence-transformers + transformers
    format) through the run owner. A checkpoint in the run folder is resumed only if it records the same
    experiment config (else :class:`suite.train.ConfigMismatchError` names the differing keys). Returns the owner's
    result; its ``info`` holds {"best_stsb_dev", "sentences_per_s", "history", "n_train", "views"}."""
    task = SimCSETask(cfg)
    res = run(task, cfg, registry=registry)
    res.info = {"best_stsb_dev": task.best, "sentences_per_s": task.ctx.engine.throughput.rate,  # type: ignore[union-attr]
                "history": task.history, "n_train": len(task.data), "views": task.views}
    return res


def _dataset_name(cfg: SimCSEConfig) -> str:
    if cfg.data:
        return Path(cfg.data).name
    return "wiki1m_head11914" if cfg.mode == "unsup" else "nli-local"


def _log_eval(ctx: RunContext[SimCSEConfig], dev: float) -> dict[str, float]:
    """The training means since the last evaluation, the dev Spearman and the throughput, logged through the run."""
    engine = ctx.engine
    assert engine is not None
    rec = {**{f"train_{k}": v for k, v in engine.logger.means().items()}, "stsb_dev": dev,
           "sentences_per_s": engine.throughput.rate}
    ctx.log(rec, split="train", step=engine.step)
    engine.logger.reset()
    return {**rec, "step": float(engine.step)}


def simcse_tokens(encoder: SentenceEncoder, data: list[Any], idx: Tensor, cfg: SimCSEConfig) -> dict[str, Tensor]:
    """The host's part of a step: the batch's sentences tokenised (``input_ids``, ``attention_mask``: (B, T) for
    unsupervised SimCSE, (3B, T) anchors, positives, hard negatives for supervised, (2B, T) for pairs), with ``idx``. Deterministic:
    the engine runs it ahead of the step in ``DataLoader`` workers on a GPU (``Training.collate``)."""
    items = [data[i] for i in idx.tolist()]
    flat = items if cfg.mode == "unsup" else [s for trip in zip(*items) for s in trip]
    return {"idx": idx, **encoder.tokenize(flat, cfg.max_length)}


def simcse_step(model: torch.nn.Module, encoder: SentenceEncoder, loss: ContrastiveLoss, data: list[Any], idx: Tensor,
          cfg: SimCSEConfig, views: int, graph_emb: Tensor | None, device: torch.device,
          tokens: dict[str, Tensor] | None = None) -> Tensor | CachedStep:
    """The loss of one batch, or with ``cfg.grad_cache_chunk`` the :class:`suite.train.CachedStep`
    that encodes it in chunks of that many sentences (all views of a sentence in its chunk). ``tokens``: the batch
    tokenised ahead (:func:`simcse_tokens`; default: tokenised here)."""
    enc = tokens if tokens is not None else simcse_tokens(encoder, data, idx, cfg)
    b = len(idx)
    ids, mask = (enc[k].to(device, non_blocking=True) for k in ("input_ids", "attention_mask"))
    if cfg.mode == "unsup":  # (B, T) -> (V, B, T): V dropout masks
        ids_g, mask_g = ids.expand(views, *ids.shape), mask.expand(views, *mask.shape)
    else:
        ids_g, mask_g = ids.view(-1, b, ids.shape[-1]), mask.view(-1, b, mask.shape[-1])  # (3, B, T), or (2, B, T): pairs

    def encode(cols: Tensor | slice) -> Tensor:  # the sentences ``cols`` of every group in ONE pass -> (G, k, d)
        i, m = ids_g[:, cols], mask_g[:, cols]
        return model(i.reshape(-1, i.shape[-1]), m.reshape(-1, m.shape[-1])).view(i.shape[0], i.shape[1], -1).float()

    def loss_of(z: Tensor) -> Tensor:  # z: (G, B, d)
        if cfg.mode == "unsup":
            extra: dict[str, Tensor] = {}
            if graph_emb is not None:
                t = graph_emb[idx].to(device)  # (B, d_t)
                extra["similarity"] = (t @ t.T).fill_diagonal_(1.0)  # (B, B) teacher graph
            return L.apply_loss(loss, z, **extra)
        if z.shape[0] == 2:  # pairs: the other anchors' positives are the negatives
            return L.apply_loss(loss, z)
        if getattr(loss, "name", "") == "infonce":  # SimCSE's objective in the loss's own arrangement
            return sup_simcse_loss(z[0], z[1], z[2], loss.temperature, cfg.hard_negative_weight,  # type: ignore[arg-type]
                                   loss.negatives, loss.symmetric)  # type: ignore[arg-type]
        return L.apply_loss(loss, z[:2], queue=z[2])

    if cfg.grad_cache_chunk:
        return CachedStep(encode, list(torch.arange(b, device=device).split(cfg.grad_cache_chunk)), loss_of, dim=1)
    return loss_of(encode(slice(None)))
