"""Sentence encoding for evaluation: length-bucketed batches under ``torch.inference_mode``,
results in the original order, optionally cached on disk per (model weights, data) hash.

    fn = EncodeFn(encoder, batch_size=128, cache=True)
    emb = fn(["a sentence", "another one"])  # (2, d) float32 on CPU
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import Tensor

from suite.paths import cache_dir
from suite.safeio import cache_unreadable, load_arrays, save_arrays
from suite.train.meters import progress
from text.data import text_hash
from text.models.encoder import SentenceEncoder


def model_fingerprint(encoder: SentenceEncoder) -> str:
    """Hash of every weight plus the pooling/head settings (changes whenever training changes the model)."""
    h = hashlib.sha256(f"{encoder.pooling}|{encoder.head_at_test}|{type(encoder.backbone).__name__}".encode())
    for name, t in encoder.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


@torch.inference_mode()
def encode_texts(encoder: SentenceEncoder, texts: list[str], batch_size: int = 128, max_length: int = 512,
                 device: str | torch.device | None = None) -> Tensor:
    """(N,) texts -> (N, d) float32 CPU embeddings, in the input order; test-time pooling/head."""
    if not texts:
        raise ValueError("no texts to encode")
    was_training = encoder.training
    encoder.eval()
    dev = torch.device(device) if device is not None else next(encoder.parameters()).device
    lengths = torch.tensor([len(t) for t in texts])
    order = torch.argsort(lengths, descending=True).tolist()  # bucket by length: little padding per batch
    out = torch.empty(len(texts), encoder.dim)
    starts = range(0, len(texts), batch_size)
    try:  # a bar with rate and ETA: encoding SentEval's ~60k sentences takes minutes on a CPU (issue 80)
        for s in progress(starts, desc=f"encoding {len(texts):,} sentences", total=len(starts), unit="batch"):
            idx = order[s:s + batch_size]
            enc = encoder.tokenize([texts[i] for i in idx], max_length)
            z = encoder(enc["input_ids"].to(dev), enc["attention_mask"].to(dev))  # (B, d)
            out[idx] = z.float().cpu()
    finally:
        encoder.train(was_training)
    return out


class EncodeFn:
    """Callable ``texts -> (N, d)`` for evaluators; ``cache=True`` stores embeddings under
    ``suite.paths.cache_dir("text", "embeddings")`` keyed by model fingerprint and text hash."""

    def __init__(self, encoder: SentenceEncoder, batch_size: int = 128, max_length: int = 512,
                 device: str | torch.device | None = None, cache: bool = False) -> None:
        self.encoder = encoder
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.cache = cache
        self._key: str | None = None
        self.cache_hits = 0

    def _path(self, texts: list[str]) -> Path:
        if self._key is None:
            self._key = model_fingerprint(self.encoder)
        return cache_dir("text", "embeddings", self._key) / f"{text_hash(texts)}_L{self.max_length}.npz"

    def __call__(self, texts: list[str]) -> Tensor:
        if not self.cache:
            return encode_texts(self.encoder, texts, self.batch_size, self.max_length, self.device)
        path = self._path(texts)
        if path.exists():
            try:
                arrays, _ = load_arrays(path, "text embedding cache")
                emb = arrays["emb"]
                if emb.ndim != 2 or emb.shape[0] != len(texts):
                    raise ValueError(f"text embedding cache {path} holds {tuple(emb.shape)} for {len(texts)} texts")
                self.cache_hits += 1
                return emb
            except (ValueError, KeyError) as exc:  # corrupt or planted: rebuild
                cache_unreadable(path, exc)
        emb = encode_texts(self.encoder, texts, self.batch_size, self.max_length, self.device)
        save_arrays(path, {"emb": emb})
        return emb
