"""Curves where researchers already look (issue 51): every point the registry logs (the engine's step-curve points,
:meth:`suite.train.Engine.log_curve`, split ``train-step``; each epoch's training stats, split ``train``; evaluations,
their split) sent on to the trackers a run names in ``log_to`` (``--log-to tensorboard,mlflow``), each metric under
``<split>/`` at the registry's step (issue 69: a 3-epoch run shows a 3-point ``train/loss`` curve).

* ``tensorboard``: event files in ``<run folder>/tensorboard`` (``tensorboard --logdir <run folder>``), one scalar per
  metric under its split (``train-step/``, ``train/``, ``test/``), the run's config and code version as text; the
  extra ``[tensorboard]``.
* ``mlflow``: one MLflow run named by the registry's run id (tag ``suite.run_id``; a resumed run continues it) in the
  experiment named by the task, its config (flattened), code version and seed as params, each point's metrics at
  their step under their split, the export folder as an artifact at the end and the run's end as its status. The
  store is ``--mlflow-uri`` (a tracking server ``http://host:port``, ``sqlite:///file.db``, ...), else a SQLite store
  in the run folder, ``<run folder>/mlflow/mlflow.db`` with artifacts beside it (MLflow 3 refuses a plain ``./mlruns``
  file store unless ``MLFLOW_ALLOW_FILE_STORE=true``; with it, ``--mlflow-uri file:///...`` works too). A server that
  stops answering costs at most MLflow's retries once: the suite sets ``MLFLOW_HTTP_REQUEST_MAX_RETRIES=2`` and
  ``MLFLOW_HTTP_REQUEST_TIMEOUT=30`` where they are not set (MLflow's defaults wait minutes). The extra ``[mlflow]``.
* ``wandb``: a Weights & Biases run, always offline (``WANDB_MODE=offline`` is forced: nothing is sent; ``wandb sync
  <run folder>/wandb/offline-run-*`` uploads it later) in ``<run folder>/wandb``, named by the run id, in the project
  named by the task, the run's config, code version and seed as its config, each step point at its step under
  ``train-step/``, epoch and evaluation points on their split's own axis (``train/step``), the export folder as a
  reference artifact (its files' checksums, not a copy), W&B's own system metrics (GPU use) beside them; a resumed
  run is a new offline run of the same name. The extra ``[wandb]``.

A tracker is an option, never a dependency: a missing package is one line naming the extra to install, before the run
builds anything; a tracker that fails while the run goes (disk full, a server gone) costs one warning and stops
itself, never the run or its registry row."""
from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Protocol

# tracker -> (its module, the extra that installs it)
KNOWN = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}


STEP_SPLIT = "train-step"  # the engine's step curves; epoch points are split ``train``, evaluations theirs


def tag(split: str | None, name: str) -> str:
    """A metric's name in a tracker: ``<split>/<name>``, as the registry holds it (``name`` without a split)."""
    return f"{split}/{name}" if split else name


class Tracker(Protocol):
    name: str

    def log(self, point: dict[str, float], step: int, split: str | None = STEP_SPLIT) -> None: ...

    def artifact(self, folder: Path) -> None: ...

    def close(self, status: str) -> None: ...


def parse(spec: str | None, mlflow_uri: str | None = None) -> list[str]:
    """The tracker names of ``spec`` (``"tensorboard,mlflow"``, comma-separated; empty: none), each checked: an unknown
    name, one whose package is missing, or an ``mlflow_uri`` without ``mlflow`` is a ``ValueError`` of one line."""
    names = list(dict.fromkeys(s.strip() for s in (spec or "").split(",") if s.strip()))
    for n in names:
        if n not in KNOWN:
            raise ValueError(f"log_to: unknown tracker {n!r}; choose from {', '.join(sorted(KNOWN))} (comma-separated)")
        module, extra = KNOWN[n]
        try:
            __import__(module)
        except ImportError:
            raise ValueError(f"log_to {n}: the package {module!r} is not installed; pip install "
                             f"'contrastive-suite[{extra}]'") from None
    if mlflow_uri and "mlflow" not in names:
        raise ValueError(f"mlflow_uri {mlflow_uri!r} is set but log_to does not name mlflow (--log-to mlflow)")
    return names


def _info_json(info: dict[str, Any]) -> str:
    return json.dumps(info, indent=1, sort_keys=True, default=str)


def flat_params(info: dict[str, Any]) -> dict[str, str]:
    """The run's config (nested keys joined by ``.``), code version and seed as tracker parameters (strings)."""
    out: dict[str, str] = {}

    def put(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                put(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

    put("", info.get("config") or {})
    for key in ("code_version", "seed", "run_id"):
        if info.get(key) is not None:
            put(key, info[key])
    return out


class TensorBoard:
    """Scalars in ``<folder>/tensorboard`` through ``torch.utils.tensorboard.SummaryWriter``; an event file removed
    while the run goes is an error at the next point (the writer would make a new file at its next flush, holding
    only the later points, and say nothing)."""

    name = "tensorboard"

    def __init__(self, folder: Path, info: dict[str, Any], options: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder / "tensorboard"))
        self.writer.add_text("run", "```\n" + _info_json(info) + "\n```", 0)

    def log(self, point: dict[str, float], step: int, split: str | None = STEP_SPLIT) -> None:
        # a removed event file (its folder cleaned while the run goes) takes writes without a word; said instead
        events = getattr(getattr(getattr(self.writer, "file_writer", None), "event_writer", None), "_file_name", None)
        if events and not os.path.exists(events):
            raise FileNotFoundError(f"its event file {events} was removed during the run")
        for k, v in point.items():
            self.writer.add_scalar(tag(split, k), v, step)

    def artifact(self, folder: Path) -> None:
        pass

    def close(self, status: str) -> None:
        self.writer.flush()
        self.writer.close()


class MLflow:
    """A run of an MLflow store (``options["mlflow_uri"]``, else ``<folder>/mlflow/mlflow.db``) through an
    ``MlflowClient`` of its own (no process-wide active run, no global tracking URI)."""

    name = "mlflow"
    STATUS = {"finished": "FINISHED", "interrupted": "KILLED"}  # anything else: FAILED
    PARAM_CHARS = 6000  # MLflow's limit on a param's value

    def __init__(self, folder: Path, info: dict[str, Any], options: dict[str, Any]) -> None:
        for var, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")):
            os.environ.setdefault(var, value)  # a server gone: seconds once, not MLflow's minutes
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = options.get("mlflow_uri") or ""
        local = folder.resolve() / "mlflow"
        if not uri:
            local.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{local / 'mlflow.db'}"
        self.client = MlflowClient(tracking_uri=uri)
        experiment = str(info.get("task") or "contrastive-suite")
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            try:
                exp_id = self.client.create_experiment(
                    experiment, artifact_location=None if options.get("mlflow_uri") else (local / "artifacts").as_uri())
            except MlflowException:  # another job of a grid created it first
                exp_id = self.client.get_experiment_by_name(experiment).experiment_id
        else:
            exp_id = found.experiment_id
        name = str(info.get("run_id") or folder.name)
        earlier = self.client.search_runs([exp_id], filter_string=f"tags.`suite.run_id` = '{name}'", max_results=1)
        if earlier:  # a resumed run continues its MLflow run (its params are there already)
            self.id = earlier[0].info.run_id
            self.client.update_run(self.id, status="RUNNING")
            have = earlier[0].data.params
        else:
            self.id = self.client.create_run(exp_id, run_name=name,
                                             tags={"suite.run_id": name, "suite.folder": str(folder)}).info.run_id
            have = {}
        params = [Param(k, v[:self.PARAM_CHARS]) for k, v in flat_params(info).items() if k not in have]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.id, params=params[i:i + 100])

    def log(self, point: dict[str, float], step: int, split: str | None = STEP_SPLIT) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.id, metrics=[Metric(tag(split, k), float(v), now, step) for k, v in point.items()])

    def artifact(self, folder: Path) -> None:
        self.client.log_artifacts(self.id, str(folder), artifact_path=folder.name)

    def close(self, status: str) -> None:
        self.client.set_terminated(self.id, self.STATUS.get(status, "FAILED"))


class WandB:
    """An offline W&B run in ``<folder>/wandb`` (``wandb.init`` with a run of its own: ``reinit="create_new"``)."""

    name = "wandb"

    def __init__(self, folder: Path, info: dict[str, Any], options: dict[str, Any]) -> None:
        os.environ["WANDB_MODE"] = "offline"  # forced: a run never sends anything while it trains
        import wandb

        self.name_ = str(info.get("run_id") or folder.name)
        self.axes: set[str | None] = set()  # the splits whose step axis is declared (define_metric)
        config = {**(info.get("config") or {}), **{k: info[k] for k in ("code_version", "seed", "run_id")
                                                   if info.get(k) is not None}}
        settings = wandb.Settings(mode="offline", console="off", disable_git=True, silent=True)
        self.run = wandb.init(dir=str(folder), project=str(info.get("task") or "contrastive-suite"), name=self.name_,
                              config=config, settings=settings, reinit="create_new")

    def log(self, point: dict[str, float], step: int, split: str | None = STEP_SPLIT) -> None:
        values = {tag(split, k): float(v) for k, v in point.items()}
        if split == STEP_SPLIT:  # W&B's own step axis is the optimiser step (it must only grow)
            self.run.log(values, step=step)
            return
        if split not in self.axes:  # an epoch or evaluation point: on its own axis, ``<split>/step``
            self.axes.add(split)
            self.run.define_metric(tag(split, "step"))
            self.run.define_metric(tag(split, "*"), step_metric=tag(split, "step"))
        self.run.log({**values, tag(split, "step"): step}, commit=False)

    def artifact(self, folder: Path) -> None:
        import wandb

        art = wandb.Artifact(f"{folder.name}-{self.name_}".replace("/", "-"), type="model")
        art.add_reference(folder.resolve().as_uri())
        self.run.log_artifact(art)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "finished" else 1)


class Guarded:
    """A tracker whose failure costs one warning and ends it; the run goes on."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker: Tracker | None = tracker

    def _do(self, what: str, *args: Any) -> None:
        if self.tracker is None:
            return
        try:
            getattr(self.tracker, what)(*args)
        except Exception as exc:  # noqa: BLE001 - a tracker never ends a run
            tracker, self.tracker = self.tracker, None
            warnings.warn(f"tracker {tracker.name} failed ({type(exc).__name__}: {exc}); it logs nothing more, "
                          f"the run and its registry row go on", stacklevel=2)
            if what != "close":  # let go of its files and connections; a second failure says nothing more
                with contextlib.suppress(Exception):
                    tracker.close("failed")

    def log(self, point: dict[str, float], step: int, split: str | None = STEP_SPLIT) -> None:
        self._do("log", point, step, split)

    def artifact(self, folder: Path) -> None:
        self._do("artifact", folder)

    def close(self, status: str = "finished") -> None:
        self._do("close", status)


MAKERS: dict[str, Any] = {"tensorboard": TensorBoard, "mlflow": MLflow, "wandb": WandB}


def open_trackers(names: list[str], folder: Path, info: dict[str, Any],
                  options: dict[str, Any] | None = None) -> list[Guarded]:
    """The trackers ``names`` for a run in ``folder`` (``info``: its id, task, config, code version and seed;
    ``options``: the run options trackers read, ``mlflow_uri``)."""
    out = []
    for n in names:
        try:
            out.append(Guarded(MAKERS[n](folder, info, options or {})))
        except Exception as exc:  # noqa: BLE001 - a tracker that cannot start is a warning, not the run's end
            warnings.warn(f"tracker {n} could not start ({type(exc).__name__}: {exc}); the run goes on without it",
                          stacklevel=2)
    return out


def end_status(exc_type: type[BaseException] | None) -> str:
    """The run's end as a tracker records it: finished, interrupted (Ctrl-C, SIGTERM) or failed."""
    if exc_type is None:
        return "finished"
    return "interrupted" if issubclass(exc_type, KeyboardInterrupt) else "failed"
