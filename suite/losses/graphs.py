"""Soft similarity graphs for X-CLR (Sec. 2.2): from labels, class-name texts or captions.

``G = cos(f_text(c_i), f_text(c_j))`` for captions c_i; with class labels, samples take their class
caption (``"a photo of a {class}"`` by default) so G is a (C, C) class graph indexed by labels.
Text encoding uses a sentence-transformers model (loaded by the caller, e.g. the packaged offline
all-MiniLM-L6-v2); the embedding step can be cached with :func:`cached_text_embeddings`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import torch.nn.functional as F
from torch import Tensor

from suite.losses.checks import _fails, check_labels


def label_graph(labels: Tensor) -> Tensor:
    """Hard graph: G_ij = 1 if samples i and j share a label, else 0. Shape (N,) -> (N, N)."""
    return (labels[:, None] == labels[None, :]).float()


def class_graph_from_embeddings(class_emb: Tensor) -> Tensor:
    """(C, e) class (caption) embeddings -> (C, C) cosine graph with diagonal exactly 1."""
    e = F.normalize(class_emb.float(), dim=-1)
    g = (e @ e.T).clamp(-1.0, 1.0)
    g.fill_diagonal_(1.0)
    return g


def sample_graph(class_graph: Tensor, labels: Tensor) -> Tensor:
    """Index a (C, C) class graph by the batch labels: (N, N) sample graph."""
    labels = check_labels(labels, labels.shape[0] if isinstance(labels, Tensor) else -1)
    c = class_graph.shape[0]
    if _fails(((labels < 0) | (labels >= c)).any(), f"labels must lie in [0, {c}) for a graph of {c} classes"):
        raise ValueError(f"labels must lie in [0, {c}) for a graph of {c} classes; got range [{int(labels.min())}, {int(labels.max())}]")
    return class_graph[labels][:, labels]


def caption_graph(caption_emb: Tensor) -> Tensor:
    """Per-sample caption embeddings (N, e) -> (N, N) cosine graph (diagonal 1)."""
    return class_graph_from_embeddings(caption_emb)


def class_captions(class_names: Sequence[str], template: str = "a photo of a {}") -> list[str]:
    return [template.format(c.replace("_", " ")) for c in class_names]


def encode_texts(model: Any, texts: Sequence[str], batch_size: int = 64) -> Tensor:
    """Encode texts with a sentence-transformers model -> (len(texts), e) float tensor."""
    emb = model.encode(list(texts), batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False)
    return emb.detach().float().cpu()


def cached_text_embeddings(model: Any, texts: Sequence[str], cache_dir: Path, model_id: str) -> Tensor:
    """:func:`encode_texts` with an on-disk cache keyed by model id and the texts (a plain-array
    ``.npz`` read with ``allow_pickle=False``; an unreadable cache is rebuilt with a warning)."""
    from suite.safeio import cache_unreadable, load_arrays, save_arrays

    key = hashlib.sha256((model_id + "\x00" + "\x00".join(texts)).encode()).hexdigest()[:20]
    path = Path(cache_dir) / f"text-emb-{key}.npz"
    if path.exists():
        try:
            emb = load_arrays(path, "text embedding cache")[0]["emb"]
            if emb.ndim != 2 or emb.shape[0] != len(texts):
                raise ValueError(f"text embedding cache {path} holds {tuple(emb.shape)} for {len(texts)} texts")
            return emb
        except (ValueError, KeyError) as exc:
            cache_unreadable(path, exc)
    emb = encode_texts(model, texts)
    save_arrays(path, {"emb": emb})
    return emb
