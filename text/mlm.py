"""Masked-language-model pretraining of a small BERT from scratch: a start model for SimCSE that is
not already trained contrastively (no MLM-only BERT checkpoint can be obtained offline).

    suite text mlm --out models:bert-mini-english            # ~/.cache/suite/models/bert-mini-english
    suite text train --backbone models:bert-mini-english ...   # SimCSE from it

Corpus: the plain-English sentences of ``english/{wordnet,gcide}_sentences.txt.gz`` plus the local wiki
sentences (``SUITE_DATA``); one sentence a line, gzip or plain UTF-8. Empty lines and lines that are not
UTF-8 are skipped and counted (recorded with the run), a truncated gzip file is a clear error naming it.
A fixed set of ``heldout`` sentences (chosen with a fixed seed, the same for every run seed) measures the
validation MLM loss and masked-token accuracy.

Tokenizer: a WordPiece vocabulary (``vocab_size``, lower-cased, BERT's special tokens) trained with
``tokenizers`` on the training sentences, kept in ``<out>/tokenizer`` while the run trains and exported beside the
model as a ``BertTokenizerFast``.

Model: transformers' ``BertForMaskedLM`` (BERT-mini shape by default: 4 layers x 256, 4 heads, 1024 FFN,
tied input/output embeddings). BERT's masking (15 % of the non-special tokens; of those 80 % [MASK],
10 % a random token, 10 % kept), with the output layer evaluated at the masked positions only (the loss
is the same as with logits everywhere, at a fraction of the cost). No next-sentence objective (one
sentence per example, as RoBERTa's FULL-SENTENCES drops NSP). Sentences are batched with length bucketing
(a shuffled epoch is cut into blocks of 64 batches, each block sorted by length), so padding is small.

Training goes through the run owner (:func:`suite.train.run.run`, :class:`MLMTask`): AdamW, linear warm-up then
linear decay, counted in steps; the owner seeds it (the masks are its generator ``mask``), checkpoints it every
``checkpoint_every`` steps in ``<out>/checkpoints/step-<N>.pt`` (a ``<out>/checkpoint.pt`` of the layout before is
resumed too), resumes it only with the same experiment config (``device``, ``checkpoint_every``, ``eval_every``,
``resume`` and ``out`` are run options), records the registry row (task ``mlm``, the loss curve, train and held-out)
and exports the model to ``<out>/export``: a transformers model (``AutoModel.from_pretrained`` and
``AutoTokenizer``) with its card and ``run.json``. ``suite text train --backbone <out>`` (or ``models:NAME``) takes
the folder (its ``export/``; a model built before the run owner sits in the folder itself). ``mlm.json`` in the
folder records the experiment config, the registry run and the code version and marks it complete: running the
same command again reports it as built and trains nothing, another config pointed at the same folder is refused.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import math
import shutil
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from suite.config import experiment_config, experiment_hash
from suite.memory import pin_malloc_threshold
from suite.paths import cache_dir, data_path, resolve_model_path
from suite.registry import Registry, code_version, config_hash
from suite.safeio import load_arrays, save_arrays, write_atomic
from suite.train import epoch_batches, seeded_generator
from suite.train.run import EXPORT, RunContext, Task, Training, run

CORPUS = ("english/wordnet_sentences.txt.gz", "english/gcide_sentences.txt.gz", "wiki/wiki1m_head11914.txt")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
DONE = "mlm.json"
LEGACY_CHECKPOINT = "checkpoint.pt"  # the resume checkpoint before the run owner (<out>/checkpoint.pt)
UNK = 1  # SPECIAL's index of [UNK]
HELDOUT_SEED = 20260101  # the held-out sentences are the same for every run seed


@dataclass
class MLMConfig:
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "resume", "checkpoint_every", "eval_every")
    corpus: list[str] = field(default_factory=lambda: list(CORPUS),
                              metadata={"help": "sentence files (paths, or relative to SUITE_DATA)"})
    vocab_size: int = 8192
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    intermediate: int = 1024
    dropout: float = 0.1
    max_length: int = field(default=64, metadata={"help": "tokens per sentence with [CLS] and [SEP]; longer ones truncated"})
    mask_prob: float = 0.15
    batch_size: int = 128
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup: float = field(default=0.06, metadata={"help": "fraction of the steps with a linear warm-up"})
    steps: int = 20000
    heldout: int = field(default=2000, metadata={"help": "sentences held out for the validation loss"})
    bf16: bool = field(default=False, metadata={"help": "bf16 autocast (1.7x faster on CPUs with AVX512-BF16 and on GPUs; "
                                                        "about 15x slower on CPUs without it, e.g. AVX2 only; the loss and "
                                                        "the optimiser stay float32)"})
    seed: int = 0
    out: str = field(default="", metadata={"help": "output folder; 'models:NAME' is NAME under $SUITE_MODELS "
                                                   "(~/.cache/suite/models when unset) (default: models:mlm-<config hash>)"})
    device: str = "auto"
    resume: bool = True
    checkpoint_every: int = 500
    eval_every: int = 500

    def __post_init__(self) -> None:
        checks = {"vocab_size": self.vocab_size >= len(SPECIAL) + 100, "layers": self.layers >= 1,
                  "hidden": self.hidden >= 1 and self.heads >= 1 and self.hidden % self.heads == 0,
                  "max_length": self.max_length >= 3, "mask_prob": 0.0 < self.mask_prob < 1.0,
                  "batch_size": self.batch_size >= 2, "lr": self.lr > 0, "warmup": 0.0 <= self.warmup < 1.0,
                  "steps": self.steps >= 1, "heldout": self.heldout >= 0, "dropout": 0.0 <= self.dropout < 1.0,
                  "checkpoint_every": self.checkpoint_every >= 0, "eval_every": self.eval_every >= 0}
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid MLM setting(s) {bad}: " + ", ".join(f"{k}={getattr(self, k)!r}" for k in bad)
                             + " (hidden must be a multiple of heads; vocab_size >= 105; 0 < mask_prob < 1)")
        if not self.corpus:
            raise ValueError("corpus must name at least one sentence file")


def output_dir(cfg: MLMConfig) -> Path:
    return resolve_model_path(cfg.out or f"models:mlm-{experiment_hash(cfg)}")


# ----------------------------------------------------------------------------- corpus

@dataclass
class Corpus:
    sentences: list[str]
    counts: dict[str, dict[str, int]]  # per file: kept, empty, not_utf8


def _corpus_file(name: str) -> Path:
    p = Path(name).expanduser()
    return p if p.is_absolute() or p.exists() else data_path(name)


def read_corpus_file(path: str | Path) -> tuple[list[str], dict[str, int]]:
    """The sentences of one file (gzip when it starts with the gzip magic, else plain), whitespace
    normalised; empty lines and lines that are not valid UTF-8 are skipped and counted."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"corpus file not found: {p} (see MANIFEST.md, section 8; set SUITE_DATA)")
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"corpus file {p} is not a complete gzip file ({exc}); fetch it again") from None
    kept: list[str] = []
    empty = bad = 0
    for line in raw.split(b"\n"):
        try:
            s = " ".join(line.decode("utf-8").split())
        except UnicodeDecodeError:
            bad += 1
            continue
        if s:
            kept.append(s)
        else:
            empty += 1
    if raw.endswith(b"\n"):
        empty -= 1  # the split after the final newline is not a line
    if not kept:
        raise ValueError(f"corpus file {p} holds no sentences ({empty} empty lines, {bad} lines not UTF-8)")
    return kept, {"kept": len(kept), "empty": empty, "not_utf8": bad}


def read_corpus(files: list[str]) -> Corpus:
    sentences: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    for name in files:
        s, c = read_corpus_file(_corpus_file(name))
        sentences += s
        counts[name] = c
    return Corpus(sentences, counts)


def split_heldout(n: int, heldout: int) -> tuple[Tensor, Tensor]:
    """(train indices, held-out indices): a fixed permutation (same for every run seed)."""
    if heldout >= n:
        raise ValueError(f"heldout={heldout} leaves no training sentences (the corpus has {n})")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(HELDOUT_SEED))
    return perm[heldout:].sort().values, perm[:heldout].sort().values


# ----------------------------------------------------------------------------- tokenizer

def train_tokenizer(sentences: list[str], vocab_size: int, out: Path) -> Any:
    """A lower-cased WordPiece vocabulary trained on ``sentences``, saved in ``out`` as a ``BertTokenizerFast``."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True, clean_text=True, strip_accents=True)
    wp.train_from_iterator(sentences, vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL),
                           limit_alphabet=1000, wordpieces_prefix="##", show_progress=False)
    out.mkdir(parents=True, exist_ok=True)
    wp.save_model(str(out))
    tok = BertTokenizerFast(tokenizer_object=wp._tokenizer, do_lower_case=True, model_max_length=512,
                            **dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL)))
    tok.save_pretrained(str(out))
    return tok


def load_tokenizer(out: Path, vocab_size: int) -> Any:
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(out))
    check_vocab(tok, vocab_size, out)
    return tok


def check_vocab(tok: Any, vocab_size: int, where: Path | str) -> None:
    """The tokenizer's vocabulary must be the model's: same size, BERT's special tokens at 0..4."""
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL]
    if len(tok) > vocab_size or ids != list(range(len(SPECIAL))):
        raise ValueError(f"the tokenizer in {where} does not match the model: {len(tok)} tokens for a vocabulary of "
                         f"{vocab_size}, special tokens at {dict(zip(SPECIAL, ids))} (expected 0..4); "
                         f"remove the folder or choose another --out")


def tokenize_corpus(tok: Any, sentences: list[str], key: str) -> tuple[Tensor, Tensor]:
    """(flat token ids int32, offsets int64 (n + 1)) of every sentence without special tokens, cached by
    (corpus, vocabulary)."""
    path = cache_dir("mlm") / f"tokens-{key}.npz"
    if path.exists():
        try:
            arrays, meta = load_arrays(path, what="MLM token cache")
            if meta.get("n") == len(sentences):
                return arrays["tokens"], arrays["offsets"]
        except ValueError:
            pass  # unreadable cache: rebuilt below
    ids: list[list[int]] = []
    for i in range(0, len(sentences), 8192):
        ids += tok(sentences[i:i + 8192], add_special_tokens=False)["input_ids"]
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    tokens = torch.tensor([t for x in ids for t in x], dtype=torch.int32)
    save_arrays(path, {"tokens": tokens, "offsets": offsets}, {"n": len(sentences)})
    return tokens, offsets


# ----------------------------------------------------------------------------- batches and masking

def bucketed_batches(index: Tensor, lengths: Tensor, batch_size: int, seed: int, epoch: int,
                     block: int = 64) -> list[Tensor]:
    """The epoch's batches of ``index`` (sentence ids): a shuffled order (the engine's epoch rule) cut
    into blocks of ``block`` batches, each block sorted by length and cut into batches, the batches
    then shuffled; deterministic in (seed, epoch)."""
    out: list[Tensor] = []
    for chunk in epoch_batches(len(index), min(batch_size * block, len(index)), seed, epoch):
        ids = index[chunk]
        ids = ids[lengths[ids].argsort(stable=True)]
        out += [b for b in ids.split(batch_size) if len(b) >= 2]
    order = torch.randperm(len(out), generator=seeded_generator(seed, epoch=epoch, stream="mlm-blocks"))
    return [out[i] for i in order.tolist()]


def collate(idx: Tensor, tokens: Tensor, offsets: Tensor, max_length: int, cls_id: int, sep_id: int,
            pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """(input ids, attention mask) of shape (B, T): [CLS] body [SEP] padding, bodies cut to ``max_length - 2``."""
    start = offsets[idx]
    n = (offsets[idx + 1] - start).clamp(max=max_length - 2)  # (B,)
    width = int(n.max()) + 2
    ar = torch.arange(width - 2)
    inside = ar[None, :] < n[:, None]  # (B, T-2)
    body = tokens[(start[:, None] + ar[None, :]).clamp(max=len(tokens) - 1)].long().masked_fill(~inside, pad_id)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    ids[:, 0] = cls_id
    ids[:, 1:-1] = body
    ids.scatter_(1, (n + 1)[:, None], sep_id)
    attn = (torch.arange(width)[None, :] < (n + 2)[:, None]).long()
    return ids, attn


def mask_tokens(ids: Tensor, attn: Tensor, prob: float, vocab_size: int, gen: torch.Generator,
                mask_id: int, n_special: int = len(SPECIAL)) -> tuple[Tensor, Tensor]:
    """BERT's masking: ``prob`` of the non-special tokens are predicted; of those 80 % become [MASK],
    10 % a random non-special token, 10 % stay ([UNK] is predicted like any word; [PAD], [CLS], [SEP] and
    [MASK] never). Returns (inputs, labels with -100 elsewhere); at least one token of the batch is
    always predicted."""
    cand = attn.bool() & ((ids >= n_special) | (ids == UNK))
    r = torch.rand(ids.shape, generator=gen)
    sel = (r < prob) & cand
    if not sel.any():
        sel = cand & (r == r.masked_fill(~cand, 2.0).min())
    labels = ids.masked_fill(~sel, -100)
    r2 = torch.rand(ids.shape, generator=gen)
    inputs = ids.masked_fill(sel & (r2 < 0.8), mask_id)
    rnd = sel & (r2 >= 0.8) & (r2 < 0.9)
    inputs[rnd] = torch.randint(n_special, vocab_size, (int(rnd.sum()),), generator=gen)
    return inputs, labels


def mlm_loss(model: Any, inputs: Tensor, attn: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Cross-entropy at the masked positions only (logits for those rows alone); (loss, correct count)."""
    h = model.bert(input_ids=inputs, attention_mask=attn).last_hidden_state  # (B, T, d)
    sel = labels >= 0
    logits = model.cls(h[sel]).float()  # (M, V)
    target = labels[sel]
    return F.cross_entropy(logits, target), (logits.argmax(-1) == target).sum()


def build_model(cfg: MLMConfig, vocab_size: int) -> Any:
    from transformers import BertConfig, BertForMaskedLM

    bc = BertConfig(vocab_size=vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                    hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
                    max_position_embeddings=max(512, cfg.max_length), type_vocab_size=2)
    return BertForMaskedLM(bc)


# ----------------------------------------------------------------------------- training

class MLMObjective:
    """BERT's masked-token cross-entropy as the run's loss: its hyper-parameters are recorded with the registry row and
    the export (no state, no diagnostics; the loss itself is :func:`mlm_loss`)."""

    name = "mlm"

    def __init__(self, mask_prob: float) -> None:
        self.mask_prob = mask_prob

    def hparams(self) -> dict[str, Any]:
        return {"mask_prob": self.mask_prob}

    def diagnostics(self) -> dict[str, float]:
        return {}


class MLMTask(Task[MLMConfig]):
    """MLM pretraining as a :class:`suite.train.run.Task` (task ``mlm``, headline: the held-out ``mlm_loss``).

    Counted in steps: the run owner seeds it (the masks are its generator ``mask``), places it, checkpoints it every
    ``checkpoint_every`` steps (``<out>/checkpoints/step-<N>.pt``; the layout before the owner, ``<out>/checkpoint.pt``,
    is resumed too; none is kept once the model is built), resumes it (config-checked), records the registry row and
    exports the model to ``<out>/export`` (transformers model + tokenizer + card + ``run.json``). The tokenizer is
    trained once into ``<out>/tokenizer`` (a folder of the older layout keeps its vocabulary at ``<out>``). Every
    ``eval_every`` steps the training loss means, tokens/s and learning rate go to split ``train`` and the held-out
    loss, accuracy and perplexity to split ``val``; the final held-out metrics are the evaluation."""

    modality, name, primary, eval_split = "text", "mlm", ("mlm_loss", "val"), "val"

    def __init__(self) -> None:
        self.final: dict[str, float] = {}

    def dataset(self, cfg: MLMConfig) -> str:
        return "english+wiki"

    def loss_name(self, cfg: MLMConfig) -> str:
        return "mlm"

    def stem(self, cfg: MLMConfig) -> str:
        return f"mlm-s{cfg.seed}"

    def keep_checkpoints(self, cfg: MLMConfig) -> int:
        return 0  # the built model is the result; mlm.json marks it complete

    def legacy_checkpoints(self, cfg: MLMConfig, folder: Path) -> list[Path]:
        return [folder / LEGACY_CHECKPOINT]

    def build(self, cfg: MLMConfig, ctx: RunContext[MLMConfig]) -> Training:
        self.ctx, device, folder = ctx, ctx.device, ctx.folder
        pin_malloc_threshold()  # batches of varying length fragment the heap otherwise (RSS 3.5 -> 4.3 GB in 700 steps)
        self.corpus = corpus = read_corpus(cfg.corpus)
        self.train_idx, val_idx = split_heldout(len(corpus.sentences), cfg.heldout)
        tok_dir = tokenizer_dir(folder)
        if (tok_dir / "vocab.txt").exists():
            tok = load_tokenizer(tok_dir, cfg.vocab_size)
        else:
            tok = train_tokenizer([corpus.sentences[i] for i in self.train_idx.tolist()], cfg.vocab_size, tok_dir)
        self.tokenizer, self.tok_dir = tok, tok_dir
        vocab = (tok_dir / "vocab.txt").read_bytes()
        key = config_hash({"counts": corpus.counts, "n": len(corpus.sentences), "vocab": zlib.crc32(vocab)})[:16]
        tokens, offsets = tokenize_corpus(tok, corpus.sentences, key)
        lengths = offsets[1:] - offsets[:-1]
        truncated = int((lengths > cfg.max_length - 2).sum())
        model = build_model(cfg, cfg.vocab_size).to(device)
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6)
        warm = max(1, int(cfg.warmup * cfg.steps))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warm, max(0.0, (cfg.steps - s) / max(1, cfg.steps - warm))))
        gen = ctx.generator("mask")
        cls_id, sep_id, mask_id = (tok.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[MASK]"))

        def batch(idx: Tensor) -> tuple[Tensor, Tensor]:
            return collate(idx, tokens, offsets, cfg.max_length, cls_id, sep_id)

        def step(idx: Tensor) -> Tensor:
            ids, attn = batch(idx)
            inputs, labels = mask_tokens(ids, attn, cfg.mask_prob, cfg.vocab_size, gen, mask_id)
            return mlm_loss(model, inputs.to(device), attn.to(device), labels.to(device))[0]

        @torch.no_grad()
        def validate() -> dict[str, float]:
            if not len(val_idx):
                return {}
            model.eval()
            vgen = torch.Generator().manual_seed(HELDOUT_SEED)  # the same masks at every evaluation
            tot = correct = 0
            loss_sum = 0.0
            for idx in val_idx.split(256):
                ids, attn = batch(idx)
                inputs, labels = mask_tokens(ids, attn, cfg.mask_prob, cfg.vocab_size, vgen, mask_id)
                with ctx.engine.autocast():  # type: ignore[union-attr]
                    loss, c = mlm_loss(model, inputs.to(device), attn.to(device), labels.to(device))
                m = int((labels >= 0).sum())
                loss_sum += float(loss) * m
                correct += int(c)
                tot += m
            model.train()
            return {"mlm_loss": loss_sum / tot, "mlm_acc": correct / tot, "mlm_ppl": math.exp(loss_sum / tot)}

        def log_train() -> None:  # the training loss means since the last point, tokens/s, the learning rate
            engine = ctx.engine
            assert engine is not None
            rec = {f"train_{k}": v for k, v in engine.logger.means().items()}
            rec["tokens_per_s"] = engine.throughput.rate
            rec["lr"] = sched.get_last_lr()[0]
            ctx.log(rec, split="train", step=engine.step)
            engine.logger.reset()

        def on_step() -> None:
            s = ctx.engine.step  # type: ignore[union-attr]
            if cfg.eval_every and s % cfg.eval_every == 0:
                log_train()
                if s < cfg.steps:  # the last step's held-out metrics are the evaluation (evaluate)
                    ctx.log(validate(), split="val", step=s)

        self.validate, self.log_train = validate, log_train
        skipped = {name: {k: v for k, v in c.items() if k != "kept"} for name, c in corpus.counts.items()}
        self.skipped = skipped
        print(f"MLM corpus: {len(corpus.sentences)} sentences ({len(tokens)} tokens, {truncated} cut to "
              f"{cfg.max_length} tokens), skipped per file: {skipped}; {len(val_idx)} held out")
        data = {"n_sentences": len(corpus.sentences), "n_train": len(self.train_idx), "n_heldout": len(val_idx),
                "n_tokens": len(tokens), "truncated": truncated,
                **{f"skipped_empty:{k}": v["empty"] for k, v in skipped.items()},
                **{f"skipped_not_utf8:{k}": v["not_utf8"] for k, v in skipped.items()}}
        return Training(model, opt, lambda ep: bucketed_batches(self.train_idx, lengths, cfg.batch_size, cfg.seed, ep),
                        step, max_steps=cfg.steps, scheduler=sched, loss=MLMObjective(cfg.mask_prob),
                        precision="bf16" if cfg.bf16 else "fp32", on_step=on_step,
                        size=lambda idx: int(lengths[idx].clamp(max=cfg.max_length - 2).sum()) + 2 * len(idx),
                        rate_name="tokens_per_s", data_info=data, checkpoint_unit="step", log_epochs=True)

    def evaluate(self, cfg: MLMConfig, ctx: RunContext[MLMConfig], training: Training) -> dict[str, float]:
        if not cfg.eval_every or ctx.engine.step % cfg.eval_every:  # type: ignore[union-attr]
            self.log_train()
        self.final = self.validate()
        return self.final

    def export_module(self, cfg: MLMConfig, training: Training) -> nn.Module:
        return training.model

    def export(self, cfg: MLMConfig, ctx: RunContext[MLMConfig], training: Training, module: nn.Module,
               path: Path) -> None:
        module.save_pretrained(str(path), safe_serialization=True)  # type: ignore[operator]
        self.tokenizer.save_pretrained(str(path))
        shutil.copyfile(self.tok_dir / "vocab.txt", path / "vocab.txt")  # WordPiece's own file, as BERT folders have
        steps = ctx.engine.step  # type: ignore[union-attr]
        _write_card(path, cfg, {"n_sentences": len(self.corpus.sentences), "steps": steps}, ctx.run)


def tokenizer_dir(folder: Path) -> Path:
    """Where a run's tokenizer is trained and kept: ``<out>/tokenizer``, or ``<out>`` itself for a folder of the
    layout before the run owner (its vocabulary at the top)."""
    return folder if (folder / "vocab.txt").exists() else folder / "tokenizer"


def built_model(folder: Path) -> Path:
    """The transformers model of a built folder: ``<out>/export`` (run owner), or ``<out>`` (models built before)."""
    from text.models.backbone import model_folder

    return model_folder(folder) or folder / EXPORT


def pretrain_mlm(cfg: MLMConfig, registry: Registry | None = None) -> dict[str, Any]:
    """Build (or find already built) the MLM start model in :func:`output_dir` through the run owner; returns a
    summary (``out``: the folder, which ``--backbone`` takes; ``model``: the transformers model in it)."""
    out = output_dir(cfg)
    experiment = experiment_config(cfg)
    done = out / DONE
    if done.exists():
        try:
            recorded = json.loads(done.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{done} is unreadable ({exc}); remove the folder {out} to rebuild the model") from None
        if recorded.get("config") != experiment:
            diff = sorted(k for k in set(experiment) | set(recorded.get("config") or {})
                          if experiment.get(k) != (recorded.get("config") or {}).get(k))
            raise ValueError(f"{out} holds an MLM model built with another configuration (differs in {diff}); "
                             f"choose another --out or remove the folder")
        print(f"MLM model already built in {out} (run {recorded.get('run_id')}): nothing to do")
        return {**recorded, "out": str(out), "model": str(built_model(out)), "skipped": True}

    # the folder is a built model's (``models:``), not a run's under runs/: without --out, models:mlm-<config hash>
    cfg = dataclasses.replace(cfg, out=cfg.out or f"models:mlm-{experiment_hash(cfg)}")
    task = MLMTask()
    res = run(task, cfg, registry=registry)
    engine = task.ctx.engine
    assert engine is not None
    epochs = engine.epoch + engine.batch_in_epoch / max(1, len(task.train_idx) // cfg.batch_size)
    summary = {"config": experiment, "run_id": res.run_id, "code_version": code_version(), "steps": res.steps,
               "val": task.final, "epochs": epochs, "wall_s": res.wall_s, "n_sentences": len(task.corpus.sentences),
               "skipped": task.skipped}
    write_atomic(done, json.dumps(summary, indent=1, sort_keys=True), what="MLM build record")
    (out / LEGACY_CHECKPOINT).unlink(missing_ok=True)  # a checkpoint of the older layout this run resumed from
    return {**summary, "out": str(out), "model": str(res.export or built_model(out))}


def _write_card(out: Path, cfg: MLMConfig, summary: dict[str, Any], run: Any) -> None:
    from suite.model_card import card_info, write_card

    info = card_info(
        title=f"BERT ({cfg.layers} x {cfg.hidden}) pretrained with masked-language modelling on plain English",
        what=("A small BERT trained from scratch by contrastive-suite (`suite text mlm`): the start model for SimCSE "
              "that is not already trained contrastively."),
        modality="text", loss="mlm", loss_hparams={"mask_prob": cfg.mask_prob}, data="+".join(cfg.corpus),
        n_train=summary["n_sentences"], steps=summary["steps"], seed=cfg.seed, run=run,
        extra={"vocab_size": cfg.vocab_size, "batch_size": cfg.batch_size, "lr": cfg.lr, "max_length": cfg.max_length},
        load=("from transformers import AutoModel, AutoTokenizer\n"
              f"model = AutoModel.from_pretrained({str(out)!r})\n"
              f"tokenizer = AutoTokenizer.from_pretrained({str(out)!r})\n"
              f"# SimCSE from it: suite text train --backbone {str(out)!r}"))
    write_card(out, info)
