"""The MLM corpus: sentence files (gzip or plain, read by :func:`suite.safeio.read_bytes`), one sentence a line,
the lines that are empty or not UTF-8 counted; the fixed held-out split."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from suite.paths import data_path
from suite.safeio import read_bytes
from suite.train.seeding import fixed_generator
from text.mlm.config import HELDOUT_SEED


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
    if not p.exists():
        raise ValueError(f"corpus file not found: {p} (see MANIFEST.md, section 8; set SUITE_DATA)")
    raw = read_bytes(p, what="corpus file")
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
    perm = torch.randperm(n, generator=fixed_generator(HELDOUT_SEED))
    return perm[heldout:].sort().values, perm[:heldout].sort().values
