"""One entry point for the CLI and the benchmark: evaluate a saved model (or ``default``) on the
STS and/or transfer tasks and record the numbers in the registry.

    metrics = evaluate_model(EvalConfig(model="runs/simcse-unsup/macl-s0-1a2b3c4d", tasks="sts"))
STS metrics are Spearman x 100 (the papers' scale), transfer metrics accuracies in %.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from suite.registry import Registry
from suite.train.run import RunContext, Task, evaluation
from text.data import senteval_root, task_folder
from text.eval.encode import EncodeFn
from text.eval.sts import STS_TASKS, STSEvaluator
from text.eval.transfer import REGS, TransferEvaluator
from text.models.backbone import identity
from text.models.save import load_encoder

TRANSFER = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")


@dataclass
class EvalConfig:
    # not the evaluation setting: the model evaluated and its label name the row (recorded as the run's loss),
    # device and cache say how it runs
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("model", "label", "device", "cache")
    model: str = field(default="default", metadata={"help": "saved model folder, HF path, or 'default'"})
    tasks: Literal["sts", "transfer", "all"] = "sts"
    sts_tasks: list[str] = field(default_factory=lambda: list(STS_TASKS))
    transfer_tasks: list[str] = field(default_factory=lambda: list(TRANSFER))
    aggregation: Literal["all", "mean", "wmean"] = "all"
    pooling: str = field(default="auto", metadata={"help": "override the model's pooling (auto = as saved / ST config)"})
    batch_size: int = 128
    max_length: int = 512
    kfold: int = 10
    inner_kfold: int = 10
    cache: bool = True
    device: str = "auto"
    label: str = field(default="", metadata={"help": "loss / method name recorded in the registry (default: none)"})
    seed: int = 0


class SentEvalTask(Task[EvalConfig]):
    """A saved sentence model on the STS and / or transfer tasks (task ``senteval-<tasks>``, headline ``avg`` or
    ``transfer_avg`` on ``test``), recorded by the run owner's :func:`suite.train.run.evaluation`."""

    modality = "text"

    def __init__(self, cfg: EvalConfig) -> None:
        if cfg.tasks not in ("sts", "transfer", "all"):
            raise ValueError(f"tasks must be sts, transfer or all, got {cfg.tasks!r}")
        self.name = f"senteval-{cfg.tasks}"
        self.primary = ("avg" if cfg.tasks != "transfer" else "transfer_avg", "test")
        self.encoder = load_encoder(cfg.model, pooling=cfg.pooling)  # before the row: a bad folder records nothing

    def dataset(self, cfg: EvalConfig) -> str:
        return "senteval"

    def data_inputs(self, cfg: EvalConfig) -> dict[str, str | Path]:
        """The folder of each task evaluated (:func:`text.data.task_folder`): a rerun after an STS or transfer file
        changed evaluates again, and says which."""
        tasks = [*(cfg.sts_tasks if cfg.tasks in ("sts", "all") else []),
                 *(cfg.transfer_tasks if cfg.tasks in ("transfer", "all") else [])]
        return {task: task_folder(task) for task in tasks}

    def loss_name(self, cfg: EvalConfig) -> str:
        return cfg.label or "none"

    def record(self, cfg: EvalConfig, experiment: dict[str, Any], training: Any) -> dict[str, Any]:
        """The evaluation setting and what it scored (the model is a run option; its identity is part of the
        experiment: :func:`text.models.backbone.identity`)."""
        return {**experiment, "evaluated": identity(cfg.model)}

    def evaluate(self, cfg: EvalConfig, ctx: RunContext[EvalConfig], training: Any) -> dict[str, float]:
        fn = EncodeFn(self.encoder.to(ctx.device), cfg.batch_size, cfg.max_length, ctx.device, cache=cfg.cache)
        print(f"evaluating {cfg.model} on {', '.join(self.data_inputs(cfg))} (SentEval's files under "
              f"{senteval_root()})", flush=True)  # what it reads, before minutes of encoding (issue 80)
        out: dict[str, float] = {}
        if cfg.tasks in ("sts", "all"):
            t0, c0 = time.perf_counter(), time.process_time()
            sts = STSEvaluator(cfg.sts_tasks, aggregation=cfg.aggregation)(fn)
            out.update({k: (100.0 * v if not k.endswith(("_pairs", "_skipped")) else v) for k, v in sts.items()})
            out["sts_wall_s"], out["sts_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        if cfg.tasks in ("transfer", "all"):
            t0 = time.perf_counter()
            tr = TransferEvaluator(cfg.transfer_tasks, kfold=cfg.kfold, inner_kfold=cfg.inner_kfold, regs=REGS)(fn)
            out.update({f"transfer_{k}" if k == "avg" else k: v for k, v in tr.items()})
            out["transfer_wall_s"] = time.perf_counter() - t0
        return out


def evaluate_model(cfg: EvalConfig, registry: Registry | None = None, record: bool = True) -> dict[str, float]:
    """The metrics of ``cfg.model`` (see :class:`SentEvalTask`), recorded in ``registry`` (default ``$SUITE_REGISTRY``)
    unless ``record`` is false."""
    return evaluation(SentEvalTask(cfg), cfg, registry=(registry if registry is not None else None) if record else False
                      ).metrics


def summary_line(m: dict[str, Any], aggregation: str = "all") -> str:
    keys = [k for k in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg") if k in m]
    keys += [k for k in TRANSFER + ("transfer_avg",) if k in m]
    return " | ".join(f"{k} {m[k]:.2f}" for k in keys) + (f"  (STS12-16 aggregation: {aggregation})" if "sts12" in m else "")
