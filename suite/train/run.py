"""One owner for everything a run is: ``run(task, cfg)``.

A front-end supplies a :class:`Task` (:mod:`suite.train.task`, with what it sees and gets back): what to build
(model, optimiser, batches, the step), how to evaluate the trained model (and which metric is the headline), and what
to export. Everything else is decided here, once:

* **seeds**: :func:`derive_seed` is the one derivation, from ``(seed, rank, epoch, stream)``; the process is seeded
  with stream ``"main"`` of its rank, and a task asks :meth:`RunContext.generator` for a named stream (its
  augmentations, its data order), which the checkpoints save and a resume restores;
* **device**: :func:`suite.train.resolve_device` on ``cfg.device`` (threads are the launcher's: ``OMP_NUM_THREADS``);
* **the run's record**: the config is resolved once into a frozen :class:`suite.train.folders.RunRecord` (experiment
  config, its hash, folder, the identities of its inputs, its run options, what an earlier layout left), which
  everything below reads: folders, reuse, checkpoints, resume, trackers, the registry row and the export's record take
  the record, never the config (the task's own methods still take its config);
* **the output folder**: ``cfg.out``, or ``<runs root>/<task>/<stem>-<experiment hash>``, the hash of the config less
  its run options (:class:`suite.config.RunOptions`: device, output folder, checkpoint interval, ...; the class's
  ``RUN_OPTIONS``): changing one of those resumes the same run, changing anything else starts a new one;
* **checkpoints**: :class:`Checkpoints`, one layout (the engine's) and one name, ``checkpoints/step-<step>.pt``,
  written every ``cfg.checkpoint_every`` epochs and at the end, pruned to the newest ``cfg.keep_checkpoints``;
* **resume**: the newest checkpoint of the folder, refused when it records another experiment config
  (:class:`suite.train.ConfigMismatchError` naming the keys); without one, a checkpoint an earlier layout left, which
  :func:`suite.train.legacy.earlier_layout` finds from the task's declaration :attr:`Task.earlier`;
* **one writer per folder**: the run holds an exclusive lock on ``<folder>/.lock`` (``fcntl.flock``, which the kernel
  drops when the process ends, even by SIGKILL: a crash never blocks the next run) from before it reads a checkpoint
  until its registry row is closed; a second process on the same folder is refused at once with one line naming the
  folder and the pid that holds it (:class:`FolderBusyError`);
* **checks before work**: :func:`check_run_options` (the output folder is not a file, ``keep_checkpoints`` and
  ``checkpoint_every`` are integers >= 0, the seed is valid, the device is one this machine has), before anything is
  built; a front-end that reuses finished runs calls it before it looks one up;
* **interruption**: Ctrl-C or SIGTERM (turned into ``KeyboardInterrupt`` while the run goes) ends the run; the
  exception carries ``run_folder``, where the run resumes, and ``suite`` prints that as one line (exit 130);
* **the registry row**: opened (or the interrupted run's row continued), its headline set with ``set_primary``,
  training stats logged while it runs, the evaluation logged, finished / interrupted / failed; ``registry`` is one
  word for every entry function: None the default registry (``$SUITE_REGISTRY``; none when ``cfg.registry`` is
  false), False no row, or a :class:`suite.registry.Registry`;
* **reuse**: with ``reuse=True`` a finished row of the same setting (:func:`row_hash`) is looked up while the folder is
  held, and returned instead of a new run (:attr:`RunResult.reused`): two identical commands started together never
  both train; a row whose input has other files now is not reused (below);
* **inputs**: the exported models a config names (an encoder to fine-tune, a model to evaluate) are recorded with the
  row (run options ``inputs``: folder, the run that made it, a digest of its files; :mod:`suite.inputs`) and with every
  checkpoint; a checkpoint trained from other files of an input than those there now is not resumed but removed, with
  one line saying so, and the run starts from the beginning;
* **progress**: the engine's bar (``SUITE_NO_PROGRESS=1`` turns it off);
* **export**: ``<folder>/export``, written by the module's ``save_pretrained`` or
  :func:`suite.pretrained.save_pretrained` (safetensors weights + ``config.json``), the model card (``README.md``) and ``run.json`` (task, loss, seed, registry
  run, experiment config), loadable by ``from_pretrained`` of the task's module class.

Config fields the owner reads (each optional but ``seed``): ``seed``, ``device`` ("auto"), ``out`` (""), ``resume``
(True), ``checkpoint_every`` (1, epochs; 0: only at the end), ``keep_checkpoints`` (2; 0 removes them when the run
has finished), ``registry`` (True), ``log_to`` and ``mlflow_uri`` (""): the fields of :class:`suite.config.RunOptions`,
which a front-end's config inherits (a config that does not may declare its ``RUN_OPTIONS`` itself, as the test's
does).

Example (a whole front-end; the test suite has it as ``tests/suite/test_run_owner.py``)::

    @dataclass
    class ToyConfig:
        RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every")
        lr: float = 0.1
        epochs: int = 3
        seed: int = 0
        out: str = ""
        device: str = "auto"
        checkpoint_every: int = 1

    class Toy(Task[ToyConfig]):
        modality, name, primary = "toy", "toy-infonce", ("alignment", "test")

        def build(self, cfg, ctx):
            x = torch.randn(64, 8, generator=ctx.generator("data"))
            model, loss = nn.Linear(8, 4), build_loss("infonce")
            return Training(model, torch.optim.SGD(model.parameters(), lr=cfg.lr),
                            batches=lambda epoch: ctx.epoch_batches(64, 16, epoch),
                            step=lambda idx: loss(model(x[idx]), model(x[idx] + 0.1)), epochs=cfg.epochs, loss=loss)

        def evaluate(self, cfg, ctx, training):
            return {"alignment": ...}

    result = run(Toy(), ToyConfig(lr=0.05))   # seeded, checkpointed, resumable, recorded, exported
"""
from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from suite import distributed as sd
from suite.inputs import changed_inputs, data_changes, recorded_data
from suite.faults import OutOfMemory, oom_memory
from suite.train.device import check_device_precision, resolve_device
from suite.train.engine import Engine, resumable
from suite.train.folders import (CHECKPOINTS, EXPORT, LOCK, PROVENANCE, RUNS_ROOT, Checkpoints, FolderBusyError,
                                  RunRecord, check_run_options, hold_folder, locate_run, resolve_run, run_folder,
                                  runs_root)
from suite.train.checkpoint import ConfigMismatchError
from suite.train.legacy import Earlier, earlier_layout, remove_when_built, upgrade_entries
from suite.train.seeding import derive_seed, seed_everything, seeded_generator
from suite.train.task import C, RunContext, RunResult, Task, Training

# a run of one process also saves a checkpoint once this long has passed since the last (a step's end): the first
# comes within minutes of work, not at an epoch's end or step 125 (issue 80); 0 in the environment turns it off
SAVE_EVERY_S = float(os.environ.get("SUITE_CHECKPOINT_SECONDS", "300"))


# ----------------------------------------------------------------------------- the owner

def run(task: Task[C], cfg: C, *, registry: Any = None, cfg_hash: str | None = None,
        stop_after: int | None = None, reuse: bool = False) -> RunResult:
    """Build, train (or resume), evaluate, record and export one run of ``task`` with ``cfg`` (see the module
    docstring). ``registry``: a :class:`suite.registry.Registry` (default: ``$SUITE_REGISTRY`` when
    ``cfg.registry`` is true; ``False``: no row); ``cfg_hash`` the hash the row is recorded under (default: the
    runner's job hash or the recorded config's; with ``reuse`` :func:`row_hash`); ``stop_after`` ends this call
    after that many epochs, as an interruption would (tests); ``reuse``: a finished row of the setting is returned
    instead of a new run (every rank reads it, so all agree)."""
    check_run_options(cfg)  # before anything is built, read, reused or written
    sd.init_from_env()
    stem = task.stem(cfg)
    folder, experiment = locate_run(cfg, task.name or task.modality, stem)
    # the main rank holds the folder (every rank shares it; only the main rank writes) until the row is closed
    from suite.registry.store import _sigterm_as_interrupt

    with hold_folder(folder) if sd.is_main() else _nothing(folder):
        # the config's identity and run options, once: what is below takes the record, never the config
        # (with the identity of the data it reads, which decides reuse and resume)
        record = resolve_run(cfg, folder=folder, experiment=experiment, stem=stem,
                             keep=task.keep_checkpoints(cfg), earlier=task.earlier, data=task.data_inputs(cfg))
        if reuse:
            cfg_hash = row_hash(record, cfg_hash)
            found = _finished(task, open_registry(record, registry, every_rank=True), cfg_hash, record)
            if found is not None:
                return found
        restore = _sigterm_as_interrupt()  # SIGTERM while building or training ends the run like Ctrl-C
        try:
            with sd.watch_ranks():  # under torchrun: a rank that fails is named in one line on every other (issue 79)
                return _run(task, cfg, record, registry, cfg_hash, stop_after)
        except KeyboardInterrupt as exc:  # the same exception, told where the run resumes (suite's one line says it)
            if getattr(exc, "run_folder", None) is None:
                exc.run_folder = folder  # type: ignore[attr-defined]
                exc.run_checkpoint = Checkpoints(folder / CHECKPOINTS).latest()  # type: ignore[attr-defined]
            raise
        finally:
            restore()


@contextmanager
def _nothing(folder: Path) -> Iterator[Path]:
    yield folder


def open_registry(record: RunRecord, registry: Any = None, every_rank: bool = False) -> Any:
    """The registry a run records in (the one meaning of ``registry`` for every entry function): None the default
    (:class:`suite.registry.Registry`, ``$SUITE_REGISTRY``), False none, else ``registry`` itself; none when the
    run's ``record.registry`` is false, and none off the main rank unless ``every_rank`` (a lookup all ranks must agree
    on)."""
    if registry is False or not record.registry or not (every_rank or sd.is_main()):
        return None
    if registry is not None:
        return registry
    from suite.registry import Registry

    return Registry()


def row_hash(record: RunRecord, cfg_hash: str | None = None) -> str:
    """The hash a run's row is found and recorded under: ``cfg_hash``, else the runner's job hash
    (``$SUITE_CONFIG_HASH``), else the hash of the run's experiment config (:attr:`RunRecord.hash`)."""
    return cfg_hash or os.environ.get("SUITE_CONFIG_HASH") or record.hash


INPUTS = "_inputs"  # a checkpoint's config entry: {field: files digest} of the exported models the run reads


def _other_inputs(path: Path, inputs: dict[str, str]) -> list[str]:
    """The fields whose exported model had other files when the checkpoint at ``path`` was written (a checkpoint
    from before inputs were recorded, or an input not there now: nothing to compare)."""
    from suite.train.checkpoint import load_checkpoint

    if not inputs:  # nothing to compare (and a damaged checkpoint is named where it is resumed)
        return []
    try:
        was = (load_checkpoint(path).get("config") or {}).get(INPUTS)
    except (ValueError, OSError, RuntimeError):  # damaged: named, with the checkpoint before it, where it is resumed
        return []
    if not isinstance(was, dict):
        return []
    return sorted(k for k in was.keys() & inputs.keys() if was[k] != inputs[k])


def _finished(task: Task[C], reg: Any, cfg_hash: str, record: RunRecord) -> RunResult | None:
    """The finished row of ``cfg_hash`` as a result (its evaluation split's final metrics), or None; None too where an
    exported model the row recorded reading (``inputs``) has other files now, or the data it read (``data``) is other
    data now (said in one line: ``data changed: MUTAG_graph_labels.txt``): the run is made again, and the newer row is
    the one tables show."""
    prev = reg.find_finished(cfg_hash) if reg is not None else None
    if prev is None or changed_inputs(prev, record.inputs):
        return None
    if changed := data_changes(recorded_data(prev) or {}, record.data):
        if sd.is_main():
            print(f"[{task.name or task.modality}] finished run {prev['id'][:10]} not reused, data changed: "
                  f"{', '.join(changed)}; the run is made again", flush=True)
        return None
    final = reg.final_metrics(prev["id"])
    metrics = {name: v for (name, split), v in final.items() if split == task.eval_split}
    recorded = {f"{split}/{name}": v for (name, split), v in final.items()}
    return RunResult(record.folder, prev["id"], metrics, 0, 0, 0, 0.0, None, reused=prev["id"], recorded=recorded)


def _run(task: Task[C], cfg: C, record: RunRecord, registry: Any, cfg_hash: str | None,
         stop_after: int | None) -> RunResult:
    from suite.train.trackers import end_status, open_trackers, parse

    folder = record.folder

    # a missing package: one line, before anything is built
    trackers = parse(record.log_to, record.mlflow_uri)
    seed, every = record.seed, record.checkpoint_every
    device = resolve_device(record.device)
    check_device_precision(device, record.precision)
    seed_everything(seed, rank=sd.rank())
    ctx: RunContext[C] = RunContext(cfg, device, folder, seed, moved=record.earlier.files)
    reg = open_registry(record, registry)  # a damaged or locked registry is said before any data is read or model built
    training = task.build(cfg, ctx)
    engine: Engine[Any] = Engine(training.model, training.optimizer, device=device, scheduler=training.scheduler,
                                 precision=training.precision, grad_clip=training.grad_clip, loss=training.loss,
                                 generators=ctx.generators, desc=task.name or "train", unit=training.unit,
                                 log_every=training.log_every, compile=training.compile)
    ctx.engine = engine
    experiment = record.experiment
    inputs = {k: v["files"] for k, v in record.inputs.items()}
    # a checkpoint of other data is not resumed
    inputs.update({f"data:{k}": v["digest"] for k, v in record.data.items()})
    checked = {**experiment, INPUTS: inputs} if inputs else experiment  # what a checkpoint records, and resume checks
    ckpts = Checkpoints(folder / CHECKPOINTS, record.keep_checkpoints, record.earlier.checkpoints)
    last = ckpts.latest() if record.resume else None
    if last is not None and (other := _other_inputs(last, inputs)):
        sd.barrier()  # every rank has read it before the main rank removes it
        if sd.is_main():
            gone = ckpts.prune(0)
            print(f"{folder}: its checkpoints were trained from other files of {', '.join(other)} than those there "
                  f"now; {len(gone)} removed, the run starts from the beginning", flush=True)
        last = None
    if last is not None:
        try:
            state = engine.load(last, experiment, ignore=(*record.options, INPUTS))
        except ValueError as exc:  # a damaged or foreign checkpoint is left as it is; an earlier one is named
            if isinstance(exc, ConfigMismatchError) or "newer version" in str(exc):
                raise
            earlier = [c for c in ckpts.all() if c != last]
            if not earlier:
                raise
            raise ValueError(f"{exc}; nothing was changed: move it out of {last.parent} to resume from the checkpoint "
                             f"before it, {earlier[-1].name}") from None
        task.restore(cfg, ctx, training, state)
        if sd.is_main():  # a resume is said, not silent (issue 80)
            print(f"resuming the run in {folder} from its checkpoint {last.name} (epoch {engine.epoch}, step "
                  f"{engine.step})", flush=True)
    resumed_from = engine.epoch
    epochs = training.epochs if stop_after is None or training.epochs is None else min(training.epochs,
                                                                                         engine.epoch + stop_after)
    t0 = time.perf_counter()
    metrics: dict[str, float] = {}
    export: Path | None = None

    saved_at = [time.perf_counter()]

    def save() -> None:  # every rank: a collective
        ckpts.save(engine, checked, task.state(cfg, ctx, training))
        saved_at[0] = time.perf_counter()

    ctx._save = save
    with ExitStack() as stack:
        if reg is not None:
            ctx.run = stack.enter_context(_open_row(reg, task, cfg, record, training.loss,
                                                    task.record(cfg, experiment, training),
                                                    {"folder": str(folder), **_processes(),
                                                     **({"data": record.data} if record.data else {})},
                                                    resumable(reg, engine.resume_run_id), cfg_hash))
            # resumed: the step curves continue from the checkpoint's step, and what else the interrupted process
            # logged after the checkpoint is logged again, not twice
            if engine.step > 0 and hasattr(reg, "drop_metrics"):
                reg.drop_metrics(ctx.run.id, "train-step", engine.step)
                if engine.resume_saved_at and hasattr(reg, "drop_metrics_since"):
                    reg.drop_metrics_since(ctx.run.id, engine.resume_saved_at, but="train-step")
        engine.run = ctx.run
        if trackers and sd.is_main():  # named by the run, with its config, code version and seed
            from suite.registry import code_version

            engine.trackers = open_trackers(trackers, folder, {"run_id": getattr(ctx.run, "id", None), "seed": seed,
                                                               "task": task.name or task.modality,
                                                               "code_version": code_version(), "config": experiment},
                                            {"mlflow_uri": record.mlflow_uri})
            for t in engine.trackers:  # closed with the run's end: finished, interrupted or failed
                stack.push(lambda exc_type, *_, t=t: t.close(end_status(exc_type)))
        if engine.step == 0:  # a fresh run (a resumed one logged its data when it started)
            ctx.log({**training.data_info, **{f"compiled_{k}": float(v) for k, v in engine.compiled.items()}},
                    split="data", step=0)  # with what the engine compiled (issue 78); step 0 in the registry and
            # in the trackers alike
        by_step = training.checkpoint_unit == "step"
        single = sd.world_size() == 1  # a save is a collective: under torchrun the ranks keep to the step rules

        def step_end() -> None:
            if training.on_step is not None:
                training.on_step()
            if (by_step and every and engine.step % every == 0) or (
                    training.checkpoint_steps and engine.step % training.checkpoint_steps == 0):
                save()
            elif every and single and SAVE_EVERY_S > 0 and time.perf_counter() - saved_at[0] > SAVE_EVERY_S:  # within minutes of work
                save()

        def epoch_end(epoch: int, stats: dict[str, float]) -> None:
            task.on_epoch(cfg, ctx, training, epoch, stats)
            if (not by_step and every and epoch % every == 0) or epoch == epochs:
                save()

        engine.fit(training.batches, training.step, epochs=epochs, max_steps=training.max_steps, size=training.size,
                   on_step=step_end, on_epoch=epoch_end, rate_name=training.rate_name, log_epochs=training.log_epochs,
                   collate=training.collate, workers=training.workers)
        if epochs is None:  # a run counted in steps: its last checkpoint
            save()
        if stop_after is not None and training.epochs is not None and engine.epoch < training.epochs:
            raise KeyboardInterrupt(f"stopped after {stop_after} epoch(s) (stop_after)")
        if sd.is_main():
            try:
                metrics = task.evaluate(cfg, ctx, training)
            except torch.cuda.OutOfMemoryError as exc:  # the trained model is in the last checkpoint: one line
                last_ckpt = ckpts.latest()
                raise OutOfMemory(
                    f"GPU out of memory in the evaluation after training ({oom_memory(exc)}); the trained model is kept "
                    f"in {last_ckpt or folder}: give a smaller evaluation batch (--eval-batch-size where the command "
                    "has it) and run the same command again, which evaluates without training again") from None
            ctx.log(metrics, split=task.eval_split, step=engine.step if by_step else engine.epoch)
            module = task.export_module(cfg, training)
            if module is not None:
                export = _export(task, cfg, record, ctx, training, module, folder / EXPORT, metrics)
                for t in engine.trackers:
                    t.artifact(export)
        if record.keep_checkpoints == 0 and sd.is_main():
            ckpts.prune(0)
        if sd.is_main():
            remove_when_built(task.earlier, folder)
    return RunResult(folder, getattr(ctx.run, "id", None), metrics, engine.epoch, engine.step, resumed_from,
                     time.perf_counter() - t0, export)


def newest_checkpoint(folder: str | Path, earlier: Earlier = Earlier()) -> Path | None:
    """The newest checkpoint of a run folder: today's layout, else one an earlier layout (``earlier``) left."""
    folder = Path(folder)
    return Checkpoints(folder / CHECKPOINTS, earlier=earlier_layout(earlier, folder).checkpoints).latest()


def read_checkpoint(path: str | Path, earlier: Earlier = Earlier()) -> dict[str, Any]:
    """A checkpoint file read as data (:func:`suite.train.load_checkpoint`), its entries under today's names."""
    from suite.train.checkpoint import load_checkpoint

    return upgrade_entries(earlier, load_checkpoint(path))


def evaluation(task: Task[C], cfg: C, *, registry: Any = None, loss: Any = None, folder: str | Path = "",
               step: int | None = None, cfg_hash: str | None = None) -> RunResult:
    """A run that only evaluates (a checkpoint, a start model): seeded and on ``cfg.device`` like :func:`run`, its
    metrics from ``task.evaluate(cfg, ctx, None)``, recorded as a registry row of its own by the same rule (task,
    dataset, ``loss``'s name and hyper-parameters, :meth:`Task.record` of the experiment config, run options, the
    headline; ``registry`` False: no row) and logged at ``step``."""
    record = resolve_run(cfg, folder=folder, inputs=registry is not False)  # the inputs: recorded with a row only
    derive_seed(record.seed)
    device = resolve_device(record.device)
    seed_everything(record.seed, rank=sd.rank())
    ctx: RunContext[C] = RunContext(cfg, device, Path(folder), record.seed)
    reg = open_registry(record, registry)
    t0 = time.perf_counter()
    with ExitStack() as stack:
        if reg is not None:
            ctx.run = stack.enter_context(_open_row(reg, task, cfg, record, loss,
                                                    task.record(cfg, record.experiment, None),
                                                    {"folder": str(folder)} if folder else {}, None, cfg_hash))
        metrics = task.evaluate(cfg, ctx, None)  # type: ignore[arg-type]
        ctx.log(metrics, split=task.eval_split, step=step)
    return RunResult(Path(folder), getattr(ctx.run, "id", None), metrics, 0, 0, 0, time.perf_counter() - t0, None)


def _processes() -> dict[str, int]:
    """The run's processes where it has several (torchrun, srun): recorded beside the other run options."""
    return {"processes": sd.world_size()} if sd.is_distributed() else {}


@contextmanager
def _open_row(reg: Any, task: Task[C], cfg: C, record: RunRecord, loss: Any, config: dict[str, Any],
              options: dict[str, Any], resume_id: str | None, cfg_hash: str | None) -> Iterator[Any]:
    """The registry row of a run, its headline set; finished / interrupted / failed on exit. Its run options are the
    record's, with the exported models it reads (:attr:`suite.train.folders.RunRecord.inputs`), ``options`` and the
    task's :meth:`Task.run_info`; ``cfg`` is the task's (its dataset, loss name and run info)."""
    if record.inputs:
        options = {**options, "inputs": record.inputs}
    with reg.run(resume_id=resume_id, modality=task.modality, task=task.name, dataset=task.dataset(cfg),
                 loss=task.loss_name(cfg), loss_hparams=loss.hparams() if hasattr(loss, "hparams") else {},
                 config=config, run_options={**record.option_values, **options, **task.run_info(cfg)},
                 seed=record.seed, cfg_hash=cfg_hash) as row:
        if task.primary is not None:
            row.set_primary(*task.primary)
        yield row


def _export(task: Task[C], cfg: C, record: RunRecord, ctx: RunContext[C], training: Training, module: nn.Module,
            path: Path, metrics: dict[str, float]) -> Path:
    from suite.model_card import registry_metrics
    from suite.registry import code_version
    from suite.safeio import write_atomic

    task.export(cfg, ctx, training, module, path)
    loss = training.loss
    provenance = {"modality": task.modality, "task": task.name, "dataset": task.dataset(cfg),
                  "loss": task.loss_name(cfg), "loss_hparams": loss.hparams() if hasattr(loss, "hparams") else {}, "seed": record.seed,
                  "run_id": getattr(ctx.run, "id", None), "code_version": code_version(),
                  "epochs": ctx.engine.epoch if ctx.engine else None, "steps": ctx.engine.step if ctx.engine else None, "config": record.experiment,
                  "metrics": {**registry_metrics(ctx.run), **{f"{task.eval_split}/{k}": v for k, v in metrics.items()}}}
    write_atomic(path / PROVENANCE, json.dumps(provenance, indent=1, sort_keys=True, default=str) + "\n",
                 what="run record")
    return path


__all__ = ["CHECKPOINTS", "Checkpoints", "EXPORT", "FolderBusyError", "LOCK", "PROVENANCE", "RUNS_ROOT", "RunContext",
           "RunRecord", "RunResult", "Task", "Training", "check_run_options", "derive_seed", "evaluation", "hold_folder",
           "newest_checkpoint", "open_registry", "read_checkpoint", "resolve_run", "row_hash", "run", "run_folder",
           "runs_root", "seeded_generator"]
