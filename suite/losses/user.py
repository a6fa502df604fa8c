"""A user's own loss, found the way the built-in ones are: named ``module:Class``, ``path/to/file.py:Class``, or
installed by a package under the entry-point group ``suite.losses``.

Where a front-end or a suite file names a loss, the name may be

- a loss of the core (``macl``) or of an installed package, which declares it in its ``pyproject.toml``::

      [project.entry-points."suite.losses"]
      barlow_twins = "suite_barlow_twins:BarlowTwins"

  (``suite losses`` then lists it with its defaults);
- ``my_package.my_module:MyLoss``: a class of an importable module;
- ``path/to/my_loss.py:MyLoss``: a class of a Python file (relative to the working folder).

User code is imported only from what the user names (a command line, a suite file they run) or installs: never
from a checkpoint, an export folder or a registry row, which record the name and :func:`origin` only.

A user's loss is any ``torch.nn.Module`` whose ``forward(z_a, z_b)`` (``(N, d)`` each) returns a scalar. It declares
what it takes the way the built-in ones do, as class attributes (:class:`suite.losses.ContrastiveLoss`):
``multi_view`` (also ``forward(views)`` with ``views`` (V, N, d)), ``requires`` (``("labels",)``), ``has_negatives``
(takes ``queue=(Q, d)``) and ``hypersphere``; missing ones default to a two-view loss that needs nothing and takes no
queue. Its hyper-parameters are its constructor's arguments: its own defaults, then the user's overrides
(``--loss-hparams``); the papers' presets apply to the built-in losses only. :func:`self_check` runs it once on random
embeddings before any training, so that a broken loss fails in one line, not in the middle of a run.

Example: >>> loss = build_user("examples/my_loss.py:CosMargin", margin=0.3); self_check(loss, "CosMargin")
"""
from __future__ import annotations

import contextvars
import copy
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

GROUP = "suite.losses"  # the entry-point group through which an installed package adds losses by name
_SPEC = re.compile(r"^(?P<target>[^:]+):(?P<cls>[A-Za-z_][A-Za-z0-9_]*)$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class LossError(ValueError):
    """A user's loss that cannot be used: one line naming the loss and what went wrong."""


class UserLossFault(LossError):
    """A user's loss failed while a run trained: it raised, returned something a loss does not return, or changed its
    inputs in place. One line naming the loss and what it did (the training engine adds the step); ``user_frames`` holds
    the lines of the traceback that lie in the user's own source (what helps them debug it; none of the suite's)."""

    def __init__(self, message: str, user_frames: list[str] | None = None) -> None:
        super().__init__(message)
        self.user_frames = list(user_frames or [])


_PREFLIGHT: contextvars.ContextVar[bool] = contextvars.ContextVar("suite_user_loss_preflight", default=False)
_INPUTS = ("z_a", "z_b")


def _user_frames(exc: BaseException, cls: type) -> list[str]:
    """The traceback lines of ``exc`` in the source of ``cls`` (its file; a package's folder), formatted as Python does."""
    try:
        src = Path(inspect.getsourcefile(cls) or "").resolve()
    except (TypeError, OSError):
        return []
    mine = src.parent if src.name == "__init__.py" else src
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename and (Path(f.filename).resolve() == mine or mine in Path(f.filename).resolve().parents)]
    return [line.rstrip("\n") for line in traceback.format_list(frames)]


def _guard(adopted: type, user_cls: type, label: str) -> Any:
    """``__call__`` of an adopted loss: the user's call, then checks of what it did that read nothing from the device
    (no host read per step): it returns a floating 0-d tensor on its inputs' device, with a gradient where its inputs
    have one, and leaves its inputs as they were (their version counters). Anything raised in the user's code becomes a
    :class:`UserLossFault` naming the loss, with the user's own traceback lines; a CUDA out-of-memory error passes as
    it is (the engine names the batch and the memory)."""

    def __call__(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        call = super(adopted, self).__call__  # type: ignore[misc]
        if _PREFLIGHT.get():  # the self-check says what is wrong in its own words
            return call(*args, **kwargs)
        names = ("views",) if len(args) == 1 else _INPUTS
        given = [(names[i] if i < len(names) else f"input {i}", a) for i, a in enumerate(args) if isinstance(a, Tensor)]
        given += [(k, v) for k, v in kwargs.items() if isinstance(v, Tensor)]
        versions = [t._version for _, t in given]
        try:
            out = call(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, torch.cuda.OutOfMemoryError) or isinstance(exc, getattr(torch, "AcceleratorError", ())):
                raise  # the GPU's fault, not the user's code: the engine names the step, the batch and the memory
            raise UserLossFault(f"loss {label!r} raised {type(exc).__name__}: {_first_line(exc)}",
                                _user_frames(exc, user_cls)) from exc
        changed = [name for (name, t), v in zip(given, versions) if t._version != v]
        if changed:
            raise UserLossFault(f"loss {label!r} changed its input {', '.join(changed)} in place; a loss must leave its "
                                "inputs as they are (the encoder's backward and the other terms read them): compute on "
                                "new tensors (z = z / n, not z.div_(n))")
        dev = given[0][1].device if given else None
        if not isinstance(out, Tensor):
            raise UserLossFault(f"loss {label!r} returned {type(out).__name__}, not a tensor; a loss returns a 0-d "
                                "floating-point tensor")
        if out.dim() != 0:
            raise UserLossFault(f"loss {label!r} returned a tensor of shape {tuple(out.shape)}; a loss returns a scalar "
                                "(shape ())")
        if not out.is_floating_point():
            raise UserLossFault(f"loss {label!r} returned dtype {out.dtype}; a loss returns a floating-point scalar "
                                "(its gradient flows to the encoder)")
        if dev is not None and out.device != dev:
            raise UserLossFault(f"loss {label!r} returned a tensor on {out.device}, but its inputs are on {dev}; a loss "
                                "returns its value on its inputs' device")
        if torch.is_grad_enabled() and any(t.requires_grad for _, t in given) and not out.requires_grad:
            raise UserLossFault(f"loss {label!r} returned a value without a gradient (detached from its inputs); the "
                                "encoder would not learn")
        return out

    return __call__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


class UserLoss:
    """What the suite reads of every loss, for a user's class that does not derive from ``ContrastiveLoss``: the
    declarations' defaults, :meth:`hparams` (the constructor's arguments) and :meth:`diagnostics` (none).
    :func:`adopt` puts it behind the user's class, which keeps everything it defines itself."""

    name = ""
    multi_view = False
    hypersphere = False
    has_negatives = False
    requires: tuple[str, ...] = ()
    chunk_size = None  # a user's loss has only its own (dense) path

    def hparams(self) -> dict[str, Any]:
        sig = inspect.signature(type(self).__init__)
        given = getattr(self, "_suite_hparams", {})
        out = {k: p.default for k, p in sig.parameters.items()
               if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.default is not p.empty}
        out.update(given)
        return {k: getattr(self, k, v) if _plain(getattr(self, k, v)) else v for k, v in out.items()}

    def diagnostics(self) -> dict[str, float]:
        return {}


def _plain(v: Any) -> bool:
    return isinstance(v, (bool, int, float, str, type(None), list, tuple, dict))


def is_spec(name: Any) -> bool:
    """Whether ``name`` names a class by its import path or file (``module:Class``, ``file.py:Class``)."""
    return isinstance(name, str) and ":" in name


def _parse(spec: str) -> tuple[str, str, bool]:
    """``(target, class name, is a file)`` of ``spec``."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise LossError(f"loss {spec!r}: expected module:Class or path/to/file.py:Class")
    target, cls = m.group("target"), m.group("cls")
    is_file = target.endswith(".py") or "/" in target or "\\" in target
    if not is_file and not _MODULE.match(target):
        raise LossError(f"loss {spec!r}: {target!r} is neither a module path (a.b.c) nor a .py file")
    return target, cls, is_file


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _distribution(module: str) -> tuple[str, str] | None:
    """``(package name, version)`` of the installed distribution that holds ``module``'s top-level package."""
    top = module.split(".")[0]
    for dist in md.packages_distributions().get(top, []):
        try:
            return dist, md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def _module_file(module: str, spec: str) -> Path:
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise LossError(f"loss {spec!r}: module {module!r} not found ({exc})") from None
    if found is None or not found.origin or not Path(found.origin).is_file():
        raise LossError(f"loss {spec!r}: module {module!r} not found (is its package installed, or on PYTHONPATH?)")
    return Path(found.origin)


def origin(name: str) -> dict[str, Any] | None:
    """What identifies a user's loss, without importing it: ``{"import": ..., "sha256": <its source file>}`` and,
    where it is installed, ``"package"`` and ``"version"``; None for a loss of the core. Recorded with every run
    of it (part of the setting: changing the source makes a new setting, two classes of one name never pool)."""
    if is_spec(name):
        target, cls, is_file = _parse(name)
        if is_file:
            path = Path(target)
            if not path.is_file():
                raise LossError(f"loss {name!r}: file {target} not found")
            return {"import": name.strip(), "sha256": _sha256(path)}
        out: dict[str, Any] = {"import": name.strip(), "sha256": _sha256(_module_file(target, name))}
        dist = _distribution(target)
        if dist:
            out["package"], out["version"] = dist
        return out
    ep = entry_point(name)
    if ep is None:
        return None
    module = ep.value.split(":")[0]
    out = {"import": ep.value, "sha256": _sha256(_module_file(module, ep.value))}
    if ep.dist is not None:
        out["package"], out["version"] = ep.dist.name, ep.dist.version
    return out


def entry_points() -> list[md.EntryPoint]:
    """The installed ``suite.losses`` entry points of packages other than this suite (whose losses register
    themselves on import)."""
    return [ep for ep in md.entry_points(group=GROUP) if not ep.value.startswith("suite.")]


def entry_point(name: str) -> md.EntryPoint | None:
    key = name.strip().lower().replace("-", "_") if isinstance(name, str) else ""
    return next((ep for ep in entry_points() if ep.name == key), None)


def adopt(cls: type, label: str) -> type:
    """``cls`` as the suite reads a loss: a subclass named ``label`` (the name its runs record), with
    :class:`UserLoss` behind it unless it derives from ``ContrastiveLoss`` (the user's attributes win)."""
    from suite.losses.base import ContrastiveLoss

    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise LossError(f"loss {label!r}: {getattr(cls, '__name__', cls)!r} is not a loss (not a torch.nn.Module "
                        f"subclass)")
    bases = (cls,) if issubclass(cls, ContrastiveLoss) else (cls, UserLoss)
    adopted = type(cls.__name__, bases, {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                         "__doc__": cls.__doc__, "name": label})
    adopted.__call__ = _guard(adopted, cls, label)  # type: ignore[method-assign]
    return adopted


def load_class(spec: str) -> type:
    """Import the class ``spec`` names (``module:Class`` or ``file.py:Class``), adopted (:func:`adopt`)."""
    target, cls_name, is_file = _parse(spec)
    if is_file:
        path = Path(target)
        if not path.is_file():
            raise LossError(f"loss {spec!r}: file {target} not found")
        mod_name = f"suite_user_loss_{_sha256(path)[:16]}"
        module = sys.modules.get(mod_name)
        if module is None:
            file_spec = importlib.util.spec_from_file_location(mod_name, path)
            if file_spec is None or file_spec.loader is None:
                raise LossError(f"loss {spec!r}: cannot import {target}")
            module = importlib.util.module_from_spec(file_spec)
            sys.modules[mod_name] = module
            try:
                file_spec.loader.exec_module(module)
            except Exception as exc:
                sys.modules.pop(mod_name, None)
                raise LossError(f"loss {spec!r}: importing {target} failed: {type(exc).__name__}: {exc}") from None
    else:
        _module_file(target, spec)
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise LossError(f"loss {spec!r}: importing {target} failed: {type(exc).__name__}: {exc}") from None
    if not hasattr(module, cls_name):
        raise LossError(f"loss {spec!r}: {target} has no class {cls_name!r}")
    return adopt(getattr(module, cls_name), spec.strip())


def construct(cls: type, label: str, hparams: dict[str, Any]) -> nn.Module:
    """``cls(**hparams)``, refusing unknown hyper-parameters by name; the values are kept for ``hparams()``."""
    sig = inspect.signature(cls.__init__)
    takes_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    valid = [k for k in sig.parameters if k != "self" and sig.parameters[k].kind not in
             (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    unknown = [k for k in hparams if k not in valid]
    if unknown and not takes_any:
        raise LossError(f"loss {label!r} has no hyper-parameter(s) {unknown}; valid: {valid}")
    try:
        loss = cls(**hparams)
    except (TypeError, ValueError) as exc:
        raise LossError(f"loss {label!r}: construction with {hparams} failed: {exc}") from None
    if isinstance(loss, UserLoss):
        object.__setattr__(loss, "_suite_hparams", dict(hparams))
    return loss


def build_user(spec: str, **hparams: Any) -> nn.Module:
    """The user's loss ``spec`` (``module:Class`` or ``file.py:Class``) built with ``hparams``."""
    return construct(load_class(spec), spec.strip(), hparams)


def _inputs(loss: nn.Module, n: int, d: int, gen: torch.Generator) -> dict[str, Tensor]:
    extra: dict[str, Tensor] = {}
    requires = tuple(getattr(loss, "requires", ()))
    if "labels" in requires:
        extra["labels"] = torch.arange(n) % max(2, n // 2)
    if "similarity" in requires:
        s = torch.rand(n, n, generator=gen, dtype=torch.float64)
        extra["similarity"] = ((s + s.T) / 2).fill_diagonal_(1.0)
    return extra


def self_check(loss: Any, label: str, n: int = 8, d: int = 16) -> None:
    """Run ``loss`` (a copy) once on random float64 embeddings, two-view and, if it declares ``multi_view``, three
    views: it must be a module, return a finite scalar and give every input a finite gradient. Raises
    :class:`LossError` with one line naming ``label`` and what went wrong."""
    if not isinstance(loss, nn.Module):
        raise LossError(f"loss {label!r}: {type(loss).__name__} is not a loss (not a torch.nn.Module)")
    probe = copy.deepcopy(loss).double()
    gen = torch.Generator().manual_seed(0)
    cases: list[tuple[str, tuple[Tensor, ...]]] = [
        ("two-view (N, d)", (torch.randn(n, d, generator=gen, dtype=torch.float64),
                             torch.randn(n, d, generator=gen, dtype=torch.float64)))]
    if getattr(loss, "multi_view", False):
        cases.append(("multi-view (V, N, d)", (torch.randn(3, n, d, generator=gen, dtype=torch.float64),)))
    extra = _inputs(loss, n, d, gen)
    token = _PREFLIGHT.set(True)
    try:
        _self_check(probe, label, cases, extra)
    finally:
        _PREFLIGHT.reset(token)


def _self_check(probe: nn.Module, label: str, cases: list[tuple[str, tuple[Tensor, ...]]],
                extra: dict[str, Tensor]) -> None:
    for kind, inputs in cases:
        inputs = tuple(x.requires_grad_() for x in inputs)
        try:
            out = probe(*inputs, **extra)
        except TypeError as exc:
            raise LossError(f"loss {label!r}: wrong call signature for {kind} embeddings ({exc})") from None
        except Exception as exc:
            raise LossError(f"loss {label!r}: failed on random {kind} embeddings: {type(exc).__name__}: {exc}") from None
        if not isinstance(out, Tensor) or out.numel() != 1 or out.dim() != 0:
            what = f"a tensor of shape {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
            raise LossError(f"loss {label!r}: returned {what} on {kind} embeddings; a loss returns a scalar (shape ())")
        if not bool(torch.isfinite(out)):
            raise LossError(f"loss {label!r}: returned a non-finite value ({float(out.detach())}) on random {kind} embeddings")
        if not out.requires_grad:
            raise LossError(f"loss {label!r}: gives no gradient to its inputs on {kind} embeddings")
        grads = torch.autograd.grad(out, inputs, allow_unused=True)
        for i, g in enumerate(grads):
            if g is None:
                raise LossError(f"loss {label!r}: gives no gradient to input {i} on {kind} embeddings")
            if not bool(torch.isfinite(g).all()):
                raise LossError(f"loss {label!r}: gives a non-finite gradient to input {i} on {kind} embeddings")


__all__ = ["GROUP", "LossError", "UserLoss", "UserLossFault", "adopt", "build_user", "construct", "entry_point", "entry_points",
           "is_spec", "load_class", "origin", "self_check"]
