"""``suite bench compare LOSS``: your own loss through a suite's jobs, beside the suite's losses, judged by the claims
rule, on one page.

    suite bench compare barlow_twins --suite quick --jobs 2                 # an installed package's loss
    suite bench compare my_losses.py:CosMargin --loss-hparams margin=0.3    # a class in a file
    suite bench compare my_pkg.losses:CosMargin --against infonce,macl,cacr,tsimclr

In order:

1. the loss is resolved (:func:`suite.presets.make_loss`: an installed package's name, ``module:Class`` or
   ``file.py:Class``) and run once on random embeddings; a broken loss is one line and exit 2, before any job;
2. the plan: every job group of the suite that names a loss is a task (TU graphs, images, sentences; with ``--suite cpu``
   also molecular pretraining, whose fine-tuning jobs of a later stage follow the encoder each loss pretrained). Per
   task the user's loss runs the seeds the suite gives the task, and so does every baseline of ``--against`` (default:
   the losses the suite itself runs there; a name the front-end does not know is left out and said);
3. baseline runs the registry lacks are imported from the committed snapshot (``benchmarks/results/registry.jsonl``)
   where it holds them (``--no-snapshot``: never), then the runner runs only the jobs not finished (resumable, ``--jobs``
   at a time, one thread each); a job's hash includes the user's loss's origin (its source's sha256), so a changed
   loss runs again and never pools with the old one;
4. the loss's forward and backward time and peak tensor memory at 2N = 256, 1,024 and 4,096 (d = 128, one thread;
   ``$SUITE_COMPARE_SIZES``, e.g. ``256``, changes the sizes), timed round-robin with ``infonce`` in one process and
   recorded in the registry (task ``loss-compare``);
5. ``results/compare/<loss>.md`` and ``.html`` (:mod:`benchmarks.report.compare`): per task the loss beside each
   baseline and the published rows, the claims rule's verdict on "the loss beats the baseline" (``contradicted``: the
   baseline beats it), and the timings.

Every number on the page is read back from the registry.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks.paths import SNAPSHOT
from benchmarks.runner.compare_task import D, Task, slug
from benchmarks.runner.suitefile import SUITES, Job, check_commands, load_suite
from benchmarks.runner.plan import Runner
from benchmarks.runner.run import add_executor_options, execute, executor_of, require_committed_code
from suite.registry import Registry

SETTING_OF = {("graph", "tu"): "graph_tu", ("graph", "pretrain-mol"): "graph_transfer", ("text", "train"): "text",
              ("vision", "pretrain"): "simclr"}
SIZES = (256, 1024, 4096)
NO_INIT = "none"


def _args_with(job: Job, key: str, value: Any, extra: dict[str, Any], fill_loss: str = "") -> tuple[tuple[str, Any], ...]:
    out = []
    for k, v in job.args:
        v = value if k == key else v
        if fill_loss and isinstance(v, str) and "{loss}" in v:
            v = v.replace("{loss}", fill_loss)
        out.append((k, v))
    return tuple(out) + tuple((k, v) for k, v in extra.items() if k not in dict(out))


def _valid(frontend: str, command: str, name: str) -> str | None:
    """Why ``name`` cannot run as a baseline of this front-end (None: it can)."""
    from suite import presets

    setting = SETTING_OF.get((frontend, command))
    if setting is None:
        return None
    try:
        presets.resolve(setting, name, aliases=setting not in ("graph_tu", "graph_transfer"))
    except ValueError as exc:
        return str(exc).splitlines()[0]
    return None


def plan(suite: str | Path, loss: str, against: list[str] | None = None,
         loss_hparams: str = "") -> tuple[str, list[Task], list[str]]:
    """``(suite name, tasks, notes)``: the suite's loss-dependent job groups with the user's ``loss`` (its
    ``loss_hparams`` as ``key=value,...``) and each baseline as arms, every arm with the task's seeds."""
    name, jobs = load_suite(suite)
    extra = {"loss-hparams": loss_hparams} if loss_hparams else {}
    tasks: dict[tuple[Any, ...], Task] = {}
    outputs: dict[str, tuple[str, Job]] = {}  # an earlier stage's output folder -> (its loss, its job)
    notes: list[str] = []
    for job in jobs:
        args = dict(job.args)
        if "loss" in args:
            by, label = "loss", str(args["loss"])
            out = job.output()
            if out is not None:
                outputs[str(out)] = (label, job)
        else:
            dep = next(((k, outputs[str(v)]) for k, v in args.items() if isinstance(v, str) and str(v) in outputs),
                       None)
            init_none = next((k for k, v in args.items() if v == NO_INIT and k == "init"), None)
            if dep is None and init_none is None:
                continue  # not loss-dependent (e.g. the loss timings): the page measures its own
            by, label = (dep[0], dep[1][0]) if dep is not None else (init_none, "no pretraining")
        fixed = tuple((k, v) for k, v in job.args if k != by)
        key = (job.frontend, job.command, fixed, by, job.stage)
        task = tasks.setdefault(key, Task(job.frontend, job.command, fixed, by))
        task.arms.setdefault(label, []).append(job)
    out_tasks = list(tasks.values())
    user_outputs: dict[str, str] = {}  # a baseline's output folder -> the user's job output in the same task
    for task in out_tasks:
        template = next(iter(task.arms.values()))
        if task.by == "loss":
            task.judged = not (task.frontend, task.command) == ("graph", "pretrain-mol")
            wanted = against if against is not None else list(task.arms)
            for base in wanted:
                if base in task.arms:
                    continue
                why = _valid(task.frontend, task.command, base)
                if why:
                    notes.append(f"{task.title}: baseline {base!r} left out ({why})")
                    continue
                task.arms[base] = [Job(j.frontend, j.command, _args_with(j, "loss", base, {}), j.seed, j.seed_flag,
                                       j.timeout, j.stage) for j in template]
            if against is not None:
                for base in [b for b in task.arms if b not in against]:
                    del task.arms[base]
            mine = [Job(j.frontend, j.command, _args_with(j, "loss", loss, extra, slug(loss)), j.seed, j.seed_flag,
                        j.timeout, j.stage) for j in template]
            for base_job, my_job in zip(template, mine):
                if base_job.output() is not None and my_job.output() is not None:
                    user_outputs[str(base_job.output())] = str(dict(my_job.values())["out"])
            task.arms[loss] = mine
        else:
            dep_template = next((jobs_ for label, jobs_ in task.arms.items() if label != "no pretraining"), template)
            src = str(dict(dep_template[0].args)[task.by])
            if src not in user_outputs:
                notes.append(f"{task.title}: no pretraining job of the loss to fine-tune from")
                continue
            if against is not None:
                for label in [b for b in task.arms if b not in against and b != "no pretraining"]:
                    del task.arms[label]
            task.arms[loss] = [Job(j.frontend, j.command, _args_with(j, task.by, user_outputs[src], {}), j.seed,
                                   j.seed_flag, j.timeout, j.stage) for j in dep_template]
    return name, out_tasks, notes


def all_jobs(tasks: list[Task]) -> list[Job]:
    seen: dict[str, Job] = {}
    for t in tasks:
        for jobs in t.arms.values():
            for j in jobs:
                seen.setdefault(j.hash, j)
    return sorted(seen.values(), key=lambda j: j.stage)


def importable(reg: Registry, jobs: list[Job], snapshot: Path = SNAPSHOT) -> list[Any]:
    """The snapshot's checked lines of the runs of ``jobs`` the registry has no finished record of."""
    from suite.registry.snapshot import check_snapshot

    if not snapshot.is_file():
        return []
    missing = {j.hash for j in jobs if reg.job_status(j.hash) != "finished"}
    return [c for c in check_snapshot(snapshot) if c[2].get("config_hash") in missing] if missing else []


def import_baselines(reg: Registry, jobs: list[Job], snapshot: Path = SNAPSHOT) -> int:
    """Import from ``snapshot`` the runs of ``jobs`` the registry has no finished record of; returns how many."""
    wanted = importable(reg, jobs, snapshot)
    return reg.import_jsonl(snapshot, wanted)["added"] if wanted else 0


# ----------------------------------------------------------------------------- timings

def time_losses(loss: str, hparams: dict[str, Any], sizes: tuple[int, ...] = SIZES, repeats: int = 0
                ) -> dict[tuple[str, int], tuple[float, int]]:
    """Median forward+backward seconds and peak tensor bytes of the user's loss and infonce (both dense), timed
    round-robin in this process."""
    import torch

    from suite.measure import peak_tensor_bytes, time_interleaved
    from suite.presets import make_loss

    built = {"infonce": make_loss("simclr", "infonce", check=False).loss,
             loss: make_loss("simclr", loss, hparams, check=False).loss}
    if hasattr(built["infonce"], "chunk_size"):
        built["infonce"].chunk_size = None  # dense, as the user's loss
    gen = torch.Generator().manual_seed(0)
    out: dict[tuple[str, int], tuple[float, int]] = {}
    for two_n in sizes:
        n = two_n // 2
        cases = {}
        for name, fn in built.items():
            za = torch.randn(n, D, generator=gen).requires_grad_()
            zb = torch.randn(n, D, generator=gen).requires_grad_()
            cases[name] = ((lambda fn=fn, za=za, zb=zb: fn(za, zb)), [za, zb])
        reps = repeats or (15 if two_n <= 256 else 7 if two_n <= 1024 else 3)
        med, _ = time_interleaved(cases, reps)
        for name, (fn, leaves) in cases.items():
            out[(name, two_n)] = (med[name], peak_tensor_bytes(fn, leaves))
    return out


def record_timings(reg: Registry, loss: str, timings: dict[tuple[str, int], tuple[float, int]],
                   origin: dict[str, Any] | None, hparams: dict[str, Any]) -> None:
    import torch

    from benchmarks.measurements.measured import Measurement, record

    for (name, two_n), (t, mem) in timings.items():
        config = {"two_n": two_n, "d": D, "threads": torch.get_num_threads(), "path": "dense",
                  **({"loss_origin": origin} if name == loss and origin else {})}
        record(reg, Measurement("loss-compare", f"random-2N{two_n}-d{D}", name, config,
                                {"fwd_bwd_ms": 1e3 * t, "peak_mib": mem / 2**20}, "fwd_bwd_ms",
                                loss_hparams=hparams if name == loss else {}))


# ----------------------------------------------------------------------------- the command

def register(sub: Any) -> None:
    p = sub.add_parser("compare", help="run a suite's jobs for your own loss beside the suite's losses and write a "
                                       "comparison page with verdicts (results/compare/<loss>.md / .html)")
    p.add_argument("loss", help="an installed package's loss name, module:Class or path/to/file.py:Class")
    p.add_argument("--against", default=None, help="comma-separated baselines (default: the losses the suite runs "
                                                   "in each task), e.g. infonce,macl,cacr,tsimclr")
    p.add_argument("--suite", default="quick", help="a suite name (benchmarks/suites/<name>.yaml) or a suite file")
    p.add_argument("--loss-hparams", default="", help="the loss's hyper-parameters, key=value,...")
    p.add_argument("--jobs", type=int, default=1, help="jobs at a time (one thread each on 2 cores: --jobs 2)")
    add_executor_options(p)
    p.add_argument("--registry", default=None, help="registry URL or path (default: $SUITE_REGISTRY)")
    p.add_argument("--out", default="results/compare", help="folder of the page")
    p.add_argument("--no-snapshot", action="store_true", help="never import baseline runs from the committed snapshot")
    p.add_argument("--no-timing", action="store_true", help="leave out the forward/backward timings")
    p.add_argument("--dry-run", action="store_true", help="list the jobs (and which are finished) without running")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run although the suite's tracked code differs from its commit (runs recorded as -dirty)")
    p.set_defaults(func=_main)


def _suite_path(suite: str) -> Path:
    p = Path(suite)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise ValueError(f"--suite {suite}: file not found")
        return p
    named = SUITES / f"{suite}.yaml"
    if not named.is_file():
        known = sorted(x.stem for x in SUITES.glob("*.yaml"))
        raise ValueError(f"--suite {suite!r}: no such suite (known: {', '.join(known)})")
    return named


def _main(args: argparse.Namespace) -> int:
    from suite.config import _kv_pairs
    from suite.paths import registry_url
    from suite.presets import make_loss

    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    try:
        hparams = _kv_pairs(args.loss_hparams) if args.loss_hparams else {}
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--loss-hparams: {exc}") from None
    built = make_loss("simclr", args.loss, hparams)  # a broken loss: one line, before anything runs
    if not args.dry_run:
        require_committed_code(args.allow_dirty)
    against = [a.strip() for a in args.against.split(",") if a.strip()] if args.against else None
    suite = _suite_path(args.suite)
    name, tasks, notes = plan(suite, args.loss, against, args.loss_hparams)
    if not tasks:
        raise ValueError(f"suite {name} has no job that names a loss")
    jobs = all_jobs(tasks)
    url = args.registry or registry_url()
    check_commands(jobs, suite)
    executor = executor_of(args, url)
    reg = Registry(url)
    baselines = [j for t in tasks for label, js in t.arms.items() if label != args.loss for j in js]
    if not args.no_snapshot and not args.dry_run:
        added = import_baselines(reg, baselines)
        if added:
            print(f"imported {added} finished baseline run(s) from {SNAPSHOT}")
    elif not args.no_snapshot:  # a dry run writes nothing: it says what the snapshot would give, and lists the rest
        held = {c[2].get("config_hash") for c in importable(reg, baselines)}
        if held:
            print(f"would import {len(held)} finished baseline job(s) from {SNAPSHOT} (not run)")
            jobs = [j for j in jobs if j.hash not in held]
    runner = Runner(url, jobs=args.jobs, log_dir=Path("results/bench-logs") / f"compare-{slug(args.loss)}",
                    dry_run=args.dry_run, executor=executor)
    rc = execute(runner, f"compare {built.name} ({name})", jobs)
    if args.dry_run:
        return rc
    timings = None
    if not args.no_timing:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            sizes = tuple(int(x) for x in os.environ.get("SUITE_COMPARE_SIZES", "").split(",") if x.strip()) or SIZES
            timings = time_losses(built.name, hparams, sizes)
        finally:
            torch.set_num_threads(threads)
        record_timings(reg, built.name, timings, built.origin, built.hparams)
    from benchmarks.report.compare import page

    md, doc = page(reg, name, tasks, built.name, built.origin, built.hparams, timings, notes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{slug(built.name)}.md").write_text(md, encoding="utf-8")
    (out / f"{slug(built.name)}.html").write_text(doc, encoding="utf-8")
    print(md)
    print(f"wrote {out / (slug(built.name) + '.md')} and {out / (slug(built.name) + '.html')}", file=sys.stderr)
    return rc
