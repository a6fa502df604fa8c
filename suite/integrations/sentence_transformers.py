"""Every loss of the core as a sentence-transformers loss (``SentenceTransformerTrainer``, v6).

    from suite.integrations.sentence_transformers import MACLLoss, SuiteLoss
    loss = MACLLoss(model)                         # MACL with the text preset (App. B.4)
    loss = SuiteLoss(model, "dcl", temperature=0.1)  # any core loss by name; hparams override the preset

The contract is sentence-transformers' own (see its ``MultipleNegativesRankingLoss``): constructed
with the model, ``forward(sentence_features, labels) -> scalar``, ``get_config_dict()`` and
``citation`` for the model card. Hyper-parameters default to the text presets of
:mod:`suite.presets` (SimCSE's tau = 0.05 and one-directional arrangement for the InfoNCE family;
MACL tau0 0.05, alpha 2, A0 0.8, no reweighting); ``setting=None`` gives the core's own defaults.

Dataset columns (every column but ``label`` is a text column, in order):

- ``(anchor, positive)`` pairs: the two views ``z_a, z_b``.
- ``V`` columns holding the same sentence: unsupervised SimCSE; dropout makes them V views. Two-view
  losses take V = 2; multi-view losses (``cacr``, ``uaur``, ``cmc``) take every column as a view,
  ``loss(views)`` with views (V, N, d) (V = 3 for CACR).
- ``(anchor, positive, negative_1, ..., negative_k)`` with a two-view loss: hard negatives. For
  ``infonce`` this is supervised SimCSE (:func:`suite.objectives.sup_simcse_loss`, gradients through
  the hard negatives, ``hard_negative_weight``). Other losses get them as ``queue=`` extra negatives,
  and the core detaches queue entries: no gradient flows through the hard negatives there.
- ``label`` column: class labels for ``supcon`` (positives share a label); for ``xclr`` either the
  rows of a precomputed ``graph`` (class ids with a (C, C) class graph, or sample ids with an (S, S)
  sample graph) or, without a graph, the hard label graph. A label column given to a loss that takes
  no labels is an error (nothing is silently ignored).
- ``xclr`` with ``guide=`` (a frozen SentenceTransformer, as GISTEmbedLoss takes one): the graph is
  the cosine similarity of the guide's embeddings of the anchor column, diagonal 1.

Under torchrun the core gathers the candidates of all ranks itself (:mod:`suite.distributed`), so
the trainer's DDP run sees the global batch's negatives (no ``gather_across_devices`` flag needed).
bf16/fp16 embeddings are computed in float32 inside the core.

Diagnostics: the trainer sums every entry of a dict returned by a loss, so diagnostics cannot ride
in the return value. ``log_diagnostics(trainer)`` makes each suite loss of the trainer report its
``diagnostics()`` (MACL's ``tau`` and ``alignment``, CACR's terms and entropies, ...) through the
trainer's loss-component logging, as ``<loss>_<name>`` (e.g. ``macl_tau``) averaged over the
logging interval.

``CachedSuiteLoss`` composes any of these with sentence-transformers' GradCache mechanism
(``CachedLossMixin``): large batches in the memory of ``mini_batch_size``.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

try:
    from sentence_transformers.base.losses.gradcache import CachedLossMixin, has_static_embedding_input
    from sentence_transformers.base.losses.merged_forward import embed_columns
    from sentence_transformers.util import batch_to_device
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("suite.integrations.sentence_transformers needs sentence-transformers >= 6 "
                      "(pip install 'contrastive-suite[text]')") from exc

import suite.losses as L
from suite import distributed as sd
from suite.losses.base import ContrastiveLoss
from suite.losses.checks import check_labels
from suite.objectives import sup_simcse_loss
from suite.presets import preset

__all__ = ["SuiteLoss", "MACLLoss", "CACRLoss", "XCLRLoss", "TSimCLRLoss", "CachedSuiteLoss", "log_diagnostics",
           "CITATIONS"]

CITATIONS: dict[str, str] = {
    "macl": """@inproceedings{huang2023macl,
    title = {Model-Aware Contrastive Learning: Towards Escaping the Dilemmas},
    author = {Huang, Zizheng and Chen, Haoxing and Wen, Ziqi and Zhang, Chao and Li, Huaxiong and Wang, Bo and Chen, Chunlin},
    booktitle = {International Conference on Machine Learning (ICML)},
    year = {2023},
    eprint = {2207.07874},
    archivePrefix = {arXiv}
}""",
    "cacr": """@article{zheng2021cacr,
    title = {Contrastive Attraction and Contrastive Repulsion for Representation Learning},
    author = {Zheng, Huangjie and Chen, Xu and Yao, Jiangchao and Yang, Hongxia and Li, Chunyuan and Zhang, Ya and Zhang, Hao and Tsang, Ivor and Zhou, Jingren and Zhou, Mingyuan},
    year = {2021},
    eprint = {2105.03746},
    archivePrefix = {arXiv}
}""",
    "xclr": """@article{sobal2024xclr,
    title = {X-Sample Contrastive Loss: Improving Contrastive Learning with Sample Similarity Graphs},
    author = {Sobal, Vlad and Ibrahim, Mark and Balestriero, Randall and Cabannes, Vivien and Bouchacourt, Diane and Astolfi, Pietro and Cho, Kyunghyun and LeCun, Yann},
    year = {2024},
    eprint = {2407.18134},
    archivePrefix = {arXiv}
}""",
    "tsimclr": """@inproceedings{hu2023tsimclr,
    title = {Your Contrastive Learning Is Secretly Doing Stochastic Neighbor Embedding},
    author = {Hu, Tianyang and Liu, Zhili and Zhou, Fengwei and Wang, Wenjia and Huang, Weiran},
    booktitle = {International Conference on Learning Representations (ICLR)},
    year = {2023},
    eprint = {2205.14814},
    archivePrefix = {arXiv}
}""",
    "supcon": """@inproceedings{khosla2020supcon,
    title = {Supervised Contrastive Learning},
    author = {Khosla, Prannay and Teterwak, Piotr and Wang, Chen and Sarna, Aaron and Tian, Yonglong and Isola, Phillip and Maschinot, Aaron and Liu, Ce and Krishnan, Dilip},
    booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
    year = {2020},
    eprint = {2004.11362},
    archivePrefix = {arXiv}
}""",
}
SIMCSE_CITATION = """@inproceedings{gao2021simcse,
    title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
    author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
    booktitle = {Empirical Methods in Natural Language Processing (EMNLP)},
    year = {2021},
    eprint = {2104.08821},
    archivePrefix = {arXiv}
}"""


class SuiteLoss(nn.Module):
    """A core loss (``suite.losses``, by name) as a sentence-transformers loss.

    Args:
        model: the SentenceTransformer being trained.
        loss: a core loss name (``suite.losses.available()``; aliases accepted).
        setting: preset setting of :func:`suite.presets.preset` (default ``"text"``); ``None`` for the
            core loss's own defaults.
        guide: ``xclr`` only: a frozen SentenceTransformer whose anchor-column embeddings give the graph.
        graph: ``xclr`` only: a (C, C) or (S, S) similarity graph indexed by the ``label`` column.
        hard_negative_weight: ``infonce`` with hard-negative columns: SimCSE's logit offset on each
            anchor's own hard negative.
        **hparams: hyper-parameters of the core loss (override the preset).

    Columns and labels: see the module docstring. Shapes: each text column embeds to (N, d) -> ().

    Example::

        loss = SuiteLoss(model, "macl")  # == MACLLoss(model)
        SentenceTransformerTrainer(model=model, train_dataset=ds, loss=loss).train()
    """

    def __init__(self, model: nn.Module, loss: str = "infonce", *, setting: str | None = "text",
                 guide: nn.Module | None = None, graph: Tensor | None = None, hard_negative_weight: float = 0.0,
                 **hparams: Any) -> None:
        super().__init__()
        self.model = model
        name, base = preset(setting, loss) if setting is not None else (L.canonical_name(loss), {})
        self.core: ContrastiveLoss = L.build(name, **{**base, **hparams})
        self.loss_name = name
        self.setting = setting
        self.hard_negative_weight = float(hard_negative_weight)
        if self.hard_negative_weight and name != "infonce":
            raise ValueError(f"hard_negative_weight is defined for the supervised SimCSE objective (infonce) only, "
                             f"not {name!r}")
        needs_graph = "similarity" in type(self.core).requires
        if (guide is not None or graph is not None) and not needs_graph:
            raise ValueError(f"guide= and graph= are for losses that take a similarity graph (xclr), not {name!r}")
        if guide is not None and graph is not None:
            raise ValueError("give either guide= (a frozen model) or graph= (a precomputed graph), not both")
        self.guide = guide
        if guide is not None:
            guide.requires_grad_(False)
            tok_m, tok_g = getattr(model, "tokenizer", None), getattr(guide, "tokenizer", None)
            if tok_m is None or tok_g is None:
                raise ValueError("guide= needs a model and a guide that both have a tokenizer")
            self._tokenizer = tok_m
            self._retokenize = (tok_m.get_vocab() != tok_g.get_vocab()
                                or getattr(guide, "max_seq_length", 0) < getattr(model, "max_seq_length", 0))
        self.graph: Tensor | None = None
        if graph is not None:
            if not isinstance(graph, Tensor) or graph.dim() != 2 or graph.shape[0] != graph.shape[1] \
                    or not graph.dtype.is_floating_point:
                raise ValueError(f"graph must be a square floating-point (C, C) tensor; got "
                                 f"{tuple(graph.shape) if isinstance(graph, Tensor) else type(graph).__name__}")
            self.graph = graph.detach().float().cpu()
        self._trainer: Any = None

    # ------------------------------------------------------------------ contract

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None) -> Tensor:
        features = list(sentence_features)
        similarity = self._guide_similarity(features) if self.guide is not None else None
        embeddings = embed_columns(self.model, features)
        return self.compute_loss_from_embeddings(embeddings, labels, similarity=similarity)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None,
                                     similarity: Tensor | None = None) -> Tensor:
        """The loss from the columns' embeddings, a list of C tensors (N, d) (see the column rules)."""
        c = len(embeddings)
        if c < 2:
            raise ValueError(f"{type(self).__name__} needs >= 2 text columns, got {c}; for unsupervised SimCSE "
                             "put the same sentence in two (or V) columns")
        rows = [int(e.shape[0]) for e in embeddings]
        if len(set(rows)) > 1:  # a ragged batch: name the columns, not torch.stack's entries
            odd = next(i for i, r in enumerate(rows) if r != rows[0])
            raise ValueError(f"{type(self).__name__}: every text column must hold the batch's {rows[0]} rows; column "
                             f"{odd} has {rows[odd]} rows, column 0 has {rows[0]} (rows per column: {rows})")
        core, req = self.core, type(self.core).requires
        extra: dict[str, Tensor] = {}
        if "labels" in req:
            if labels is None:
                raise ValueError(f"loss {self.loss_name!r} needs a 'label' column of class ids")
            extra["labels"] = labels
        elif "similarity" in req:
            extra["similarity"] = similarity if similarity is not None else self._graph_from_labels(labels, embeddings[0])
        elif labels is not None:
            raise ValueError(f"loss {self.loss_name!r} takes no labels, but the dataset has a 'label' column; "
                             "remove it (dataset.remove_columns('label'))")
        if core.multi_view:
            out = core(torch.stack(embeddings), **extra)  # (V, N, d): every column is a view
        elif c == 2:
            out = core(embeddings[0], embeddings[1], **extra)
        else:
            hard = torch.cat(embeddings[2:])  # (K*N, d): hard negatives, column-major
            if self.loss_name == "infonce":
                out = sup_simcse_loss(embeddings[0].float(), embeddings[1].float(), hard.float(),
                                      core.temperature, self.hard_negative_weight,  # type: ignore[arg-type]
                                      core.negatives, core.symmetric)  # type: ignore[arg-type]
            elif "labels" in req:
                raise ValueError(f"loss {self.loss_name!r} cannot take hard-negative columns (their labels are unknown); "
                                 f"give (anchor, positive) columns and a label column")
            else:
                out = core(embeddings[0], embeddings[1], queue=hard, **extra)  # detached extra negatives
        self._report()
        return out

    def get_config_dict(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"loss": self.loss_name, "setting": self.setting, **self.core.hparams()}
        if self.hard_negative_weight:
            cfg["hard_negative_weight"] = self.hard_negative_weight
        if self.guide is not None:
            cfg["guide"] = self.guide
        if self.graph is not None:
            cfg["graph"] = f"precomputed {tuple(self.graph.shape)}"
        return cfg

    @property
    def citation(self) -> str:
        return CITATIONS.get(self.loss_name, SIMCSE_CITATION)

    def diagnostics(self) -> dict[str, float]:
        """The core loss's scalars from the last call (e.g. MACL ``tau``, ``alignment``)."""
        return self.core.diagnostics()

    # ------------------------------------------------------------------ helpers

    def _report(self) -> None:
        trainer = self._trainer() if self._trainer is not None else None
        stats = self.core._stats
        if trainer is not None and stats:
            trainer.track_loss_components({f"{self.loss_name}_{k}": v.float() for k, v in stats.items()})

    def _graph_from_labels(self, labels: Tensor | None, like: Tensor) -> Tensor:
        """(N, W*N) graph of the batch: rows of ``graph`` indexed by the label column, else the label graph."""
        if labels is None:
            raise ValueError(f"loss {self.loss_name!r} needs a similarity graph: pass guide= (a frozen model), or "
                             "graph= with a 'label' column indexing it, or a 'label' column of class ids")
        labels = check_labels(labels, like.shape[0])
        all_labels = sd.gather_nograd(labels)  # (W*N,)
        if self.graph is None:
            return (labels[:, None] == all_labels[None, :]).to(like.dtype)
        s = self.graph.shape[0]
        lo, hi = int(all_labels.min()), int(all_labels.max())
        if lo < 0 or hi >= s:
            raise ValueError(f"label values must index the graph's {s} rows; got range [{lo}, {hi}]")
        idx = labels.cpu()
        return self.graph[idx][:, all_labels.cpu()].to(like.device, like.dtype)

    def _guide_similarity(self, features: list[dict[str, Any]]) -> Tensor:
        """(N, W*N) cosine graph of the guide's embeddings of the anchor column (diagonal 1), no gradient."""
        guide = self.guide
        assert guide is not None
        with torch.no_grad():
            feat = dict(features[0])  # shallow copy: the guide writes its outputs into the dict it gets
            if self._retokenize:
                texts = self._tokenizer.batch_decode(feat["input_ids"], skip_special_tokens=True)
                feat = batch_to_device(guide.preprocess(texts), guide.device)
            g = torch.nn.functional.normalize(guide(feat)["sentence_embedding"].float(), dim=-1)  # (N, e)
            ga = sd.gather_nograd(g)  # (W*N, e)
            sim = (g @ ga.T).clamp(-1.0, 1.0)
            n = g.shape[0]
            own = sd.rank() * n + torch.arange(n, device=g.device)
            sim[torch.arange(n, device=g.device), own] = 1.0
        return sim


class MACLLoss(SuiteLoss):
    """MACL (Huang et al. 2023) with the text preset (App. B.4: tau0 0.05, alpha 2, A0 0.8, no
    reweighting; SimCSE's one-directional arrangement). Train with encoder dropout 0.2 (App. B.4)."""

    def __init__(self, model: nn.Module, **hparams: Any) -> None:
        super().__init__(model, "macl", **hparams)


class CACRLoss(SuiteLoss):
    """CACR (Zheng et al.): every text column is a view; three columns of the same sentence give the
    V = 3 dropout views of the text setting."""

    def __init__(self, model: nn.Module, **hparams: Any) -> None:
        super().__init__(model, "cacr", **hparams)


class XCLRLoss(SuiteLoss):
    """X-CLR (Sobal et al. 2024) with the text preset (tau 0.05, target tau 0.1); the graph from a
    frozen ``guide`` model, or a precomputed ``graph`` indexed by the label column."""

    def __init__(self, model: nn.Module, guide: nn.Module | None = None, graph: Tensor | None = None,
                 **hparams: Any) -> None:
        super().__init__(model, "xclr", guide=guide, graph=graph, **hparams)


class TSimCLRLoss(SuiteLoss):
    """t-SimCLR (Hu et al. 2023): Student-t kernel on unnormalised embeddings (tau 5, t_df 5)."""

    def __init__(self, model: nn.Module, **hparams: Any) -> None:
        super().__init__(model, "tsimclr", **hparams)


class CachedSuiteLoss(CachedLossMixin, SuiteLoss):
    """Any :class:`SuiteLoss` with sentence-transformers' gradient caching (GradCache, Gao et al.
    2021): columns are embedded in mini-batches of ``mini_batch_size`` without graph, the core loss
    runs once on the whole batch and back-propagates to the embeddings, and each mini-batch is
    re-embedded with the cached gradients (dropout replayed). Same loss and gradients as the uncached
    loss up to dropout sampling; memory of ``mini_batch_size`` sentences.

    Example: ``CachedSuiteLoss(model, "macl", mini_batch_size=32)``
    """

    def __init__(self, model: nn.Module, loss: str = "infonce", *, mini_batch_size: int = 32, **kwargs: Any) -> None:
        SuiteLoss.__init__(self, model, loss, **kwargs)
        if has_static_embedding_input(model):
            raise ValueError("CachedSuiteLoss cannot split a StaticEmbedding model's inputs into mini-batches; use SuiteLoss")
        if mini_batch_size < 1:
            raise ValueError(f"mini_batch_size must be >= 1, got {mini_batch_size}")
        self.mini_batch_size = int(mini_batch_size)
        self._similarity: Tensor | None = None

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None) -> Tensor:
        features = list(sentence_features)
        self._similarity = self._guide_similarity(features) if self.guide is not None else None
        return self.forward_cached(features, labels)

    def calculate_loss(self, reps: list[list[Tensor]], labels: Tensor | None = None, *,
                       with_backward: bool = False) -> Tensor:
        loss = self.compute_loss_from_embeddings([torch.cat(r) for r in reps], labels, similarity=self._similarity)
        if with_backward:
            loss.backward()
            loss = loss.detach()
        return loss

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "mini_batch_size": self.mini_batch_size}


def log_diagnostics(trainer: Any) -> Any:
    """Make every suite loss of ``trainer`` (one loss or a dict of them) log its ``diagnostics()``
    through the trainer's loss-component logging (``macl_tau``, ``cacr_cond_entropy``, ...).
    Returns the trainer."""
    losses = trainer.loss.values() if isinstance(trainer.loss, dict) else [trainer.loss]
    found = 0
    for loss in losses:
        if isinstance(loss, SuiteLoss):
            loss._trainer = weakref.ref(trainer)
            found += 1
    if not found:
        raise ValueError("log_diagnostics: the trainer has no suite loss (SuiteLoss, MACLLoss, ...)")
    return trainer
