"""The MLM start model's setting (:class:`MLMConfig`) and where a build goes (:func:`output_dir`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from suite.config import experiment_hash
from suite.paths import resolve_model_path

CORPUS = ("english/wordnet_sentences.txt.gz", "english/gcide_sentences.txt.gz", "wiki/wiki1m_head11914.txt")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
DONE = "mlm.json"
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
