"""What every benchmark table shares: its suite's jobs matched to their runs in the registry, cells, Markdown,
and the ``suite bench <table>`` short-hand that runs the suite through the runner and writes the table.

A table is ``table(registry) -> str`` in its own module. Its grid is a suite file (``benchmarks/suites/
<name>.yaml``): every job there has a hash, which the runner hands to the job's process
(``SUITE_CONFIG_HASH``) and the registry stores as the config hash of every run the job records. So a
table needs nothing but the registry: the runs of a job are the finished runs carrying its hash, a cell's
values are those runs' metrics, and a job with no finished run is a cell that says ``not run``. Runs of
other settings (another suite file, an older version of this one) carry other hashes and never mix in.

    jr = suite_runs(reg, "graph-tu")                     # [JobRuns(job, runs)]
    cell([r.metric("acc", "test") for r in jr[0].runs])  # "79.10 ± 0.50 (n=3)", or "not run"
"""
from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from benchmarks.tables.claims import Seeded, mean_std
from benchmarks.runner.suitefile import SUITES, Job, load_suite
from suite.registry import Registry, markdown_table, open_registry
from suite.registry.queries import committed, versions_text

NOT_RUN = "not run"


@dataclass
class RunView:
    """One finished run of a job: its registry row and its last value of each (metric, split)."""
    row: dict[str, Any]
    final: dict[tuple[str, str | None], float]
    steps: dict[tuple[str, str | None], int | None] = field(default_factory=dict)

    @property
    def task(self) -> str:
        return str(self.row["task"])

    def metric(self, name: str, split: str | None = None) -> float | None:
        """The run's last value of ``name`` (in ``split`` when given; any split otherwise)."""
        if split is not None:
            return self.final.get((name, split))
        return next((v for (n, _), v in self.final.items() if n == name), None)


@dataclass
class JobRuns:
    """A job of the suite and its finished runs (a job may record several: SimCSE training, then evaluation)."""
    job: Job
    runs: list[RunView]

    def arg(self, name: str, default: Any = None) -> Any:
        """The job's argument ``name`` (``batch_size`` and ``batch-size`` are one name)."""
        args = {k.replace("-", "_"): v for k, v in self.job.args}
        return args.get(name.replace("-", "_"), default)

    @property
    def seed(self) -> int | None:
        return self.job.seed

    def of_task(self, prefix: str) -> list[RunView]:
        return [r for r in self.runs if r.task.startswith(prefix)]

    def metric(self, name: str, split: str | None = None, task: str = "") -> float | None:
        """The metric from the job's latest run of ``task`` (prefix) that has it; None when not run."""
        run = self.run_with(name, split, task)
        return None if run is None else run.metric(name, split)

    def run_with(self, name: str, split: str | None = None, task: str = "") -> RunView | None:
        """The job's latest run of ``task`` (prefix) that has the metric; None when not run."""
        return next((r for r in reversed(self.of_task(task)) if r.metric(name, split) is not None), None)


def identity(run: dict[str, Any]) -> tuple[Any, str]:
    """What a run's seed fixes, as its registry row records it: (its seed, its data set). Every front-end draws the
    training subset and the initialisation from the seed (suite/train/seeding.py), so two arms' runs of one identity
    share them and pair by seed (:class:`benchmarks.tables.claims.Seeded`)."""
    config = run.get("config") or {}
    if isinstance(config, str):
        config = json.loads(config)
    return run.get("seed"), str(config.get("dataset") or run.get("dataset") or "")


_SUITE_RUNS: dict[tuple[Any, ...], list[JobRuns]] = {}  # what suite_runs read, while the registry is unchanged


def suite_runs(reg: Registry, suite: str | Path) -> list[JobRuns]:
    """Every job of ``suite`` with its finished runs (by the job hash), in the suite's order. The tables and the
    claims ask for the same suites many times while rendering: an unchanged registry (:meth:`Registry.fingerprint`)
    and suite file are read once."""
    _, jobs = load_suite(suite)
    key = (reg.url, tuple(j.hash for j in jobs), reg.fingerprint(), os.environ.get("SUITE_ALLOW_DIRTY") == "1")
    if key not in _SUITE_RUNS:
        if len(_SUITE_RUNS) > 32:
            _SUITE_RUNS.clear()
        _SUITE_RUNS[key] = _read_suite_runs(reg, jobs)
    return list(_SUITE_RUNS[key])


def _read_suite_runs(reg: Registry, jobs: list[Job]) -> list[JobRuns]:
    by_hash: dict[str, list[RunView]] = {j.hash: [] for j in jobs}
    hashes = list(by_hash)
    for i in range(0, len(hashes), 500):  # SQL IN lists of modest length
        runs = [r for r in reg.runs(status="finished", config_hash=hashes[i:i + 500])
                if committed(r)]  # no cell from uncommitted code (the runner reruns it from a commit)
        logged = reg.metrics_for([r["id"] for r in runs])
        for r in runs:
            steps: dict[tuple[str, str | None], int | None] = {}
            final = {}
            for m in logged[r["id"]]:  # in logging order: the last one wins, as final_metrics
                key = (m["name"], m["split"])
                rank = m["step"] if m["step"] is not None else -1
                if key not in final or rank >= (steps[key] if steps[key] is not None else -1):
                    final[key], steps[key] = m["value"], m["step"]
            by_hash[r["config_hash"]].append(RunView(r, final, steps))
    return [JobRuns(j, by_hash[j.hash]) for j in jobs]


def values(jrs: Iterable[JobRuns], name: str, split: str | None = None, task: str = "", scale: float = 1.0) -> Seeded:
    """The metric over the given jobs (one value per job that has it), times ``scale``, each named by its run's
    :func:`identity`."""
    runs = [r for r in (jr.run_with(name, split, task) for jr in jrs) if r is not None]
    return Seeded.of(((identity(r.row), r.metric(name, split)) for r in runs), scale)


def select(jrs: Iterable[JobRuns], **args: Any) -> list[JobRuns]:
    """The jobs whose arguments equal ``args`` (``frontend`` / ``command`` match the job's own)."""
    out = []
    for jr in jrs:
        ok = True
        for k, v in args.items():
            have = getattr(jr.job, k) if k in ("frontend", "command") else jr.arg(k)
            if have != v:
                ok = False
                break
        if ok:
            out.append(jr)
    return out


def cell(vals: Sequence[float], digits: int = 2, show_n: bool = True) -> str:
    """``mean ± std (n=k)`` (sample std, benchmarks/tables/claims.py) or ``not run``."""
    return mean_std(vals, digits=digits, show_n=show_n, empty=NOT_RUN)


def md(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return markdown_table(header, rows)


def progress_line(jrs: Sequence[JobRuns], suite: str) -> str:
    """How many jobs of the suite have results, and the command that runs the rest."""
    done = sum(1 for jr in jrs if jr.runs)
    line = f"Jobs with results: {done} of {len(jrs)} (suite `benchmarks/suites/{suite}.yaml`)."
    if done < len(jrs):
        line += f" The others say `{NOT_RUN}`; `suite bench run {suite}` runs them (finished jobs are skipped)."
    versions = versions_of(jrs)
    return line + (f" {versions}" if versions else "")


def versions_of(jrs: Iterable[JobRuns]) -> str:
    """``Code versions of these runs (commit: runs): 1a2b3c: 40, ...`` of the jobs' runs (most runs first), or ""."""
    return versions_text(Counter(str(r.row.get("code_version") or "?") for jr in jrs for r in jr.runs))


# ----------------------------------------------------------------------------- the short-hand commands

def add_bench_args(p: argparse.ArgumentParser, suite: str, out: Path) -> None:
    """Flags of ``suite bench <table>``: the suite's profile, the runner's flags, the table's output."""
    profiles = sorted({"cpu"} | {f.stem[len(suite) + 1:] for f in SUITES.glob(f"{suite}-*.yaml")})
    p.add_argument("--profile", choices=profiles, default="cpu",
                   help=f"cpu = benchmarks/suites/{suite}.yaml; other = benchmarks/suites/{suite}-<profile>.yaml")
    p.add_argument("--jobs", type=int, default=1, help="jobs run in parallel by the runner")
    p.add_argument("--threads", type=int, default=0, help="threads per job (default: cores // jobs)")
    p.add_argument("--registry", default=None, help="registry path / URL, or a .jsonl snapshot for --table-only")
    p.add_argument("--dry-run", action="store_true", help="list the jobs that would run; run nothing")
    p.add_argument("--table-only", action="store_true", help="only write the table from the registry")
    p.add_argument("--out", type=Path, default=None,
                   help=f"table file (default: {out.parent.name}/{out.name} from the committed snapshot, "
                        f"results/tables/{out.name} from any other registry)")


def suite_for(suite: str, profile: str) -> str:
    return suite if profile == "cpu" else f"{suite}-{profile}"


def bench_main(args: argparse.Namespace, suite: str, table: Callable[..., str]) -> int:
    """Run the suite through the runner (resumable, parallel, thread budget), then write and print the table.
    The exit status is the runner's (non-zero when a job failed); the table is written either way."""
    from benchmarks.runner.plan import Runner
    from benchmarks.runner.run import execute
    from suite.paths import registry_url

    from benchmarks.paths import results_target

    name = suite_for(suite, args.profile)
    rc = 0
    out = results_target(args.out, args.default_out, args.registry or registry_url())  # refused before any job runs
    if not args.table_only:
        if args.registry and str(args.registry).endswith(".jsonl"):
            raise ValueError("--registry: a .jsonl snapshot is read-only; use it with --table-only")
        if args.jobs < 1 or args.threads < 0:
            raise ValueError(f"--jobs must be >= 1 and --threads >= 0, got --jobs {args.jobs} --threads {args.threads}")
        sname, jobs = load_suite(name)
        runner = Runner(args.registry or registry_url(), jobs=args.jobs, threads=args.threads, dry_run=args.dry_run,
                        log_dir=Path("results/bench-logs") / sname)
        rc = execute(runner, sname, jobs)
        if args.dry_run:
            return rc
    text = table(open_registry(args.registry), suite=name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"wrote {out}")
    return rc


def register_table(sub: Any, name: str, help_: str, suite: str, out: Path, table: Callable[..., str]) -> None:
    """``suite bench <name>``: run ``suite`` through the runner, then write ``table`` to ``out``."""
    p = sub.add_parser(name, help=f"{help_}: runs benchmarks/suites/{suite}.yaml, writes {out.name}")
    add_bench_args(p, suite, out)
    p.set_defaults(func=lambda a: bench_main(a, suite, table), default_out=out)


def table_cli(prog: str, suite: str, out: Path, table: Callable[..., str], argv: list[str] | None = None) -> int:
    """``python -m benchmarks.<table>``: the same as ``suite bench <name>``."""
    p = argparse.ArgumentParser(prog=prog)
    add_bench_args(p, suite, out)
    p.set_defaults(default_out=out)
    return bench_main(p.parse_args(argv), suite, table)

