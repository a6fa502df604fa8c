"""Trackers against the real tools (issue 51, item 5): a local MLflow tracking server (``mlflow server`` on a free port,
started here, skipped only where mlflow is absent) and MLflow's local stores receive a toy run's params, step metrics
and export folder, read back through ``MlflowClient``; a W&B offline run directory holds the metrics, read from its
``.wandb`` file as W&B's own protobuf records (skipped where wandb is absent)."""
from __future__ import annotations

import math
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from suite.registry import Registry
from suite.train.run import run
from tests.suite.test_curves import CurveConfig, CurveTask, _curve


@dataclass
class MlflowConfig(CurveConfig):
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every", "log_to", "mlflow_uri")
    log_to: str = "mlflow"
    mlflow_uri: str = ""


class ExportingTask(CurveTask):
    """The toy run, its trained model exported (``<run folder>/export``) as a front-end's is."""

    model_type = "toy_linear"

    def __init__(self, stop_at_step: int | None = None, on_step: Any = None) -> None:
        super().__init__(stop_at_step)
        self.hook = on_step

    def build(self, cfg: Any, ctx: Any) -> Any:
        training = super().build(cfg, ctx)
        if self.hook is not None:
            stop = training.on_step

            def on_step() -> None:
                self.hook(ctx.engine.step)
                stop()

            training.on_step = on_step
        return training


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_server(base: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``mlflow server`` on a SQLite store in ``base``, artifacts served from ``base/artifacts``, on a free port;
    yields (its URL, its process) once /health answers; its process group is killed after."""
    pytest.importorskip("mlflow")
    port = _free_port()
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1", "--backend-store-uri", f"sqlite:///{base / 'mlflow.db'}",
                             "--artifacts-destination", str(base / "artifacts")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start: {(base / 'server.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield url, proc
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End the server's process group (the server and its workers), SIGKILL after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as (url, _):
        yield url


def _check_run(uri: str, reg: Registry, run_id: str, *, steps: list[int]) -> Any:
    """The MLflow run named ``run_id`` (the only one) holds the registry's loss curve at ``steps``, the config, code
    version and seed as params, the export folder as an artifact, and ended FINISHED."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name == "toy-curves"]
    (got,) = client.search_runs([exp.experiment_id])
    assert got.info.run_name == run_id
    assert got.info.status == "FINISHED" and got.data.tags["suite.run_id"] == run_id
    params = got.data.params
    assert params["seed"] == "0" and params["lr"] == "0.05" and params["epochs"] == "2" and params["code_version"]
    assert "log_to" not in params and "out" not in params  # run options are not the run's config
    history = [(m.step, m.value) for m in client.get_metric_history(got.info.run_id, "train-step/loss")]
    assert sorted(s for s, _ in history) == steps
    want = dict(_curve(reg, run_id, "loss"))
    for step in set(steps):  # a step logged twice (before an interruption and after the resume): one is the registry's
        assert any(math.isclose(v, want[step], rel_tol=1e-6) for s, v in history if s == step), step
    assert {"train-step/tau", "train-step/lr", "train-step/items_per_s"} <= set(got.data.metrics)
    files = {f.path for f in client.list_artifacts(got.info.run_id, "export")}
    assert {"export/model.safetensors", "export/run.json"} <= files, files
    return got


@pytest.mark.slow  # a real MLflow server (about 24 s with its start): run by `make test-cluster`, which .ci/run runs
def test_mlflow_server_receives_params_metrics_and_export(server: str, tmp_path: Path) -> None:
    """--log-to mlflow --mlflow-uri http://... -> the server holds one run named by the registry's run id: params,
    the registry's loss points at their steps, the export folder as an artifact (through the server's proxy)"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    res = run(ExportingTask(), MlflowConfig(out=str(tmp_path / "run"), mlflow_uri=server), registry=reg)
    assert res.export is not None
    _check_run(server, reg, res.run_id, steps=[3, 6, 8])
    assert not (tmp_path / "run" / "mlflow").exists()  # nothing local beside the server


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_mlflow_local_store_in_the_run_folder(store: str, tmp_path: Path, monkeypatch: Any) -> None:
    """no --mlflow-uri -> a SQLite store in <run folder>/mlflow; --mlflow-uri file:... -> MLflow's file store (allowed
    by MLFLOW_ALLOW_FILE_STORE, as MLflow 3 asks); an interrupted and resumed run continues the same MLflow run"""
    pytest.importorskip("mlflow")
    folder = tmp_path / "run"
    if store == "sqlite":
        uri, given = f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}", ""
    else:
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = given = (tmp_path / "mlruns").as_uri()
    reg = Registry(str(tmp_path / "r.sqlite"))
    cfg = MlflowConfig(out=str(folder), mlflow_uri=given)
    with pytest.raises(KeyboardInterrupt):
        run(ExportingTask(stop_at_step=7), cfg, registry=reg)
    res = run(ExportingTask(), cfg, registry=reg)
    assert res.resumed_from == 1
    # the interrupted process's point at step 6 stays in MLflow's history (MLflow deletes no metric): twice, the
    # resumed one over steps 5-6 only (the checkpoint holds no open interval)
    _check_run(uri, reg, res.run_id, steps=[3, 6, 6, 8])


@pytest.mark.slow  # about 22 s (MLflow's capped retries): run by `make test-cluster`, which .ci/run runs
def test_a_server_gone_costs_a_warning_not_the_run(tmp_path: Path) -> None:
    """the tracking server is killed at step 5 -> one warning naming mlflow (after MLflow's retries, capped by the
    suite); the run finishes and its registry row holds the whole curve"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    (tmp_path / "srv").mkdir()
    with mlflow_server(tmp_path / "srv") as (url, proc):
        def kill_at_5(step: int) -> None:
            if step == 5:
                stop(proc)

        t0 = time.monotonic()
        with pytest.warns(UserWarning, match="tracker mlflow failed") as caught:
            res = run(ExportingTask(on_step=kill_at_5), MlflowConfig(out=str(tmp_path / "run"), mlflow_uri=url),
                      registry=reg)
        assert sum("tracker mlflow" in str(w.message) for w in caught) == 1
        assert time.monotonic() - t0 < 60
    assert reg.get(res.run_id)["status"] == "finished"
    assert [s for s, _ in _curve(reg, res.run_id, "loss")] == [3, 6, 8]


def test_an_mlflow_uri_without_mlflow_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mlflow_uri .* log_to does not name mlflow"):
        run(CurveTask(), MlflowConfig(out=str(tmp_path / "a"), log_to="", mlflow_uri="http://x"), registry=False)


@dataclass
class WandbConfig(CurveConfig):
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("out", "device", "checkpoint_every", "log_to")
    log_to: str = "wandb"


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` transaction log as W&B's protobuf ``Record`` objects. wandb 0.31 has no Python
    reader any more (its Go core reads them), so the framing is read here: a 7-byte header (``:W&B``, 0xBEE1, version
    0), then LevelDB log blocks of 32 KiB whose chunks carry a CRC-32, a length and a type (full, first, middle,
    last); a block's tail shorter than a chunk header is padding."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B" and struct.unpack("<HB", data[4:7]) == (0xBEE1, 0), data[:7]
    pos, block, parts = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # padding to the next block
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            break
        parts += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # full, last
            record = pb.Record()
            record.ParseFromString(parts)
            parts = b""
            yield record


def test_wandb_offline_run_holds_the_metrics(tmp_path: Path, monkeypatch: Any) -> None:
    """--log-to wandb -> an offline run in <run folder>/wandb (offline though WANDB_MODE says online), named by the
    registry's run id, its config with the seed and code version, the registry's loss points at their steps, the export
    folder as an artifact, exit 0"""
    pytest.importorskip("wandb", reason="wandb is not installed (the extra [wandb])")
    monkeypatch.setenv("WANDB_MODE", "online")
    reg = Registry(str(tmp_path / "r.sqlite"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(ExportingTask(), WandbConfig(out=str(tmp_path / "run")), registry=reg)
    assert not [w for w in caught if "tracker" in str(w.message)], [str(w.message) for w in caught]
    (log,) = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    history: dict[int, dict[str, float]] = {}
    config: dict[str, Any] = {}
    name, exit_code, artifacts = None, None, []
    for r in wandb_records(log):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            name = r.run.display_name
            config.update({i.key: i.value_json for i in r.run.config.update})
        elif kind == "config":
            config.update({i.key: i.value_json for i in r.config.update})
        elif kind == "history":
            items = {i.key or "/".join(i.nested_key): float(i.value_json) for i in r.history.item
                     if (i.key or "/".join(i.nested_key)).startswith("train-step/")}
            if items:  # the step curve's points (the run's data points, at step 0, hold no train-step key)
                history[int(r.history.step.num)] = items
        elif kind == "artifact":
            artifacts.append(r.artifact.type)
        elif kind == "exit":
            exit_code = r.exit.exit_code
    assert name == res.run_id and exit_code == 0 and artifacts == ["model"]  # the export folder, by reference
    assert config["seed"] == "0" and config["lr"] == "0.05" and "code_version" in config
    want = _curve(reg, res.run_id, "loss")
    assert sorted(history) == [s for s, _ in want] == [3, 6, 8]
    assert all(math.isclose(history[s]["train-step/loss"], v, rel_tol=1e-6) for s, v in want)
    assert "train-step/tau" in history[3]


def test_every_tracker_has_its_extra() -> None:
    """the extra a missing package's line names is declared in setup.cfg"""
    import configparser

    from suite.train.trackers import KNOWN

    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    extras = cfg["options.extras_require"]
    for module, extra in KNOWN.values():
        assert module in extras[extra].split(), (module, extra)
