"""The losses by name: :func:`register_loss` adds a loss class (or a named variant of one) under a name and aliases,
:func:`build` constructs one, :func:`available` lists them; installed packages add theirs through the
``suite.losses`` entry points (:func:`load_plugins`, through :mod:`suite.losses.user`).

Apart from :mod:`suite.losses.base` (the class every loss is), so that the base and a user's loss
(:mod:`suite.losses.user`) import each other through nothing: this module imports both.
"""
from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, TypeVar

from suite.losses.base import ContrastiveLoss

L = TypeVar("L", bound=Callable[..., ContrastiveLoss])
_REGISTRY: dict[str, Callable[..., ContrastiveLoss]] = {}
_ALIASES: dict[str, str] = {}


def register_loss(name: str, *aliases: str, **fixed: Any) -> Callable[[L], L]:
    """Register a loss class under ``name`` (and aliases).

    ``fixed`` keyword arguments make a named variant of an existing class, e.g.
    ``register_loss("uaur", t_pos=0.0, t_neg=0.0)(CACR)``: variants are constructor arguments.
    """

    def deco(cls: L) -> L:
        if name in _REGISTRY or name in _ALIASES:
            raise ValueError(f"loss name {name!r} registered twice")
        if fixed:
            def factory(**hp: Any) -> ContrastiveLoss:
                clash = set(hp) & set(fixed)
                if clash:
                    raise ValueError(f"loss {name!r} fixes {sorted(clash)}; use the base loss to change them")
                obj = cls(**fixed, **hp)
                obj.variant = name  # type: ignore[attr-defined]
                obj._fixed = dict(fixed)  # what the built loss refuses to change (ContrastiveLoss._checked_setting)
                return obj
            factory.__wrapped__ = cls  # type: ignore[attr-defined]
            factory.fixed = dict(fixed)  # type: ignore[attr-defined]
            _REGISTRY[name] = factory
        else:
            cls.name = name  # type: ignore[attr-defined]
            _REGISTRY[name] = cls
        for a in aliases:
            _ALIASES[a] = name
        return cls

    return deco


_PLUGINS: dict[str, str] = {}  # loss name -> "entry point value (package version)" of an installed package's loss
_PLUGIN_ERRORS: dict[str, str] = {}  # loss name -> why its entry point could not be loaded
_plugins_loaded = False


def load_plugins() -> None:
    """Register the losses installed packages declare under the ``suite.losses`` entry-point group (once). A
    plugin that fails to import, or whose name is already taken, is left out; naming it gives the reason."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from suite.losses.user import LossError, adopt, entry_points

    for ep in entry_points():
        where = f"entry point {ep.value} of {ep.dist.name if ep.dist else 'an unknown package'}"
        if ep.name in _REGISTRY or ep.name in _ALIASES:
            _PLUGIN_ERRORS.setdefault(ep.name, f"loss {ep.name!r}: {where} is ignored (the name is taken)")
            continue
        try:
            register_loss(ep.name)(adopt(ep.load(), ep.name))
        except LossError as exc:
            _PLUGIN_ERRORS[ep.name] = f"{exc} ({where})"
        except Exception as exc:  # a broken plugin must not break the suite: said when it is named
            _PLUGIN_ERRORS[ep.name] = f"loss {ep.name!r}: {where} failed to import: {type(exc).__name__}: {exc}"
        else:
            _PLUGINS[ep.name] = f"{ep.value} ({ep.dist.name} {ep.dist.version})" if ep.dist else ep.value


def plugin_errors() -> dict[str, str]:
    """Losses of installed packages that were left out (a failed import, a taken name): name -> why."""
    load_plugins()
    return dict(_PLUGIN_ERRORS)


def plugins() -> dict[str, str]:
    """Losses added by installed packages: name -> where from."""
    load_plugins()
    return dict(_PLUGINS)


def canonical_name(name: str) -> str:
    if not isinstance(name, str):
        raise ValueError(f"loss name must be a string, got {name!r}")
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        load_plugins()
    if key in _PLUGIN_ERRORS and key not in _PLUGINS and key not in _REGISTRY:  # a built-in keeps its name
        raise ValueError(_PLUGIN_ERRORS[key])
    if key not in _REGISTRY:
        if ":" in name:
            raise ValueError(f"loss {name!r} names a user's class (module:Class or file.py:Class): build it with "
                             f"suite.presets.make_loss, which imports it (suite.losses.build takes registered names)")
        close = difflib.get_close_matches(key, list(_REGISTRY) + list(_ALIASES), n=3)
        named = list(dict.fromkeys(f"{c} (= {_ALIASES[c]})" if c in _ALIASES else c for c in close))  # an alias says
        hint = f"; did you mean {', '.join(named)}?" if close else ""                                 # which loss it is
        raise ValueError(f"unknown loss {name!r}{hint} Available: {', '.join(sorted(_REGISTRY))}")
    return key


def build(name: str, chunk_size: int | str | None = "auto", precision: str = "fp32", **hparams: Any) -> ContrastiveLoss:
    """Construct the loss registered as ``name`` with the given hyper-parameters.

    ``chunk_size`` selects the path (:mod:`suite.losses.tiling`): ``"auto"`` (the default) is dense up to 2^24
    similarity entries and memory-bounded tiles above, ``None`` always dense, an int that many anchor rows per
    tile; same values and gradients either way. ``precision``: the products of the tiled path's fused GPU kernels
    (:mod:`suite.losses.fused`): ``"fp32"`` (exact, the default), or ``"tf32"`` / ``"bf16"`` (faster, an error
    stated in docs/design/losses.md); the CPU and the dense path ignore it. Unknown names and unknown
    hyper-parameters raise ``ValueError`` naming the problem.
    """
    from suite.losses.fused import check_precision
    from suite.losses.tiling import check_chunk_size

    if not isinstance(name, str):
        raise ValueError(f"loss name must be a string, got {name!r}")
    chunk_size = check_chunk_size(chunk_size)
    precision = check_precision(precision)
    key = canonical_name(name)
    factory = _REGISTRY[key]
    target = getattr(factory, "__wrapped__", factory)
    params = inspect.signature(target.__init__).parameters
    unknown = [k for k in hparams if k not in params]
    if unknown:
        valid = [k for k in params if k != "self"]
        raise ValueError(f"loss {key!r} has no hyper-parameter(s) {unknown}; valid: {valid}")
    loss = factory(**hparams)
    if isinstance(loss, ContrastiveLoss):
        loss.chunk_size = chunk_size
        loss.precision = precision
    else:  # an installed package's loss that does not derive from ContrastiveLoss (suite.losses.user.UserLoss)
        object.__setattr__(loss, "_suite_hparams", dict(hparams))
    return loss


def available() -> list[str]:
    """Registered loss names (canonical, sorted; aliases are accepted by :func:`build` too), installed packages'
    losses (entry-point group ``suite.losses``) included."""
    load_plugins()
    return sorted(_REGISTRY)


def aliases() -> dict[str, str]:
    return dict(_ALIASES)


def loss_class(name: str) -> type[ContrastiveLoss]:
    f = _REGISTRY[canonical_name(name)]
    return getattr(f, "__wrapped__", f)  # type: ignore[return-value]


def defaults(name: str) -> dict[str, Any]:
    """Default hyper-parameters of a registered loss (fixed variant values included)."""
    f = _REGISTRY[canonical_name(name)]
    cls = getattr(f, "__wrapped__", f)
    out = {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if k != "self" and p.default is not inspect.Parameter.empty
    }
    out.update(getattr(f, "fixed", {}))
    return out


__all__ = ["aliases", "available", "build", "canonical_name", "defaults", "load_plugins", "loss_class", "plugin_errors",
           "plugins", "register_loss"]
