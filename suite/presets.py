"""The papers' loss settings, in one place: ``preset(setting, loss, **context) -> (loss name, hparams)``.

A *setting* is a modality and framework: ``simclr`` (images, in-batch), ``moco`` (images, MoCo v2),
``imagenet`` (t-SimCLR's ImageNet MoCo-v2 setting), ``text`` (SimCSE), ``graph_tu`` (GraphCL on TU) and
``graph_transfer`` (molecular pretraining) and ``gmm`` (t-SimCLR's Gaussian mixtures). A preset is a core loss name and its hyper-parameters,
read from the papers (sources beside each entry); anything a user passes overrides it. Front-ends take
their defaults from here and record the resolved hyper-parameters with every run.

CACR's image temperatures depend on the data set and K (CACR App. C.1); :func:`preset` takes
``dataset=`` and ``views=`` for them.

What a front-end builds is :func:`make_loss`, the one loss factory: :func:`resolve` (the preset, the user's
overrides, then the setting's fixed arrangement: MoCo's queue-only negatives) for a loss of the core, or a user's
own loss (:mod:`suite.losses.user`: ``module:Class``, ``file.py:Class`` or an installed package's loss, with its
own defaults and the overrides, checked once on random embeddings), trained on :func:`views` views per sample, and
for text an encoder dropout of :func:`text_dropout`. Every rule of that kind lives here, not in a front-end.

Example: >>> resolve("moco", "infonce", {"temperature": 0.1})
('infonce', {'temperature': 0.1, 'negatives': 'none', 'symmetric': False})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

import suite.losses as L
from suite.losses import user

SETTINGS = ("simclr", "moco", "imagenet", "text", "graph_tu", "graph_transfer", "gmm")

# SimCSE's objective (Gao et al. 2021, released code): anchors z1, candidates z2, one direction
SIMCSE_ARRANGEMENT = {"negatives": "cross", "symmetric": False}
# GraphCL's released objective: anchors the original graphs, negatives the other augmented graphs
GRAPHCL_ARRANGEMENT = {"negatives": "cross", "symmetric": False}
# MoCo v2 (He et al. 2020; MACL App. B.2): each query against its key and the queue only. A setting's arrangement
# is applied by resolve() under the user's overrides, to the losses that take one (the InfoNCE family).
MOCO_ARRANGEMENT = {"negatives": "none", "symmetric": False}
INFONCE_FAMILY = ("infonce", "dcl", "macl", "hard_negative")
_ARRANGEMENTS: dict[str, dict[str, Any]] = {"moco": MOCO_ARRANGEMENT}

_PRESETS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "simclr": {
        "macl": ("macl", {"tau0": 0.1, "alpha": 0.5, "a0": 0.0}),  # MACL App. B.1 / B.3
        "tsimclr": ("tsimclr", {"temperature": 5.0, "t_df": 5.0}),  # t-SimCLR Remark 4.1, App. C.3
    },
    "moco": {
        "infonce": ("infonce", {"temperature": 0.2}),  # MoCo v2's ImageNet-1K temperature (MACL App. B.2.1)
        "macl": ("macl", {"tau0": 0.15, "alpha": 0.5, "a0": 0.2}),  # MACL App. B.2.1
        "tsimclr": ("tsimclr", {"temperature": 5.0, "t_df": 10.0}),  # t-SimCLR App. C.4 (ImageNet, MoCo v2)
    },
    "imagenet": {
        "tsimclr": ("tsimclr", {"temperature": 5.0, "t_df": 10.0}),  # t-SimCLR App. C.4
        "macl": ("macl", {"tau0": 0.15, "alpha": 0.5, "a0": 0.2}),  # MACL App. B.2.1
    },
    "text": {  # SimCSE tau = 0.05 and arrangement; MACL App. B.4
        "infonce": ("infonce", {"temperature": 0.05, **SIMCSE_ARRANGEMENT}),
        "dcl": ("dcl", {"temperature": 0.05, **SIMCSE_ARRANGEMENT}),
        "hard_negative": ("hard_negative", {"temperature": 0.05, **SIMCSE_ARRANGEMENT}),
        "macl": ("macl", {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False, **SIMCSE_ARRANGEMENT}),
        "xclr": ("xclr", {"temperature": 0.05, "target_temperature": 0.1}),
    },
    "graph_tu": {  # GraphCL tau = 0.2; MACL App. B.5 (tau0 = 0.2 unsupervised)
        "graphcl": ("dcl", {"temperature": 0.2, **GRAPHCL_ARRANGEMENT}),
        "macl": ("macl", {"tau0": 0.2, "alpha": 0.5, "a0": 0.0, **GRAPHCL_ARRANGEMENT}),
        "infonce": ("infonce", {"temperature": 0.2, **GRAPHCL_ARRANGEMENT}),
        "cacr": ("cacr", {}),  # CACR's own defaults (t+ = 1, t- = 2), V = 2
        "cacr3": ("cacr", {}),  # CACR on V = 3 views (see _VIEWS)
        "tsimclr": ("tsimclr", {}),  # t-SimCLR's defaults (tau 5, t_df 5)
    },
    "graph_transfer": {  # GraphCL transfer tau = 0.1; MACL App. B.5 (tau0 = 0.1 transfer)
        "graphcl": ("dcl", {"temperature": 0.1, **GRAPHCL_ARRANGEMENT}),
        "macl": ("macl", {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, **GRAPHCL_ARRANGEMENT}),
        "infonce": ("infonce", {"temperature": 0.1, **GRAPHCL_ARRANGEMENT}),
    },
    "gmm": {  # t-SimCLR's Gaussian mixtures (App. C): cosine SimCLR at tau = 0.5 ("tau = 0.5 works better for the
        # base SimCLR"); t-SimCLR and MACL as for SimCLR images; l2 SimCLR: no value given, tau = 1 (a feature scale
        # for unnormalised features)
        "infonce": ("infonce", {"temperature": 0.5}),
        "simclr_l2": ("simclr_l2", {"temperature": 1.0}),
        "tsimclr": ("tsimclr", {"temperature": 5.0, "t_df": 5.0}),
        "macl": ("macl", {"tau0": 0.1, "alpha": 0.5, "a0": 0.0}),
    },
}

# Views per sample (V) where a setting trains a loss on more than two: graph_tu's ``cacr3`` (the original graph
# and two augmented views, K = 2 positives); text's multi-view losses on three dropout views. Everything else: 2.
_VIEWS: dict[str, dict[str, int]] = {
    "graph_tu": {"cacr3": 3},
    "text": {"cacr": 3, "uaur": 3, "cmc": 3},
}

# Dropout of the text encoder per loss (MACL App. B.4: 0.2 with MACL, "not suitable for vanilla InfoNCE")
TEXT_DROPOUT: dict[str, float] = {"macl": 0.2}
TEXT_DROPOUT_DEFAULT = 0.1  # SimCSE


def cacr_image(dataset: str, views: int) -> dict[str, float]:
    """CACR App. C.1, small-scale images: t+ = 1 everywhere; t- = 2 / 3 / 3 (K = 1) and 0.9 / 2 / 2 (K = 4)
    on CIFAR-10 / CIFAR-100 / STL-10. Other data sets and K get the paper's CIFAR-10 values for the
    nearest K (K = 1 for V = 2, K = 4 otherwise)."""
    k4 = views > 2
    d = dataset.lower().replace("-", "")
    t_neg = {"cifar100": (3.0, 2.0), "stl10": (3.0, 2.0)}.get(d, (2.0, 0.9))[1 if k4 else 0]
    return {"t_pos": 1.0, "t_neg": t_neg}


def _check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")


def _key(loss: str) -> str:
    if not isinstance(loss, str):
        raise ValueError(f"loss name must be a string, got {loss!r}")
    return loss.strip().lower().replace("-", "_")


def preset(setting: str, loss: str, **context: Any) -> tuple[str, dict[str, Any]]:
    """``(core loss name, hparams)`` of ``loss`` (a core name or a preset name such as ``graphcl``) in
    ``setting``; a loss without a preset there gets ``(its name, {})`` (its own defaults)."""
    _check_setting(setting)
    key = _key(loss)
    table = _PRESETS[setting]
    if key in table:
        name, hp = table[key]
        return name, dict(hp)
    name = L.canonical_name(key)
    if name in table:
        n2, hp = table[name]
        return n2, dict(hp)
    if name in ("cacr", "uaur") and setting in ("simclr", "moco", "imagenet") and "dataset" in context:
        hp = cacr_image(str(context["dataset"]), int(context.get("views", 2)))
        return name, ({} if name == "uaur" else hp)
    return name, {}


def resolve(setting: str, loss: str, overrides: dict[str, Any] | None = None, *, aliases: bool = True,
            **context: Any) -> tuple[str, dict[str, Any]]:
    """``(core loss name, hparams)`` that a front-end builds for ``loss`` in ``setting``: the preset
    (:func:`preset`), the user's ``overrides`` on top, then the setting's fixed arrangement for every key the
    user did not give (``moco``: the InfoNCE family contrasts the query with its key and the queue only,
    ``negatives="none", symmetric=False``, MoCo v2).

    ``aliases=False``: only a preset's own name (``graphcl``, ``macl``, ...) selects its preset; any other name,
    an alias such as ``ntxent`` included, is the core loss with its own defaults (the graph front-ends' rule,
    kept so that their recorded runs keep their identities)."""
    _check_setting(setting)
    if aliases or _key(loss) in _PRESETS[setting]:
        name, hp = preset(setting, loss, **context)
    else:
        name, hp = L.canonical_name(loss), {}
    hp.update(overrides or {})
    if name in INFONCE_FAMILY:
        for k, v in _ARRANGEMENTS.get(setting, {}).items():
            hp.setdefault(k, v)
    return name, hp


def views(setting: str, loss: str) -> int:
    """Views per sample (V) that ``setting`` trains ``loss`` (a core or preset name) on by default: 2, or the
    entry of its ``_VIEWS`` table (graph_tu ``cacr3``: 3; text ``cacr``, ``uaur``, ``cmc``: 3)."""
    _check_setting(setting)
    key = _key(loss)
    table = _VIEWS.get(setting, {})
    if key in table:
        return table[key]
    if key in _PRESETS[setting]:
        return 2
    return table.get(L.canonical_name(key), 2)


def text_dropout(loss: str, dropout: float = -1.0) -> float:
    """The text encoder's dropout: ``dropout`` where set (>= 0), else the loss's (MACL App. B.4: 0.2 with
    ``macl``; SimCSE's 0.1 otherwise)."""
    if dropout >= 0:
        return dropout
    return TEXT_DROPOUT.get(loss_label("text", loss), TEXT_DROPOUT_DEFAULT)


def names(setting: str) -> list[str]:
    """Loss (and preset) names with a preset in ``setting``."""
    return sorted(_PRESETS[setting])


@dataclass
class BuiltLoss:
    """What :func:`make_loss` gives a front-end: the loss, the name its runs record, its resolved hyper-parameters,
    the preset that chose them (None: the loss's own defaults), the views per sample it trains on, and for a user's
    loss its origin (:func:`suite.losses.user.origin`: import path, package and version, source sha256)."""

    loss: nn.Module
    name: str
    hparams: dict[str, Any]
    preset: str | None = None
    views: int = 2
    origin: dict[str, Any] | None = field(default=None, repr=False)


def is_user_loss(loss: str) -> bool:
    """A user's loss: named by its class (``module:Class``, ``file.py:Class``) or installed by a package."""
    return user.is_spec(loss) or (isinstance(loss, str) and loss_origin(loss) is not None)


def loss_origin(loss: str) -> dict[str, Any] | None:
    """:func:`suite.losses.user.origin` of ``loss`` (None for a loss of the core); no user code is imported."""
    if not isinstance(loss, str) or not loss.strip():
        return None
    if user.is_spec(loss):
        return user.origin(loss)
    key = L.aliases().get(_key(loss), _key(loss))
    if key in L.plugins():
        return user.origin(key)
    from suite.losses.registry import plugin_errors

    if key not in L.available() and key in plugin_errors():  # an installed loss that is broken: said before any work
        raise ValueError(plugin_errors()[key])
    return None


def loss_label(setting: str, loss: str, *, presets_keep_name: bool = False) -> str:
    """The name runs of ``loss`` record in ``setting`` (without building it): a user's loss as named, a loss of the
    core by its canonical name, or with ``presets_keep_name`` a preset of the setting by the preset's name (the
    graph front-ends: ``graphcl``, not its underlying ``dcl``)."""
    _check_setting(setting)
    if user.is_spec(loss):
        return loss.strip()
    if presets_keep_name and _key(loss) in _PRESETS[setting]:
        return _key(loss)
    return L.canonical_name(loss)


def make_loss(setting: str, loss: str, overrides: dict[str, Any] | None = None, *, provides: tuple[str, ...] | None = None,
              aliases: bool = True, check: bool = True, **context: Any) -> BuiltLoss:
    """The one loss factory of the front-ends: ``loss`` (a preset or core name, a user's ``module:Class`` or
    ``file.py:Class``, or an installed package's loss) in ``setting`` with ``overrides`` on top.

    A loss of the core gets :func:`resolve` (preset, overrides, the setting's arrangement; ``aliases`` and
    ``context`` as there) and :func:`views`. A user's loss gets its own defaults and ``overrides`` only, two views,
    and unless ``check`` is False one run on random embeddings (:func:`suite.losses.user.self_check`). ``provides``:
    the keyword inputs the front-end can give (``labels``, ``similarity``); a loss that requires anything else is
    refused, naming it. Errors are ``ValueError``s of one line."""
    _check_setting(setting)
    if user.is_spec(loss):
        built = user.build_user(loss, **(overrides or {}))
        out = BuiltLoss(built, loss.strip(), built.hparams(), None, 2, user.origin(loss))
    else:
        key = _key(loss)
        name, hp = resolve(setting, loss, overrides, aliases=aliases, **context)
        origin = loss_origin(name)
        built = L.build(name, **hp)
        is_preset = key in _PRESETS[setting] or (aliases and L.canonical_name(key) in _PRESETS[setting])
        out = BuiltLoss(built, name, built.hparams(), key if is_preset else None,
                        views(setting, key) if origin is None else 2, origin)
    if provides is not None:
        missing = [r for r in getattr(out.loss, "requires", ()) if r not in provides]
        if missing:
            hint = (" (a sample-similarity graph (N, N), as X-CLR's; an unsupervised benchmark must not make one from "
                    "labels)" if "similarity" in missing else "")
            raise ValueError(f"loss {out.name!r} requires {missing}, which {setting} training does not provide"
                             + (f" (it provides {list(provides)})" if provides else "") + hint)
    if out.origin is not None and check:
        user.self_check(out.loss, out.name)
    return out
