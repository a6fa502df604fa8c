"""A run's folder, as the run owner (:mod:`suite.train.run`) keeps it: the config resolved once into a
:class:`RunRecord` (its experiment config, hash, folder, inputs, data and run options: :func:`resolve_run`), where the
folder is (:func:`locate_run`, :func:`run_folder`), its checkpoints (:class:`Checkpoints`:
``checkpoints/step-<step>.pt``, the newest kept), its export (``export/`` with ``run.json``), the checks of the run
options every owner reads (:func:`check_run_options`), and its one writer at a time (:func:`hold_folder`: an exclusive
lock on ``.lock``)."""
from __future__ import annotations

import dataclasses
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from suite import distributed as sd
from suite.config import check_ranges, experiment_config, experiment_hash, run_option_values, run_options
from suite.inputs import data_identities, input_identities
from suite.registry import config_hash
from suite.train.engine import Engine
from suite.train.legacy import Earlier, Found, earlier_layout
from suite.train.seeding import derive_seed

RUNS_ROOT = "runs"  # the default runs root, relative to the working folder ($SUITE_RUNS overrides it)
CHECKPOINTS = "checkpoints"
EXPORT = "export"
PROVENANCE = "run.json"  # beside an export's weights: the task, loss, seed, registry run and experiment config
_CKPT = re.compile(r"step-(\d+)\.pt$")


# ----------------------------------------------------------------------------- the run's record, its folder

@dataclass(frozen=True)
class RunRecord:
    """A config resolved once by the run owner (:func:`resolve_run`) and handed down: what the run is (its experiment
    config, hash and inputs), where it is (its folder, what an earlier layout left for it) and how it goes (its run
    options, read once). The owner's machinery below it (reuse, checkpoints, resume, trackers, the registry row, the
    export's record) reads the record, never the config: nothing below it derives the config's identity again."""

    experiment: dict[str, Any]  # suite.config.experiment_config: what the row and a checkpoint record, a resume matches
    hash: str  # config_hash(experiment): the row's hash unless the runner gives its job's; the folder takes 8 characters
    folder: Path
    options: tuple[str, ...]  # the config's run options (suite.config.run_options): what a resume may change
    inputs: dict[str, dict[str, Any]]  # the exported models the config names (suite.inputs.input_identities)
    data: dict[str, dict[str, Any]] = field(default_factory=dict)  # the task's data (suite.inputs.data_identities)
    # how the run goes: the run options (suite.config.RunOptions), read once (a config without one: the default here)
    option_values: dict[str, Any] = field(default_factory=dict)  # suite.config.run_option_values: recorded with the row
    seed: int = 0
    device: str = "auto"  # as asked: suite.train.resolve_device picks it when the run starts
    precision: str = "fp32"  # what the device is checked for before anything is built ("bf16" where cfg.bf16 is true)
    resume: bool = True  # from the folder's newest checkpoint
    checkpoint_every: int = 1  # epochs (or steps, as the task counts them); 0: at the end only
    keep_checkpoints: int = 2  # the task's (Task.keep_checkpoints); 0: none once the run has finished
    registry: bool = True  # False: no registry row
    log_to: str = ""  # the trackers (suite.train.trackers.parse)
    mlflow_uri: str = ""
    earlier: Found = field(default_factory=Found)  # what an earlier layout of the task left for the run (resumable)


def locate_run(cfg: Any, task: str, stem: str = "") -> tuple[Path, dict[str, Any] | None]:
    """The run's folder, found before it is held: ``cfg.out``, else :func:`run_folder` named by the experiment's hash,
    whose experiment config is returned too (None with ``out``: :func:`resolve_run` derives it under the folder's lock,
    so a folder another process holds is refused before the config is read further)."""
    out = getattr(cfg, "out", "") or ""
    if out:
        return _out_folder(out), None
    experiment = experiment_config(cfg)
    return _default_folder(task, stem, config_hash(experiment)[:8]), experiment


def resolve_run(cfg: Any, task: str = "", stem: str = "", folder: str | Path | None = None,
                experiment: dict[str, Any] | None = None, *, keep: int | None = None, earlier: Earlier | None = None,
                data: dict[str, str | Path | list[str]] | None = None, inputs: bool = True) -> RunRecord:
    """The :class:`RunRecord` of ``cfg``, in one pass: its experiment config (``experiment`` where :func:`locate_run`
    made it), hash and run options; its folder (``folder`` as given, e.g. an evaluation's or the one
    :func:`locate_run` found; else :func:`locate_run` of ``task`` and ``stem``); what the task's earlier layouts
    (``earlier``) left for it, in the folder and by ``stem`` (call it while the folder is held); the identities of its
    inputs (less the run's own folder; none with ``inputs`` false) and of the data the task reads (``data``:
    :meth:`suite.train.task.Task.data_inputs`). ``keep``: the task's checkpoints kept (default
    ``cfg.keep_checkpoints``, else 2)."""
    if folder is None:
        folder, experiment = locate_run(cfg, task, stem)
    experiment = experiment_config(cfg) if experiment is None else experiment
    every = getattr(cfg, "checkpoint_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"checkpoint_every must be an integer >= 0 (0: at the end only), got {every!r}")
    keep = getattr(cfg, "keep_checkpoints", 2) if keep is None else keep
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ValueError(f"keep_checkpoints must be an integer >= 0, got {keep!r}")
    options, values = run_options(cfg), run_option_values(cfg)
    found = Found() if earlier is None else earlier_layout(earlier, Path(folder), cfg=cfg, stem=stem)
    own = Path(folder) if folder else None
    return RunRecord(
        experiment, config_hash(experiment), Path(folder), options,
        input_identities(cfg, own=own) if inputs else {}, data_identities(data or {}), values,
        seed=getattr(cfg, "seed", 0), device=getattr(cfg, "device", "auto"),
        precision="bf16" if getattr(cfg, "bf16", False) is True else getattr(cfg, "precision", "fp32"),
        resume=getattr(cfg, "resume", True), checkpoint_every=every, keep_checkpoints=keep,
        registry=getattr(cfg, "registry", True), log_to=getattr(cfg, "log_to", ""),
        mlflow_uri=getattr(cfg, "mlflow_uri", ""), earlier=found)


def run_folder(cfg: Any, task: str, stem: str = "", digest: str | None = None) -> Path:
    """``cfg.out`` (``models:NAME`` allowed), else ``<runs root>/<task>/<stem>-<experiment hash>`` (:func:`runs_root`:
    ``$SUITE_RUNS`` or ``runs/``; ``digest``: the hash where the caller has it, :attr:`RunRecord.hash`'s first 8
    characters): the hash leaves out the config's run options, so a restart with another device or checkpoint interval
    finds its folder."""
    out = getattr(cfg, "out", "") or ""
    if out:
        return _out_folder(out)
    return _default_folder(task, stem, digest or experiment_hash(cfg))


def _out_folder(out: str) -> Path:
    from suite.paths import resolve_model_path

    return resolve_model_path(out)


def _default_folder(task: str, stem: str, digest: str) -> Path:
    name = f"{stem}-{digest}" if stem else digest
    return runs_root() / task / re.sub(r"[^A-Za-z0-9._=-]+", "_", name)


def runs_root() -> Path:
    """Where runs without ``out`` go: ``$SUITE_RUNS``, else ``runs/`` in the working folder."""
    return Path(os.environ.get("SUITE_RUNS") or RUNS_ROOT)


class Checkpoints:
    """The checkpoints of one run: ``<folder>/step-<step>.pt`` in the engine's layout, the newest ``keep`` kept."""

    def __init__(self, folder: str | Path, keep: int = 2, earlier: Sequence[Path] = ()) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"keep_checkpoints must be an integer >= 0, got {keep!r}")
        self.folder, self.keep, self.earlier = Path(folder), keep, tuple(earlier)

    def all(self) -> list[Path]:
        """Every checkpoint of the run, oldest first (by step)."""
        if not self.folder.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if (m := _CKPT.search(p.name))]
        return [p for _, p in sorted(found)]

    def latest(self) -> Path | None:
        """The newest checkpoint; without one, the newest of ``earlier`` (a run started under an earlier layout,
        which the engine's format makes resumable)."""
        cks = self.all()
        if cks:
            return cks[-1]
        old = [p for p in self.earlier if p.is_file()]
        return max(old, key=lambda p: p.stat().st_mtime) if old else None

    def save(self, engine: Engine[Any], experiment: dict[str, Any], extra: dict[str, Any] | None = None) -> Path | None:
        """Write the engine's state at its step (a collective under torch.distributed), then prune."""
        path = engine.save(self.folder / f"step-{engine.step:09d}.pt", experiment, extra=extra)
        if sd.is_main():
            self.prune(max(self.keep, 1))
        return path

    def prune(self, keep: int | None = None) -> list[Path]:
        """Remove all but the newest ``keep`` (default: ``self.keep``) checkpoints; returns the removed ones."""
        keep = self.keep if keep is None else keep
        cks = self.all()
        gone = cks[: max(0, len(cks) - keep)]
        for p in gone:
            p.unlink(missing_ok=True)
        return gone


# ----------------------------------------------------------------------------- checks, the folder's lock

class FolderBusyError(ValueError):
    """Another process (or thread) holds the run folder: one writer at a time."""


LOCK = ".lock"
_HELD: dict[str, tuple[int, int, int]] = {}  # lock path -> (fd, owning thread, depth): this process's held folders
_HELD_GUARD = threading.Lock()


def check_run_options(cfg: Any) -> None:
    """The run options every run owner reads, checked before anything is built, read or reused (``ValueError``
    naming the option and the value): ``out`` must name a folder (or nothing yet) and no path under a regular file;
    ``keep_checkpoints`` and ``checkpoint_every`` integers >= 0; ``seed`` a valid seed; ``device`` one this machine has;
    every option in its range (:func:`suite.config.check_ranges`: no NaN, positive options > 0)."""
    derive_seed(getattr(cfg, "seed", 0))
    if dataclasses.is_dataclass(cfg):  # a config built in code: the ranges load_config checks of one read
        check_ranges(cfg)
    for name in ("keep_checkpoints", "checkpoint_every"):
        if hasattr(cfg, name):
            v = getattr(cfg, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
    device = getattr(cfg, "device", "auto")
    if device != "auto":  # "auto" needs no check (and must not touch CUDA before torchrun picks this rank's GPU)
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {device!r} asked for, but no CUDA GPU is available; use --device cpu or auto")
        if dev.type == "cuda":  # an index this machine has, and a CUDA that works
            from suite.train.device import check_cuda_device

            check_cuda_device(dev, device)
    out = getattr(cfg, "out", "") or ""
    if out:
        from suite.paths import resolve_model_path

        _check_folder_path(resolve_model_path(out), f"--out {out}")


def _check_folder_path(folder: Path, what: str) -> None:
    """``folder`` is a folder or can be made one: not a regular file, and no regular file on the way to it."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{what}: {folder} is a file, not a folder (the run folder holds checkpoints/ and export/)")
    for parent in folder.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{what}: {parent} is a file, so the run folder {folder} cannot be made")
            break


@contextmanager
def hold_folder(folder: str | Path) -> Iterator[Path]:
    """Hold ``folder`` as its only writer: an exclusive ``fcntl.flock`` on ``<folder>/.lock`` (pid written in it),
    released on exit, and by the kernel if the process dies. Re-entrant within one thread (a front-end that looks a
    finished run up under the lock, then runs it); another process or thread gets :class:`FolderBusyError` at once,
    naming the folder and the pid that holds it. Non-POSIX systems (no ``fcntl``) run without the lock."""
    folder = Path(folder)
    _check_folder_path(folder, "run folder")
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # made here: removed again if left empty
    folder.mkdir(parents=True, exist_ok=True)
    path = str((folder / LOCK).resolve())
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(path)
        if held is not None:
            fd, owner, depth = held
            if owner != me:
                raise FolderBusyError(f"run folder {folder} is in use by another thread of this process "
                                      f"(pid {os.getpid()}): one writer at a time")
            _HELD[path] = (fd, owner, depth + 1)
    if held is not None:
        try:
            yield folder
        finally:
            with _HELD_GUARD:
                fd, owner, depth = _HELD[path]
                _HELD[path] = (fd, owner, depth - 1)
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield folder
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise FolderBusyError(f"run folder {folder} is in use by another process (pid {pid}): one writer at a time; "
                              "wait for it to end or give another --out") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        with _HELD_GUARD:
            _HELD[path] = (fd, me, 1)
        try:
            yield folder
        finally:
            with _HELD_GUARD:
                _HELD.pop(path, None)
            if created and [p.name for p in folder.iterdir()] == [LOCK]:  # refused before writing anything: the
                os.unlink(path)  # folders this call made are removed (a refused command leaves nothing behind)
                for p in created:
                    try:
                        p.rmdir()
                    except OSError:
                        break
    finally:
        os.close(fd)  # closing the descriptor releases the flock
