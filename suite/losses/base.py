"""Loss base class and name registry shared by every loss (their input checks: :mod:`suite.losses.checks`).

Every loss is a :class:`ContrastiveLoss` (an ``nn.Module``: tensors in, scalar out) registered
under a name with :func:`register_loss`. ``build(name, **hparams)`` constructs one;
``available()`` lists the names; installed packages add theirs through the ``suite.losses`` entry points.
"""
from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, ClassVar, TypeVar

import torch
from torch import Tensor, nn


class _LossMeta(type):
    """Checks the settings of every loss when it is constructed (``bool`` arguments must be booleans: the string
    ``"false"`` is refused, not read as True) and marks the object built, after which :meth:`ContrastiveLoss.__setattr__`
    validates every setting assigned to it."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        _check_bool_settings(cls, args, kwargs)
        obj = super().__call__(*args, **kwargs)
        obj.__dict__["_built"] = True
        return obj


class ContrastiveLoss(nn.Module, metaclass=_LossMeta):
    """Base of every loss in the core.

    Class attributes describe the calling convention so that training loops can dispatch:

    - ``multi_view``: ``forward(views)`` with ``views`` of shape ``(V, N, d)`` is accepted
      (the two-view call ``forward(z_a, z_b)`` is always accepted and means V = 2);
    - ``hypersphere``: inputs are L2-normalised inside (scale-invariant);
    - ``has_negatives``: the loss accepts ``queue=(Q, d)`` extra negatives;
    - ``requires``: keyword inputs that must be given (``"labels"``, ``"similarity"``).

    After each call ``diagnostics()`` returns the loss's own scalars (e.g. MACL's temperature).

    Settings are checked when they are set, at construction and after it: ``loss.chunk_size = -1`` or
    ``loss.temperature = 0`` on a built loss raises the ``ValueError`` the constructor would (the old value is
    kept), and a named variant's fixed settings (``uaur``'s ``t_pos``) cannot be changed.

    A loss runs in float32 (or float64) even inside ``torch.autocast``: bfloat16 / float16 embeddings are
    upcast and autocast is off during the call, so the similarities and their log-sum-exps are never
    computed in half precision (under CPU bf16 autocast InfoNCE was off by 7e-4 dense and 2e-2 tiled).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("precision", "fp32") != "fp32":
            from suite.losses import fused

            with fused.precision(self.precision):
                return self._call(*args, **kwargs)
        return self._call(*args, **kwargs)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        dev = next((a.device.type for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), None)
        if dev == "cuda":  # "auto" tiles from a larger matrix there (suite.losses.tiling.AUTO_DENSE_ELEMENTS_CUDA)
            from suite.losses.tiling import on_cuda

            with on_cuda(True):
                return self._call_on(dev, *args, **kwargs)
        return self._call_on(dev, *args, **kwargs)

    def _call_on(self, dev: str | None, *args: Any, **kwargs: Any) -> Any:
        if dev is not None and torch.is_autocast_enabled(dev):
            with torch.autocast(dev, enabled=False):
                return super().__call__(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    name: ClassVar[str] = ""
    multi_view: ClassVar[bool] = False
    hypersphere: ClassVar[bool] = True
    has_negatives: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ()
    fused_tiles: ClassVar[str] = "no"  # its tiled path on the fused GPU kernels (suite.losses.fused): yes, part, no

    def __init__(self) -> None:
        super().__init__()
        self._stats: dict[str, Tensor] = {}
        self.chunk_size: int | str | None = "auto"  # see suite.losses.tiling; set by build(..., chunk_size=)
        self.precision = "fp32"  # the fused kernels' products (suite.losses.fused); set by build(..., precision=)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_built") and not name.startswith("_"):
            if name == "chunk_size":
                from suite.losses.tiling import check_chunk_size

                value = check_chunk_size(value)
            elif name == "precision":
                from suite.losses.fused import check_precision

                value = check_precision(value)
            elif name in _setting_names(type(self)):
                value = self._checked_setting(name, value)
        super().__setattr__(name, value)

    def _checked_setting(self, name: str, value: Any) -> Any:
        """``value`` for the setting ``name`` as the constructor would take it (with every other setting as it is
        now); the constructor's ``ValueError`` otherwise, naming the loss and the setting."""
        label = getattr(self, "variant", None) or type(self).name or type(self).__name__
        fixed = getattr(_REGISTRY.get(label), "fixed", {})
        if name in fixed:
            raise ValueError(f"loss {label!r} fixes {name} = {fixed[name]!r}; build the base loss "
                             f"({type(self).name!r}) to change it")
        try:
            fresh = type(self)(**{**self.hparams(), name: value})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label}.{name} = {value!r} refused: {exc}") from None
        return getattr(fresh, name)

    def _tile(self, n_rows: int, n_cols: int) -> int | None:
        """Rows per tile for this call's (n_rows x n_cols) similarities, None for the dense path."""
        from suite.losses.tiling import resolve

        return resolve(self.chunk_size, n_rows, n_cols)

    def hparams(self) -> dict[str, Any]:
        """Constructor arguments and their current values (recorded with every run)."""
        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self" and hasattr(self, k)}

    def diagnostics(self) -> dict[str, float]:
        """Scalars from the last forward call (floats), e.g. ``{"tau": 0.11, "alignment": 0.4}``."""
        return {k: float(v) for k, v in self._stats.items()}

    def diagnostic_tensors(self) -> dict[str, Tensor]:
        """The scalars of :meth:`diagnostics` as detached tensors on their device (no host read; the engine's meters)."""
        return dict(self._stats)

    def _record(self, **stats: Tensor | float) -> None:
        self._stats = {k: (v.detach() if isinstance(v, Tensor) else torch.tensor(float(v))) for k, v in stats.items()}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.hparams().items())


_SETTINGS: dict[type, tuple[str, ...]] = {}


def _setting_names(cls: type) -> tuple[str, ...]:
    """The constructor arguments of a loss class (its settings), cached per class."""
    if cls not in _SETTINGS:
        _SETTINGS[cls] = tuple(k for k in inspect.signature(cls.__init__).parameters if k != "self")
    return _SETTINGS[cls]


def _check_bool_settings(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Arguments annotated ``bool`` take True / False (or 0 / 1, numpy booleans), never a string such as
    ``"false"`` that ``bool()`` would read as True."""
    sig = inspect.signature(cls.__init__)
    try:
        bound = sig.bind(None, *args, **kwargs).arguments
    except TypeError:
        return  # the call itself raises the TypeError naming the argument
    for k, v in bound.items():
        ann = sig.parameters[k].annotation
        numpy_bool = getattr(getattr(v, "dtype", None), "kind", None) == "b" and getattr(v, "ndim", 1) == 0
        if ann in (bool, "bool") and not (isinstance(v, bool) or numpy_bool or (isinstance(v, int) and v in (0, 1))):
            raise ValueError(f"{k} must be a boolean (true / false), got {v!r}")


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
        hint = f"; did you mean {', '.join(close)}?" if close else ""
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
