"""``bench run SUITE --dry-run --explain``: each job's settings as its run would resolve them, beside the paper's.

A job group of a suite file may say what it reproduces and the papers' settings as data, each with its source
(STYLE 31), and name every departure with a reading:

    reproduces: "MACL Table 7: ImageNet-100, SimCLR, 200 epochs, batch 256"
    paper:                           # setting -> {value, source, quote?}; value null: the paper is silent
      epochs: {value: 200, source: "MACL Table 7 caption"}
      global_batch: {value: [256, 512], source: "MACL Fig. 3"}   # a list: the job's value is one of them
      macl.tau0: {value: 0.1, source: "MACL App. B.1"}           # <loss>.<hparam>: jobs of that loss only
    readings:                        # setting -> why ours departs (or what we chose where the paper is silent)
      recipe: "the suite has no AutoAugment: SimCLR's recipe"

Shared settings are YAML anchors merged into a group's block (``paper: {<<: *macl_b1, epochs: {...}}``). A job's
settings are resolved as the front-end resolves them, without running it: its command line parsed by the front-end's
own parser into its config (:func:`resolve`), the loss built by :func:`suite.presets.make_loss` (its recorded
hyper-parameters), the recipe looked up, the global batch and peak learning rate taken over the job's processes.
:func:`explain` marks each setting ``=`` (as the paper), ``!`` (departs, with its reading) or ``?`` (the paper is
silent: our reading); a departure or silence without a reading is ``UNREAD``, and :func:`unread` lists them (a test
fails on any)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.runner.suitefile import SUITES, Job, _YAML_LOADER, _group_jobs, resources_of


@dataclass
class Group:
    """One job group's paper block: what it reproduces, the papers' settings, our readings, and its jobs."""

    index: int
    reproduces: str
    paper: dict[str, dict[str, Any]]
    readings: dict[str, str]
    jobs: list[Job] = field(default_factory=list)


def _path(path: str | Path) -> Path:
    p = Path(path)
    return SUITES / f"{path}.yaml" if not p.exists() and (SUITES / f"{path}.yaml").exists() else p


def groups(path: str | Path) -> list[Group]:
    """The job groups of a suite file with their paper blocks and jobs (as :func:`load_suite` expands them)."""
    p = _path(path)
    spec = yaml.load(p.read_text(), Loader=_YAML_LOADER) or {}
    roots = tuple(sorted((k, v["env"]) for k, v in (spec.get("data") or {}).items()))
    from benchmarks.runner.suitefile import _resources, _tracking

    tracking = _tracking(spec, f"suite {p}", {})
    resources = _resources(spec.get("resources"), f"suite {p}", {})
    out = []
    for i, g in enumerate(spec["jobs"]):
        out.append(Group(i, str(g.get("reproduces") or ""), dict(g.get("paper") or {}), dict(g.get("readings") or {}),
                         _group_jobs(g, f"suite {p}, job group {i}", tracking, resources, roots)))
    return out


def world_size(job: Job) -> int:
    """Processes of one run: the resources' tasks x nodes (one GPU each), else 1."""
    res = resources_of(job)
    return int(res.get("tasks") or res.get("gpus") or 1) * int(res.get("nodes") or 1)


@functools.lru_cache(maxsize=None)
def _parser(frontend: str) -> Any:
    """The ``suite`` parser with only ``frontend`` loaded (built once: the same parser the job's process builds)."""
    from suite.cli import build_parser

    return build_parser(only=frontend)


def resolve(job: Job) -> dict[str, Any]:
    """{setting: value} of a job as its run would resolve and record them (vision pretrain only; another command:
    ``ValueError``): the front-end's parser and config, the loss factory's hyper-parameters, the recipe."""
    if (job.frontend, job.command) != ("vision", "pretrain"):
        raise ValueError(f"no settings resolver for suite {job.frontend} {job.command}")
    from suite.config import config_from_args
    from suite.presets import make_loss
    from suite.train.lars import scaled_lr
    from vision.config import PretrainConfig
    from vision.transforms import get_recipe

    args = _parser("vision").parse_args(job.argv())
    cfg = config_from_args(PretrainConfig, args, getattr(args, "config", None))
    world = world_size(job)
    batch = cfg.batch_size * world
    built = make_loss(cfg.framework, cfg.loss, cfg.loss_hparams, provides=("labels", "similarity"),
                      dataset=cfg.dataset, views=cfg.views)
    recipe = "imagenet" if cfg.recipe == "auto" else cfg.recipe  # streamed data: auto is ImageNet's (recipe_for)
    size = get_recipe(recipe, cfg.image_size).size
    rule = {"linear": f"{cfg.lr:g} x B/256", "sqrt": f"{cfg.lr:g} x sqrt(B)", "none": "as given"}[cfg.lr_scaling]
    out: dict[str, Any] = {
        "dataset": cfg.dataset, "epochs": cfg.epochs, "global_batch": batch, "per_gpu_batch": cfg.batch_size,
        "optimizer": cfg.optimizer, "lr_rule": rule if cfg.lr else "the optimiser's default rule",
        "lr": scaled_lr(cfg.lr, batch, cfg.lr_scaling) if cfg.lr else None,
        "momentum": cfg.momentum, "schedule": "cosine", "warmup_epochs": cfg.warmup_epochs,
        "weight_decay": cfg.weight_decay, "framework": cfg.framework, "loss": built.name, "views": cfg.views,
        "recipe": recipe, "image_size": size, "encoder": cfg.encoder,
        "stem": cfg.stem if cfg.stem != "auto" else ("imagenet" if size >= 128 else "cifar"),
        "head": _head(cfg), "proj_dim": cfg.proj_dim,
        "batchnorm": _batchnorm(cfg, world),
        "probe": cfg.probe if cfg.linear_probe else "none", "knn_k": cfg.knn_k,
        "eval_train_per_class": cfg.eval_train_per_class,
    }
    if cfg.probe == "sgd":
        out.update(probe_epochs=cfg.probe_epochs, probe_lr=cfg.probe_lr,
                   probe_schedule=(f"Nesterov SGD, batch {cfg.eval_batch_size}, cosine" if cfg.probe_schedule == "simclr"
                                   else f"SGD momentum 0.9, batch {cfg.eval_batch_size}, x0.1 at 60 % and 80 %"))
    if cfg.framework == "moco":
        out.update(queue_size=cfg.queue_size, moco_momentum=cfg.moco_momentum)
    if "similarity" in getattr(built.loss, "requires", ()):
        out[f"{built.name}.text_model"] = cfg.text_model or "all-MiniLM-L6-v2 (packaged)"
        out[f"{built.name}.caption_template"] = cfg.caption_template
    for k, v in built.hparams.items():
        out[f"{built.name}.{k}"] = v
    return out


def _head(cfg: Any) -> str:
    """The projection head as the front-end builds it (``proj_head``; auto: MoCo v2's with MoCo, SimCLR's else)."""
    kind = getattr(cfg, "proj_head", "simclr")
    if kind == "auto":
        kind = "mocov2" if cfg.framework == "moco" else "simclr"
    layers = {"simclr": "Linear-BN-ReLU-Linear", "mocov2": "Linear-ReLU-Linear"}.get(kind, kind)
    return f"2-layer MLP ({layers}) to {cfg.proj_dim}"


def _batchnorm(cfg: Any, world: int) -> str:
    """BatchNorm's mode as the front-end sets it over ``world`` processes (``cross_rank_bn``): SimCLR's statistics
    over the global batch (SyncBatchNorm), MoCo's key batch shuffled across ranks (Shuffle-BN), else per GPU."""
    if world > 1 and getattr(cfg, "cross_rank_bn", False):
        return "synchronised (global)" if cfg.framework == "simclr" else "shuffle BN"
    return "per GPU"


def _same(ours: Any, paper: Any) -> bool:
    if isinstance(paper, list):
        return any(_same(ours, p) for p in paper)
    if isinstance(ours, bool) or isinstance(paper, bool):
        return ours is paper or ours == paper
    if isinstance(ours, (int, float)) and isinstance(paper, (int, float)):
        return math.isclose(float(ours), float(paper), rel_tol=1e-9, abs_tol=1e-12)
    return str(ours) == str(paper)


@dataclass
class Line:
    setting: str
    ours: Any
    paper: Any
    source: str
    quote: str
    mark: str  # "=" as the paper, "!" departs (read), "?" paper silent (read), "UNREAD" without a reading
    reading: str = ""


def compare(job: Job, group: Group) -> list[Line]:
    """One line per paper setting that applies to the job (``<loss>.<hparam>`` only to jobs of that loss)."""
    ours = resolve(job)
    lines = []
    for key, spec in group.paper.items():
        head = key.split(".", 1)[0]
        if "." in key and head != ours["loss"]:
            continue
        if key not in ours:  # a setting the front-end has no option for: a departure, read or not
            reading = group.readings.get(key, "")
            lines.append(Line(key, "(no such option)", spec["value"], spec["source"], spec.get("quote") or "",
                              "!" if reading else "UNREAD", reading))
            continue
        value = ours[key]
        silent = spec["value"] is None
        same = not silent and _same(value, spec["value"])
        reading = group.readings.get(key, "")
        mark = "=" if same else ("UNREAD" if not reading else ("?" if silent else "!"))
        lines.append(Line(key, value, spec["value"], spec["source"], spec.get("quote") or "", mark,
                          "" if same else reading))
    return lines


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "one of " + ", ".join(_fmt(x) for x in v)
    return "not stated" if v is None else str(v)


def explain(path: str | Path, only: set[str] | None = None, hours: dict[str, str] | None = None) -> list[str]:
    """The ``--explain`` lines of a suite: per job (``only``: those hashes) what it reproduces, its GPU-hours
    (``hours``: hash -> text) and each paper setting, ours beside the paper's with its source and, where ours departs,
    the reading."""
    out: list[str] = []
    for g in groups(path):
        for job in g.jobs:
            if only is not None and job.hash not in only:
                continue
            out.append(f"job {job.hash[:12]}  {job.label()}")
            out.append(f"  reproduces: {g.reproduces or '(the group names no table)'}")
            if hours and job.hash in hours:
                out.append(f"  GPU-hours: {hours[job.hash]}")
            if not g.paper:
                out.append("  (no paper settings written for this group)")
                continue
            try:
                lines = compare(job, g)
            except (ValueError, SystemExit) as exc:
                out.append(f"  settings not resolved: {exc}")
                continue
            for ln in lines:
                text = (f"  {ln.mark:>6} {ln.setting:<26} ours {_fmt(ln.ours):<22} paper {_fmt(ln.paper):<22} "
                        f"[{ln.source}]")
                if ln.quote:
                    text += f' "{ln.quote}"'
                if ln.reading:
                    text += f"\n{'':9}reading: {ln.reading}"
                out.append(text)
    return out


def not_run(path: str | Path) -> dict[str, str]:
    """The suite's ``not_run:`` block: {a paper's table or row: why the suite does not run it}."""
    spec = yaml.load(_path(path).read_text(), Loader=_YAML_LOADER) or {}
    return dict(spec.get("not_run") or {})


def unread(path: str | Path) -> list[str]:
    """Every departure (or silence) of every job without a reading, and every reading of a setting its group's paper
    block does not name (a typo would leave a departure unread): ``group N ...`` lines (empty: every departure is
    read)."""
    out = []
    for g in groups(path):
        out += [f"group {g.index}: reading {k!r} names no setting of its paper block" for k in sorted(g.readings)
                if k not in g.paper]
        for job in g.jobs:
            for ln in compare(job, g):
                if ln.mark == "UNREAD":
                    out.append(f"group {g.index} job {job.hash[:12]}: {ln.setting} ours {_fmt(ln.ours)} vs paper "
                               f"{_fmt(ln.paper)} [{ln.source}] has no reading ({job.label()})")
    return out


def reproduces_table(path: str | Path) -> str:
    """A Markdown table of the suite's job groups: what each reproduces and how many jobs it runs, then what the suite
    does not run and why (the docs page holds this text; a test checks it is the file's)."""
    rows = ["| group | jobs | reproduces |", "|---|---|---|"]
    rows += [f"| {g.index} | {len(g.jobs)} | {' '.join(g.reproduces.split())} |" for g in groups(path)]
    rows += ["", "Not run:", ""]
    rows += [f"- {what}: {' '.join(why.split())}" for what, why in not_run(path).items()]
    return "\n".join(rows) + "\n"
