"""The base class every loss is (their input checks: :mod:`suite.losses.checks`; their names: :mod:`suite.losses.registry`).

Every loss is a :class:`ContrastiveLoss` (an ``nn.Module``: tensors in, scalar out), registered under a name with
:func:`suite.losses.registry.register_loss`.
"""
from __future__ import annotations

import inspect
from typing import Any, ClassVar

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
        fixed = self.__dict__.get("_fixed", {})  # a named variant's (suite.losses.registry.register_loss)
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


__all__ = ["ContrastiveLoss"]
