"""One training engine for every front-end (issue 14).

A front-end keeps its data and views, a step function (batch -> loss, or a :class:`CachedStep` for
gradient caching) and its evaluation; the :class:`Engine` owns everything else:

* device (:func:`suite.train.device.resolve_device`, the one device rule) and DDP wrapping;
* precision: ``fp32``, ``bf16`` (autocast) or ``fp16`` (autocast + gradient scaler);
* the optimiser and scheduler step, gradient clipping (``grad_clip`` > 0: max global L2 norm);
* gradient accumulation (``accumulate`` micro-batches per optimiser step). It averages the
  gradients of several micro-batches; it does NOT add negatives: every contrastive loss still sees
  only the micro-batch, so accumulation of k batches of N is not a contrastive batch of kN (use
  gradient caching, ``grad_cache_chunk``, for that);
* no host read per step (issue 47): the loss, its diagnostics and a non-finite flag stay on the device and are
  read every ``log_every`` steps, at the end of an epoch, before a checkpoint and before a log (:meth:`Engine.flush`);
* a non-finite loss never changes the model: the flag is sticky and, where the optimiser takes it (torch's fused
  Adam, AdamW and SGD read ``found_inf``; :func:`optimizer_options` makes them fused on CUDA), every update from
  that step on is skipped on the device; any other optimiser costs one host read of the flag before its step.
  At the next read :class:`NonFiniteLossError` names the first such step and the loss value; no checkpoint or log
  is written after it, so the last good checkpoint stays;
* logging: running means of the loss and the loss's diagnostics, throughput, per-epoch stats sent
  to the registry run while the run goes (``run.log_many``), a tqdm bar with rate and ETA (updated at each read);
* one checkpoint layout (:meth:`Engine.save` / :meth:`Engine.load`): model, optimiser, scheduler,
  scaler, step, sampler position (epoch, batch within the epoch), RNG states (python, numpy, torch,
  CUDA and the front-end's named generators) of every rank, the resolved experiment config and a front-end
  ``extra`` dict, written atomically (temporary file, fsync, rename). Resuming continues
  bit-identically because the data order of an epoch is a pure function of (seed, epoch)
  (:func:`suite.train.batches.epoch_batches`) and every random state is restored.

The data order (the epoch rule) is :mod:`suite.train.batches`; device, precision and what a GPU fault says
are :mod:`suite.train.device`.

Why our own thin driver rather than Lightning Fabric or Accelerate: see the README ("Training
engine"); the step overhead is measured on the smallest step (MUTAG GraphCL) by
``python -m benchmarks.measurements.engine_overhead``.
"""
from __future__ import annotations

import math
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ContextManager, Generic, Sequence, TypeVar

import torch
from torch import Tensor, nn

from suite import distributed as sd
from suite.losses.checks import DeferredChecks, deferred
from suite.train.batches import Prefetch
from suite.train.checkpoint import check_resume_config, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from suite.train.device import autocast, check_device_precision, check_precision, cuda_error, gpu_fault, resolve_device
from suite.train.meters import LossLogger, Throughput, diagnostic_values, progress

B = TypeVar("B")
LAYOUT = 1  # checkpoint layout version
LOG_EVERY = 50  # optimiser steps between the engine's host reads of the loss (and at every epoch's end)


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; nothing was stepped, the last good checkpoint is kept."""


# ----------------------------------------------------------------------------- gradient caching

@dataclass
class CachedStep:
    """A step under gradient caching (Gao et al. 2021, "Scaling deep contrastive learning batch size
    under memory limited setup"): ``encode(chunk)`` gives the embeddings of one chunk (chunks are
    concatenated along ``dim``), ``loss(embeddings)`` the loss over the whole batch.

    The engine encodes every chunk without keeping activations, computes the loss and its gradient
    with respect to the embeddings over the whole batch, then re-encodes each chunk with gradients
    (the torch / CUDA random state replayed, so dropout masks are the same as in the first pass)
    and back-propagates the chunk's cached embedding gradient. The parameter gradient is the
    full-batch one exactly, except for layers that mix samples (BatchNorm sees a chunk, not the
    batch; its running statistics are restored after the first pass, so only the second updates them).
    Augmentations are made before ``encode`` (once), so both passes see the same views."""

    encode: Callable[[Any], Tensor]
    chunks: Sequence[Any]
    loss: Callable[[Tensor], Tensor]
    dim: int = 0


class _RngSnapshot:
    """The torch CPU (and current CUDA device's) random state at one point, to replay a forward pass."""

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)


def grad_cache_embeddings(step: CachedStep) -> tuple[list[Tensor], list[_RngSnapshot]]:
    """First pass: embeddings of every chunk without activations, and the random state before each."""
    states, embs = [], []
    with torch.no_grad():
        for c in step.chunks:
            states.append(_RngSnapshot())
            embs.append(step.encode(c))
    return embs, states


# ----------------------------------------------------------------------------- the loss compiled

def compile_loss_of(loss: Any, device: torch.device, wanted: bool | None = None) -> bool:
    """Put ``loss``'s forward through ``torch.compile(fullgraph=True)`` where ``wanted`` (None: on one CUDA process, unless
    ``SUITE_COMPILE_LOSS`` says 0 or 1); returns whether it did. The module itself is unchanged (its state, its
    diagnostics, its checks): only the instance's ``forward`` is the compiled one, so every caller (the front-ends'
    step functions) takes the compiled path."""
    env = os.environ.get("SUITE_COMPILE_LOSS", "")
    if env not in ("", "0", "1"):
        raise ValueError(f"SUITE_COMPILE_LOSS must be 0 or 1, got {env!r}")
    # by default on one CUDA process: the losses' cross-rank gathers are not yet traced on a GPU (to be measured)
    on = (env == "1") if env else ((device.type == "cuda" and sd.world_size() == 1) if wanted is None else wanted)
    if not on or not isinstance(loss, nn.Module) or getattr(loss, "_suite_compiled", False):
        return bool(on and getattr(loss, "_suite_compiled", False))
    backend = os.environ.get("SUITE_COMPILE_BACKEND", "inductor")
    loss.forward = torch.compile(loss.forward, fullgraph=True, backend=backend)  # type: ignore[method-assign]
    loss._suite_compiled = True  # type: ignore[assignment]
    return True


# ----------------------------------------------------------------------------- the engine

class Engine(Generic[B]):
    """The training driver. Build it with the (unwrapped) model and its optimiser; hand
    :meth:`fit` the epoch's batches and a step function. See the module docstring.

    Example:
        >>> eng = Engine(model, torch.optim.Adam(model.parameters()), device="cpu")
        >>> eng.fit(lambda ep: epoch_batches(len(data), 32, seed, ep), lambda idx: loss_of(idx), epochs=3)
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, device: str | torch.device = "auto",
                 scheduler: Any = None, precision: str = "fp32", grad_clip: float = 0.0, accumulate: int = 1,
                 loss: Any = None, run: Any = None, generators: dict[str, torch.Generator] | None = None,
                 desc: str = "train", unit: str = "batch", log_every: int = LOG_EVERY, compile: bool = False,
                 compile_loss: bool | None = None) -> None:
        if accumulate < 1:
            raise ValueError(f"accumulate must be >= 1, got {accumulate}")
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise ValueError(f"log_every must be an integer >= 1 (optimiser steps between host reads), got {log_every!r}")
        if grad_clip < 0:
            raise ValueError(f"grad_clip must be >= 0 (0: off), got {grad_clip}")
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.precision = check_precision(precision)
        check_device_precision(self.device, precision)
        self.model = model
        self.ddp = sd.wrap_ddp(model)
        if compile:  # opt-in: the forward through torch.compile; the checkpoints hold the uncompiled module's state
            self.ddp = torch.compile(self.ddp)  # type: ignore[assignment]
        self.optimizer, self.scheduler = optimizer, scheduler
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self.grad_clip, self.accumulate = grad_clip, accumulate
        self.loss_obj, self.run = loss, run
        # the loss call compiled whole (every loss traces with no graph break, its checks deferred): by default on
        # CUDA, where the host's launches of a loss's 55-100 small operations are what it costs at 2N <= 8,192
        # (issue 78); SUITE_COMPILE_LOSS=0|1 overrides, SUITE_COMPILE_BACKEND names the backend (default inductor)
        self.compiled = {"model": bool(compile), "loss": compile_loss_of(loss, self.device, compile_loss)}
        self.resume_run_id: str | None = None  # set by load(): the registry row of the interrupted run
        self.resume_saved_at: str | None = None  # and when its checkpoint was written (what it logged later is dropped)
        self.generators = dict(generators or {})
        self.desc, self.unit = desc, unit
        self.step = 0  # optimiser steps done
        self.epoch = 0  # epochs completed (the sampler position is (epoch, batch_in_epoch))
        self.batch_in_epoch = 0  # batches of the current epoch done
        self.logger, self.throughput = LossLogger(), Throughput()
        self.log_every = log_every
        self._micro = 0
        # what the next read (flush) takes from the device, per micro-batch since the last one: its position
        # (step, epoch, batch; 1-based), its loss and the loss's diagnostics (tensors, untouched until then)
        self._window: list[tuple[int, int, int]] = []
        self._losses: list[Tensor] = []
        self._diags: list[dict[str, Tensor | float]] = []
        self._last: Tensor | None = None
        self._last_read = float("nan")
        self._found: Tensor | None = None  # a non-finite loss since the last read (fused optimisers' found_inf)
        # a fused optimiser skips a flagged update on the device (found_inf); any other is guarded by a host read
        self.skips_on_device = bool(getattr(optimizer, "defaults", {}).get("fused")) and not self.scaler.is_enabled()
        self.host_reads = 0  # reads of the device by the engine (flush), for the tests and the benchmark
        self._caching = False  # inside a gradient-caching step (what an out-of-memory error there says)
        self.checks = DeferredChecks()  # the losses' input checks while a step runs (read with the loss)
        # the step curves (split ``train-step``, logged at each interval's read, issue 51): host sums since the last
        # point, the gradient norm of the interval's last step (a device tensor, read with the loss)
        self._curve: dict[str, float] = {}
        self._curve_n, self._curve_items, self._curve_t0 = 0, 0, time.perf_counter()
        self._grad_norm: Tensor | None = None
        self.curve_rate = "items_per_s"
        self.trackers: list[Any] = []  # where the curve points go besides the registry (suite.train.trackers)

    # ------------------------------------------------------------------ one step
    def autocast(self) -> ContextManager[Any]:
        return autocast(self.device, self.precision)

    @property
    def last_loss(self) -> float:
        """The last micro-batch's loss, read from the device (a host read: not for every step)."""
        return self._last_read if self._last is None else float(self._last)

    def _watch(self, value: Tensor) -> None:
        """Keep the loss and the loss's diagnostics of this micro-batch for the next read (no work on the device). Where
        the optimiser skips a flagged update on the device, fold a non-finite loss into its sticky ``found_inf`` (from
        this step on no update is made); where it cannot, read the device now, before anything is stepped."""
        v = value.detach().reshape(())
        diags = self._diagnostics()
        self._window.append((self.step + 1, self.epoch + 1, self.batch_in_epoch + 1))
        self._losses.append(v)
        self._diags.append(diags)
        self._last = v
        if self.skips_on_device:
            # 1.0 for a non-finite loss (v - v is NaN there, 0 elsewhere), made as the fused optimiser's float flag: two
            # small kernels and a third to keep it sticky, where isfinite, logical_not, logical_or and float were seven
            f = v.float()
            bad = f.sub(f).ne_(0)
            self._found = bad if self._found is None else torch.maximum(self._found, bad)
            self.optimizer.found_inf = self._found  # type: ignore[attr-defined]
        else:
            self.flush()

    def _diagnostics(self) -> dict[str, Tensor | float]:
        """The loss's diagnostics of this micro-batch, kept as they are (no host read); what is not a number or a
        one-element tensor, or a ``diagnostics()`` that raises, is a :class:`suite.losses.user.UserLossFault` naming the
        loss and the diagnostic (host checks of types only)."""
        from suite.losses.user import UserLossFault, _user_frames

        if self.loss_obj is None:
            return {}
        name = getattr(self.loss_obj, "name", "") or type(self.loss_obj).__name__
        try:
            d = diagnostic_values(self.loss_obj)
        except Exception as exc:
            raise UserLossFault(f"loss {name!r}: its diagnostics() raised {type(exc).__name__}: {exc}",
                                _user_frames(exc, type(self.loss_obj))) from exc
        for k, x in d.items():
            if not ((isinstance(x, Tensor) and x.numel() == 1) or
                    (isinstance(x, (int, float)) and not isinstance(x, bool))):
                shown = f"a tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor) else repr(x)
                raise UserLossFault(f"loss {name!r}: its diagnostics() gave {shown} for {k!r}; a diagnostic is a "
                                    "number or a one-element tensor")
        return d

    def flush(self) -> float:
        """Read the device once: raise the ``ValueError`` of a loss's input check that failed since the last read, or
        :class:`NonFiniteLossError` for a non-finite loss (each naming its step); else feed the epoch's meters and
        return the last loss. Called every ``log_every`` steps, at the end of an epoch and of :meth:`fit`, before a
        checkpoint (:meth:`save`) and before the run logs (``RunContext.log``)."""
        if not self._losses and self._grad_norm is None:
            return self._last_read
        dev = (self._losses[-1] if self._losses else self._grad_norm).device  # type: ignore[union-attr]
        keys = [list(d) for d in self._diags]
        checks = self.checks.pending
        norm = [] if self._grad_norm is None else [self._grad_norm]
        flat = [*self._losses, *(d[k] for d, ks in zip(self._diags, keys) for k in ks), *(b for _, _, b in checks),
                *norm]
        values = torch.stack([torch.as_tensor(x).to(dev, torch.float32).reshape(()) for x in flat]).tolist()
        self.host_reads += 1
        n = len(self._losses)
        losses, rest = values[:n], iter(values[n:])
        diags = [{k: next(rest) for k in ks} for ks in keys]
        failed = [(i, m) for (i, m, _), bad in zip(checks, rest) if bad]
        if norm:
            self._curve["grad_norm"] = values[-1]
            self._grad_norm = None
        at = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
        where = lambda i: "step {} (epoch {}, batch {})".format(*self._window[i])  # noqa: E731
        if failed and (at is None or failed[0][0] <= at):  # the input check: the cause of a non-finite loss
            msg = f"{failed[0][1]} (the loss's input at {where(failed[0][0])})"
            self._abandon()
            raise ValueError(msg)
        if at is not None:
            name = getattr(self.loss_obj, "name", "")
            msg = f"loss became {losses[at]} at {where(at)}" + (f" in loss {name!r}" if name else "")
            self._abandon()
            raise NonFiniteLossError(
                f"{msg}; nothing was stepped from then on and no checkpoint written, the last good checkpoint is kept. "
                f"Lower the learning rate, use fp32/bf16 instead of fp16, or set grad_clip")
        for value, d in zip(losses, diags):
            self.logger.update(value, d)
            for k, v in {"loss": value, **d}.items():
                self._curve[k] = self._curve.get(k, 0.0) + float(v)
        self._curve_n += len(losses)
        if losses:
            self._last_read = losses[-1]
        self._abandon(keep=True)
        return self._last_read

    def _fault(self, exc: Exception, batch: int) -> None:
        """A step raised ``exc``: first the read of what the interval left (a non-finite loss or a failed input check
        before it is the cause, and is raised instead); then a user's loss's fault or a GPU out of memory is raised again
        naming the step (no gradient kept, nothing stepped or saved); anything else returns to be raised as it is."""
        from suite.losses.user import UserLossFault

        where = f"step {self.step + 1} (epoch {self.epoch + 1}, batch {self.batch_in_epoch + 1})"
        caching, self._caching = self._caching, False
        if isinstance(exc, (UserLossFault, torch.cuda.OutOfMemoryError)) or cuda_error(exc):
            try:
                self.flush()
            except (ValueError, FloatingPointError):
                raise
            except Exception:  # noqa: BLE001 (the device itself may be gone: the step's own error is the one to say)
                pass
        else:
            return
        self._abandon()
        self._micro = 0  # the half-accumulated step is dropped with its gradient
        if isinstance(exc, UserLossFault):
            raise UserLossFault(f"{exc} at {where}; nothing was stepped and no checkpoint written, the last checkpoint "
                                "is kept", exc.user_frames) from exc.__cause__
        raise gpu_fault(exc, where, batch, caching) from None

    def _abandon(self, keep: bool = False) -> None:
        """Forget the window read (``keep``: it was read and is clean), else after a fault: no gradient kept."""
        if not keep:
            self.optimizer.zero_grad(set_to_none=True)
            self._last = None
        self._window.clear()
        self._losses.clear()
        self._diags.clear()
        self.checks.pending.clear()
        self.checks.index = 0
        self._found = None

    def _sync_context(self, last: bool) -> ContextManager[Any]:
        """DDP all-reduces gradients only on the backward that ends an optimiser step."""
        if last or not isinstance(self.ddp, nn.parallel.DistributedDataParallel):
            return nullcontext()
        return self.ddp.no_sync()

    def backward(self, out: Tensor | CachedStep) -> Tensor:
        """Back-propagate one micro-batch (a loss tensor, or a :class:`CachedStep`), step the
        optimiser every ``accumulate`` micro-batches; returns the loss, detached and on its device (no host read)."""
        last = (self._micro + 1) % self.accumulate == 0
        if isinstance(out, CachedStep):
            value = self._cached_backward(out, last)
        else:
            value = out.detach()
            self._watch(value)
            with self._sync_context(last):
                self.scaler.scale(out / self.accumulate if self.accumulate > 1 else out).backward()
        self._micro += 1
        if last:
            self._optimizer_step()
        return value

    def _cached_backward(self, cs: CachedStep, last: bool) -> Tensor:
        self._caching = True  # what a fault in here says (the chunk's memory); cleared when the step ends
        value = self._cached_backward_(cs, last)
        self._caching = False
        return value

    def _cached_backward_(self, cs: CachedStep, last: bool) -> Tensor:
        buffers = [b for b in self.model.buffers() if b.dtype.is_floating_point or b.dtype == torch.long]
        saved = [b.detach().clone() for b in buffers]  # BatchNorm running statistics: updated by one pass only
        with self.autocast():
            embs, states = grad_cache_embeddings(cs)
        with torch.no_grad():
            for b, v in zip(buffers, saved):
                b.copy_(v)
        after = _RngSnapshot()
        leaf = torch.cat(embs, dim=cs.dim).detach().requires_grad_(True)
        with self.autocast():
            loss = cs.loss(leaf)
        value = loss.detach()
        self._watch(value)
        self.scaler.scale(loss / self.accumulate).backward()
        grads = leaf.grad.split([e.shape[cs.dim] for e in embs], dim=cs.dim)  # type: ignore[union-attr]
        for i, (c, st, g) in enumerate(zip(cs.chunks, states, grads)):
            st.restore()  # same dropout masks as in the first pass
            with self._sync_context(last and i == len(cs.chunks) - 1), self.autocast():
                e = cs.encode(c)
            e.backward(g.to(e.dtype))
        after.restore()  # the random stream continues as after the first pass
        return value

    def _optimizer_step(self) -> None:
        curve = (self.run is not None or bool(self.trackers)) and (self.step + 1) % self.log_every == 0  # ends one
        if self.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self._grad_norm = norm.detach() if curve else None
        elif curve and not self.scaler.is_enabled():  # fp16's gradients are scaled: no norm without unscaling
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            self._grad_norm = torch.nn.utils.get_total_norm(grads).detach() if grads else None
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 0.0
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        skipped = self.scaler.is_enabled() and self.scaler.get_scale() < scale  # fp16 overflow: step skipped
        if self.scheduler is not None and not skipped:
            self.scheduler.step()
        self.step += 1

    # ------------------------------------------------------------------ the loop
    def fit(self, batches: Callable[[int], Sequence[B]], step_fn: Callable[[B], Tensor | CachedStep], *,
            epochs: int | None = None, max_steps: int | None = None, size: Callable[[B], int] | None = None,
            on_step: Callable[[], None] | None = None, on_epoch: Callable[[int, dict[str, float]], None] | None = None,
            log_epochs: bool = True, rate_name: str = "items_per_s", collate: Callable[[B], Any] | None = None,
            workers: int = 0) -> None:
        """Train from the current position (``epoch``, ``batch_in_epoch``) until ``epochs`` epochs or
        ``max_steps`` optimiser steps. ``batches(epoch)`` lists the epoch's batches (deterministic in
        the epoch); ``step_fn(batch)`` runs under autocast and returns the loss. ``on_step()`` after
        every optimiser step, ``on_epoch(epoch, stats)`` after every finished epoch (1-based; stats:
        loss means, diagnostics, ``rate_name`` per second); epoch stats go to the registry run.

        ``collate(batch)``: the host's part of a step (collating graphs, tokenising sentences; deterministic, no
        random stream), whose result ``step_fn`` then takes instead of the batch; with ``workers`` > 0 it runs in
        that many ``DataLoader`` worker processes ahead of the step, into pinned memory on CUDA, off the critical
        path (:class:`Prefetch`)."""
        if epochs is None and max_steps is None:
            raise ValueError("fit needs epochs or max_steps")
        self.model.train()
        self.curve_rate = rate_name
        self._curve_items, self._curve_t0 = 0, time.perf_counter()  # the rate counts from the loop's start, not the build
        prefetch = Prefetch(collate, workers, pin=self.device.type == "cuda") if collate is not None else None
        try:
            self._fit(batches, step_fn, epochs, max_steps, size, on_step, on_epoch, log_epochs, rate_name, prefetch)
        finally:
            if prefetch is not None:
                prefetch.close()
        self.flush()
        self.log_curve()  # the last steps' point (the points fall every log_every steps, not at each epoch's end)

    def _fit(self, batches: Callable[[int], Sequence[B]], step_fn: Callable[[Any], Tensor | CachedStep],
             epochs: int | None, max_steps: int | None, size: Callable[[B], int] | None,
             on_step: Callable[[], None] | None, on_epoch: Callable[[int, dict[str, float]], None] | None,
             log_epochs: bool, rate_name: str, prefetch: "Prefetch | None") -> None:
        while (epochs is None or self.epoch < epochs) and not self._done(max_steps):
            bs = batches(self.epoch)
            start = self.batch_in_epoch
            if start == 0:
                self.logger.reset()
                self.throughput.reset()
            bar = progress(bs[start:], desc=f"{self.desc} ep{self.epoch + 1}" + (f"/{epochs}" if epochs else ""),
                           total=len(bs) - start, unit=self.unit)
            stopped = False
            ready = prefetch(bs[start:]) if prefetch is not None else None
            for b in bar:
                if self._done(max_steps):
                    stopped = True
                    break
                self.checks.index = len(self._window)
                try:
                    with deferred(self.checks):
                        with self.autocast():
                            out = step_fn(next(ready) if ready is not None else b)
                        self.backward(out)
                except Exception as exc:  # named with its step (and the batch, for memory); the user's code's as such
                    self._fault(exc, size(b) if size else len(b))  # type: ignore[arg-type]
                    raise
                self.batch_in_epoch += 1
                items = (size(b) if size else len(b)) * sd.world_size()  # type: ignore[arg-type]
                self.throughput.update(items)
                self._curve_items += items
                stepped = self._micro % self.accumulate == 0
                if stepped and self.step % self.log_every == 0:  # the one host read of the interval
                    shown = self.flush()
                    self.log_curve()
                    if hasattr(bar, "set_postfix"):
                        bar.set_postfix(loss=f"{shown:.4f}", rate=f"{self.throughput.rate:.0f}/s", refresh=False)  # type: ignore[attr-defined]
                if stepped and on_step is not None:
                    on_step()
            self.flush()  # a non-finite loss of the epoch's last steps is named before anything is logged or saved
            if stopped or (self._done(max_steps) and self.batch_in_epoch < len(bs)):
                break
            stats = {**self.logger.means(), rate_name: self.throughput.rate}
            self.epoch += 1
            self.batch_in_epoch = 0
            if log_epochs:
                self.record(stats, split="train", step=self.epoch)
            if on_epoch is not None:
                on_epoch(self.epoch, stats)

    def log_curve(self) -> None:
        """One point of the step curves (split ``train-step``, step = optimiser steps): the means since the last point
        of the loss and its diagnostics, the learning rate, ``curve_rate`` (examples per second), the gradient norm
        of the interval's last step and, on CUDA, the peak memory; read values only (called after :meth:`flush`)."""
        if (self.run is None and not self.trackers) or not self._curve_n:
            return
        now = time.perf_counter()
        point = {k: v / self._curve_n for k, v in self._curve.items() if k != "grad_norm"}
        point["lr"] = float(self.optimizer.param_groups[0]["lr"])
        point[self.curve_rate] = self._curve_items / max(now - self._curve_t0, 1e-9)
        if "grad_norm" in self._curve:
            point["grad_norm"] = self._curve["grad_norm"]
        if self.device.type == "cuda":
            point["gpu_mem_mb"] = torch.cuda.max_memory_allocated(self.device) / 2**20
        self.record(point, split="train-step", step=self.step)
        self._curve, self._curve_n, self._curve_items, self._curve_t0 = {}, 0, 0, now

    def record(self, metrics: dict[str, float], split: str | None, step: int | None) -> None:
        """Log ``metrics`` to the registry run and send the same point to every tracker, under its split: the
        trackers receive every point the registry holds (step points, epoch points, evaluations)."""
        if self.run is not None:
            self.run.log_many(metrics, split=split, step=step)
        for tracker in self.trackers:
            tracker.log(metrics, self.step if step is None else step, split)

    def _done(self, max_steps: int | None) -> bool:
        return max_steps is not None and self.step >= max_steps

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, config: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The one checkpoint layout (tensors and plain data only: read back with ``weights_only``)."""
        return {"layout": LAYOUT, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
                "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "rng": rng_state(), "generators": {k: g.get_state() for k, g in self.generators.items()},
                "config": config, "extra": extra or {},
                "run_id": getattr(self.run, "id", None),  # the registry row a resumed run continues ...
                "saved_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}  # ... from its metrics of then

    def _random_state(self) -> dict[str, Any]:
        return {"rng": rng_state(), "generators": {k: g.get_state() for k, g in self.generators.items()}}

    def save(self, path: str | Path, config: dict[str, Any], extra: dict[str, Any] | None = None) -> Path | None:
        """Write the checkpoint atomically. Under torch.distributed this is a collective: call it on every
        rank. Each rank's random states (its dropout and augmentation streams differ) are gathered into
        ``rank_rng`` and the main rank writes the file (the others return None). Only at an
        optimiser-step boundary: a half-accumulated gradient is not part of the state."""
        if self._micro % self.accumulate:
            raise RuntimeError("a checkpoint is written between optimiser steps only (gradient accumulation in progress)")
        self.flush()  # never a checkpoint after a non-finite loss
        ranks = [self._random_state()]
        if sd.is_distributed():
            import torch.distributed as dist

            ranks = [None] * sd.world_size()  # type: ignore[list-item]
            dist.all_gather_object(ranks, self._random_state())
        if not sd.is_main():
            return None
        return save_checkpoint(path, {**self.state_dict(config, extra), "rank_rng": ranks})

    def load(self, path: str | Path, config: dict[str, Any], ignore: tuple[str, ...] = ()) -> dict[str, Any]:
        """Resume from ``path`` (refused with :class:`suite.train.ConfigMismatchError` naming the
        differing keys when it records another experiment); returns the front-end's ``extra``."""
        state = load_checkpoint(path, map_location=self.device)
        layout = state.get("layout")
        if isinstance(layout, int) and not isinstance(layout, bool) and layout > LAYOUT:  # before its config is compared
            raise ValueError(f"checkpoint {path} was written by a newer version of the suite (layout {layout}; this "
                             f"version reads layout {LAYOUT}): update the suite to resume it, or give another output "
                             "folder; the checkpoint is left as it is")
        check_resume_config(path, state.get("config"), config, ignore)
        if layout != LAYOUT:
            raise ValueError(f"checkpoint {path} has layout {layout!r}, this engine writes {LAYOUT}; "
                             f"it was written by an older version: start a new output folder")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler.is_enabled() and state["scaler"] is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.step, self.epoch, self.batch_in_epoch = int(state["step"]), int(state["epoch"]), int(state["batch_in_epoch"])
        mine = {"rng": state["rng"], "generators": state["generators"]}  # checkpoints before rank_rng: the main rank's
        if "rank_rng" in state:
            if len(state["rank_rng"]) != sd.world_size():
                raise ValueError(
                    f"checkpoint {path} was written by {len(state['rank_rng'])} process(es) and is resumed by "
                    f"{sd.world_size()}: each rank's batches and random streams depend on the number of processes; "
                    f"resume with {len(state['rank_rng'])} (torchrun --nproc_per_node {len(state['rank_rng'])}) "
                    f"or start a new output folder")
            mine = state["rank_rng"][sd.rank()]
        missing = set(self.generators) - set(mine["generators"])
        if missing:
            raise ValueError(f"checkpoint {path} lacks the random generator(s) {sorted(missing)}")
        for k, g in self.generators.items():
            g.set_state(mine["generators"][k])
        set_rng_state(mine["rng"])
        self.resume_run_id = state.get("run_id")
        self.resume_saved_at = state.get("saved_at")
        return dict(state["extra"])


def resumable(registry: Any, run_id: str | None) -> str | None:
    """``run_id`` if ``registry`` holds that run (a resumed run continues its row), else None (a new row:
    the checkpoint came from another registry, or the row is gone)."""
    if run_id is None:
        return None
    try:
        return run_id if registry.get(run_id)["id"] == run_id else None
    except KeyError:
        return None


__all__ = ["CachedStep", "Engine", "LOG_EVERY", "NonFiniteLossError", "grad_cache_embeddings", "resumable"]
