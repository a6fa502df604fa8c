"""``suite bench run <suite.yaml>``: run a declared grid of jobs through the front-ends' own CLIs.

A suite file declares job groups; each group expands to the cartesian product of its ``grid`` values
times its ``seeds``, every job one command line ``suite <frontend> <command> --key value ... <seed flag> <seed>``:

    name: quick
    jobs:
      - frontend: graph            # suite sub-command
        command: tu
        seed_flag: --seed          # how the command takes its seed
        seeds: [0, 1]
        stage: 0                   # groups of a later stage start when earlier stages have ended
        grid: {dataset: [MUTAG, PROTEINS], loss: [graphcl, macl]}
        args: {epochs: 20}         # fixed flags (true -> --flag, false -> --no-flag, list -> several values;
                                   # strings may use {job} (hash), {seed} and other args, e.g. out dirs)

Every job has a hash of (frontend, command, args, seed); the child process gets it as
``SUITE_CONFIG_HASH``, which the registry stores as the config hash of the runs it records. The runner
claims each job in the registry's ``jobs`` table and marks it finished only when its process exits 0;
a finished job is skipped, so an interrupted sweep resumes where it stopped, and the runs of an
unfinished attempt are marked interrupted before the job is re-run (no duplicate finished rows). Two
runners on one registry never run the same job at once: a claim holds while the runner or the job's own
process (recorded as ``child_pid``) lives, and a job held elsewhere is reported ``busy``. The runner owns
its jobs: each starts in its own session (process group); SIGTERM, SIGHUP or Ctrl-C to the runner stop
every group (SIGKILL after ``grace`` seconds), and a job started with the local launcher gets SIGTERM from
the kernel when the runner dies, even by SIGKILL (``$SUITE_RUNNER_PID``, see ``suite.cli.follow_runner``).
Every value of a suite file is checked when it is loaded (an empty grid list or seeds, a seed, stage or timeout of the
wrong type, a mapping as an arg, a ``{placeholder}`` that names no arg, an unknown key in a group or beside ``name`` and
``jobs``: one line naming the file, the group and the key),
and before any job starts every job's front-end and command must be a ``suite`` command. A stage after one with a failed
job is not started (its jobs are reported ``blocked``); a finished job whose output folder (its ``out`` arg) is gone
while a later stage has still to run is run again first (``[rebuild]``), since the later stage reads it. A suite's
``name`` names its log folder, so it may hold only letters, digits, ``.``, ``_`` and ``-``. Jobs run in parallel up to
``--jobs``, each with a thread budget of ``max(1, cores // jobs)`` (``--threads`` overrides; set as
``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` in the child's environment, which torch's thread pool follows), so
jobs x threads <= cores; ``--launcher torchrun`` starts each job with ``torch.distributed.run`` and forwards
``--nproc-per-node`` / ``--nnodes`` (plus rendezvous flags) so one job uses several processes or machines.
While it runs, the runner prints each job's start and end with a progress line (jobs done / total, the
running jobs, an ETA from the median duration of finished jobs of the same front-end and command, as
recorded in the registry's ``jobs`` table and in this run); it ends with a summary that lists every failed
job with its log, and exits non-zero if any failed. The registry can be any SQLAlchemy URL (``--registry postgresql+psycopg://...``). Logs of each job go
to ``results/bench-logs/<suite>/<hash>.log``.
"""
from __future__ import annotations

import argparse
import atexit
import functools
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from suite.paths import resolve_model_path
from suite.registry import Registry, config_hash

SUITES = Path(__file__).resolve().parent / "suites"
# Arguments a front-end renamed, per (frontend, command): {current name: earlier name}. A job keeps its identity
# across the rename: `suite bench migrate` maps runs and job records of the earlier spelling to the current hash.
RENAMED_ARGS: dict[tuple[str, str], dict[str, str]] = {
    ("vision", "pretrain"): {"out": "out-dir"},  # the run owner: --out is the run folder (was --out-dir/<run name>)
}


@functools.lru_cache(maxsize=None)
def _loss_origin(loss: Any) -> dict[str, Any] | None:
    """:func:`suite.presets.loss_origin` of a job's ``loss`` arg, once per runner (read when the suite is loaded)."""
    from suite.presets import loss_origin

    return loss_origin(loss) if isinstance(loss, str) else None


@dataclass(frozen=True)
class Job:
    frontend: str
    command: str
    args: tuple[tuple[str, Any], ...]
    seed: int | None
    seed_flag: str = "--seed"
    timeout: float | None = None
    stage: int = 0

    @property
    def hash(self) -> str:
        """Of (frontend, command, args, seed) and, for a user's loss (``loss: file.py:Class``), its origin (the
        source's sha256, the package version): a changed loss is a new job, never a finished one skipped."""
        key = {"frontend": self.frontend, "command": self.command, "args": dict(self.args), "seed": self.seed}
        origin = _loss_origin(dict(self.args).get("loss"))
        return config_hash({**key, "loss_origin": origin} if origin else key)

    def earlier_hashes(self) -> list[str]:
        """The job's hash under the earlier spelling of its renamed arguments (:data:`RENAMED_ARGS`), if any."""
        renamed = RENAMED_ARGS.get((self.frontend, self.command), {})
        if not any(k in renamed for k, _ in self.args):
            return []
        args = {renamed.get(k, k): v for k, v in self.args}
        return [config_hash({"frontend": self.frontend, "command": self.command, "args": args, "seed": self.seed})]

    def values(self) -> list[tuple[str, Any]]:
        """The args with their ``{job}`` (the job hash), ``{seed}`` and ``{arg name}`` placeholders filled in."""
        ctx = {**{k: v for k, v in self.args}, "seed": self.seed, "job": self.hash[:12]}
        return [(k, v.format(**ctx) if isinstance(v, str) and "{" in v else v) for k, v in self.args]

    def output(self) -> Path | None:
        """The folder the job writes (its ``out`` arg; ``models:NAME`` is resolved), relative paths to the runner's
        working directory, which is the job's; None without an ``out``."""
        out = dict(self.values()).get("out")
        return resolve_model_path(out) if isinstance(out, str) and out else None

    def argv(self) -> list[str]:
        """Command line; string values may use ``{job}`` (the job hash), ``{seed}`` and any arg name."""
        out = [self.frontend, self.command]
        for k, v in self.values():
            flag = "--" + k.replace("_", "-")
            if v is True:
                out.append(flag)
            elif v is False:
                out.append("--no-" + k.replace("_", "-"))
            elif isinstance(v, (list, tuple)):
                out += [flag, *map(str, v)]
            elif v is not None:
                out += [flag, str(v)]
        if self.seed is not None:
            out += [self.seed_flag, str(self.seed)]
        return out

    def label(self) -> str:
        return " ".join(self.argv())


def load_suite(path: str | Path) -> tuple[str, list[Job]]:
    """(suite name, its jobs) of a suite file (a path, or the name of a shipped suite); a file read before and not
    changed since is not parsed again (the tables and the report ask for the same suites many times)."""
    p = Path(path)
    if not p.exists() and (SUITES / f"{path}.yaml").exists():
        p = SUITES / f"{path}.yaml"
    if not p.exists():
        raise ValueError(f"suite file not found: {path} (shipped suites: {', '.join(x.stem for x in SUITES.glob('*.yaml'))})")
    try:
        st = p.stat()
    except OSError as exc:
        raise ValueError(f"suite {p}: cannot read it ({exc})") from None
    name, jobs = _load_suite(str(p.resolve()), st.st_mtime_ns, st.st_size)
    return name, list(jobs)


@functools.lru_cache(maxsize=64)
def _load_suite(path: str, _mtime_ns: int, _size: int) -> tuple[str, tuple[Job, ...]]:
    p = Path(path)
    try:
        spec = yaml.load(p.read_text(), Loader=_YAML_LOADER) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"suite {p}: not valid YAML{where} ({getattr(exc, 'problem', None) or type(exc).__name__})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"suite {p}: cannot read it ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"suite {p}: must be a mapping with 'name' and 'jobs', got {type(spec).__name__}")
    unknown = sorted(map(str, set(spec) - SUITE_KEYS))
    if unknown:  # e.g. `seeds:` beside `jobs:` was silently ignored: every group ran without seeds
        raise ValueError(f"suite {p}: unknown top-level key(s) {unknown}; a suite file holds only name, jobs "
                         "and report (seeds, grid, args, stage and timeout belong in a job group)")
    if not isinstance(spec.get("jobs"), list) or not spec["jobs"]:
        raise ValueError(f"suite {p} must have a non-empty 'jobs' list")
    name = suite_name(spec["name"], p) if "name" in spec else _SAFE_CHARS.sub("_", p.stem)
    jobs: list[Job] = []
    for i, g in enumerate(spec["jobs"]):
        jobs += _group_jobs(g, f"suite {p}, job group {i}")
    hashes = [j.hash for j in jobs]
    if len(set(hashes)) != len(hashes):
        raise ValueError(f"suite {p} declares the same job twice")
    return name, tuple(jobs)


SUITE_KEYS = {"name", "jobs", "report"}  # report: what benchmarks/report shows of the suite
GROUP_KEYS = {"frontend", "command", "grid", "args", "seeds", "seed_flag", "timeout", "stage"}
_SAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SCALARS = (str, int, float, bool, type(None))
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where PyYAML has it (the same result)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _group_jobs(g: Any, where: str) -> list[Job]:
    """The jobs of one job group, every value checked first (``where``: the file and group, for the message): a
    word for frontend and command, mappings of scalars (or lists of them) for grid and args with no empty list,
    integer seeds, a ``--flag``, a positive timeout, a stage >= 0, and ``{placeholders}`` that name an arg."""
    if not isinstance(g, dict):
        raise ValueError(f"{where}: must be a mapping (frontend, command, ...), got {g!r}")
    unknown = set(g) - GROUP_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(map(str, unknown))}; a job group takes "
                         f"{', '.join(sorted(GROUP_KEYS))}")
    if "frontend" not in g or "command" not in g:
        raise ValueError(f"{where}: needs frontend and command, got {', '.join(sorted(map(str, g))) or 'neither'}")
    for key in ("frontend", "command"):
        if not isinstance(g[key], str) or not _WORD.match(g[key]):
            raise ValueError(f"{where}: {key} must be a command name (letters, digits, '-', '_'), got {g[key]!r}")
    grid, fixed = g.get("grid") or {}, g.get("args") or {}
    if not isinstance(grid, dict) or not isinstance(fixed, dict):
        raise ValueError(f"{where}: 'grid' and 'args' must be mappings")
    for part, table in (("grid", grid), ("args", fixed)):
        for k, v in table.items():
            if not isinstance(k, str) or not k:
                raise ValueError(f"{where}: {part} key {k!r} must be a flag name")
            items = v if isinstance(v, list) else [v]
            if part == "grid" and isinstance(v, list) and not v:
                raise ValueError(f"{where}: grid value {k!r} is an empty list (it would make no jobs)")
            for x in items:
                inner = x if isinstance(x, list) and part == "grid" else [x]
                if not all(isinstance(y, _SCALARS) for y in inner):
                    raise ValueError(f"{where}: {part} {k!r} holds a mapping or nested value {x!r}; give a string, "
                                     "number, true/false or a list of them")
    seeds = g.get("seeds", [None])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    if not seeds:
        raise ValueError(f"{where}: seeds is an empty list (it would make no jobs); leave it out for no seed flag")
    bad = [s for s in seeds if s is not None and not _is_int(s)]
    if bad:
        raise ValueError(f"{where}: seeds must be integers, got {bad[0]!r}")
    flag = g.get("seed_flag", "--seed")
    if not isinstance(flag, str) or not flag.startswith("--") or len(flag) < 3:
        raise ValueError(f"{where}: seed_flag must be a flag such as '--seed', got {flag!r}")
    timeout = g.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"{where}: timeout must be a number of seconds > 0, got {timeout!r}")
    stage = g.get("stage", 0)
    if not _is_int(stage) or stage < 0:
        raise ValueError(f"{where}: stage must be an integer >= 0, got {stage!r}")
    keys = sorted(grid)
    values = [v if isinstance(v, list) else [v] for v in (grid[k] for k in keys)]
    jobs = []
    for combo in itertools.product(*values):
        args = {**fixed, **dict(zip(keys, combo))}
        for seed in seeds:
            job = Job(g["frontend"], g["command"], tuple(sorted(args.items(), key=lambda kv: kv[0])), seed, flag,
                      timeout, stage)
            try:
                job.argv()
            except (KeyError, IndexError, ValueError) as exc:
                k, v = next(((k, v) for k, v in args.items() if isinstance(v, str) and "{" in v), ("?", "?"))
                raise ValueError(f"{where}: arg {k!r} = {v!r} uses a placeholder that is not an arg "
                                 f"({type(exc).__name__}: {exc}); known: {{job}}, {{seed}}, "
                                 f"{', '.join('{' + a + '}' for a in sorted(args))}") from None
            jobs.append(job)
    return jobs


def check_commands(jobs: list[Job], path: str | Path) -> None:
    """Every job's front-end is a ``suite`` command and its command one of that front-end's sub-commands, else a
    ``ValueError`` naming the suite file and the known names (before any job starts: a typo used to start every job
    and fail each). Front-ends' parsers are loaded only for the jobs given (the runner passes the unfinished ones)."""
    from importlib import metadata

    known = {ep.name for ep in metadata.entry_points(group="suite.cli")} | {"losses", "results"}
    for fe in sorted({j.frontend for j in jobs}):
        if fe not in known:
            raise ValueError(f"suite {path}: frontend {fe!r} is not a suite command (known: {', '.join(sorted(known))})")
    for fe in sorted({j.frontend for j in jobs}):
        commands = _commands_of(fe)
        for cmd in sorted({j.command for j in jobs if j.frontend == fe}):
            if commands is not None and cmd not in commands:
                raise ValueError(f"suite {path}: command {cmd!r} of frontend {fe!r} is unknown (known: "
                                 f"{', '.join(sorted(commands))})")


def _commands_of(frontend: str) -> set[str] | None:
    """The sub-commands of ``suite <frontend>`` (None when it has none or cannot be loaded: the job says why)."""
    if frontend == "bench":  # one module per benchmark command (loading them all would import every front-end)
        import pkgutil

        import benchmarks

        return {m.name.replace("_", "-") for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_")}
    from suite.cli import build_parser

    root = build_parser(only=frontend)
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices.get(frontend)
    nested = [a for a in getattr(parser, "_actions", []) if isinstance(a, argparse._SubParsersAction)]
    return set(nested[0].choices) if nested else None


def suite_name(name: Any, path: Path | str = "") -> str:
    """A suite's ``name`` becomes the folder ``results/bench-logs/<name>``: only letters, digits, ``.``, ``_``
    and ``-``, not starting with a dot (no ``..``, separators or absolute paths)."""
    if not isinstance(name, str) or not name or name.startswith(".") or _SAFE_CHARS.search(name):
        raise ValueError(f"suite {path}: name {name!r} must be letters, digits, '.', '_' or '-' and not start with "
                         f"'.' (it names the log folder results/bench-logs/<name>)")
    return name


def _signal_group(proc: subprocess.Popen, sig: int) -> None:  # type: ignore[type-arg]
    """Signal the job's whole process group (it leads its own session); the job alone if that fails."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class Runner:
    registry_url: str
    jobs: int = 1
    launcher: str = "local"
    nproc_per_node: int = 1
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    log_dir: Path = Path("results/bench-logs")
    dry_run: bool = False
    threads: int = 0  # threads per job process; 0 = max(1, cores // (jobs x processes per job))
    cores: int | None = None  # cores to share (default: those this process may run on)
    grace: float = 30.0  # seconds a job gets to stop after SIGTERM before its process group is killed
    failures: list[tuple[str, Path]] = field(default_factory=list)  # (job label, log) of the jobs that failed
    _procs: set[subprocess.Popen] = field(default_factory=set)  # type: ignore[type-arg]
    _pending: dict[str, Job] = field(default_factory=dict)  # not started yet
    _running: dict[str, tuple[Job, float]] = field(default_factory=dict)  # hash -> (job, start time)
    _durations: dict[str, list[float]] = field(default_factory=dict)  # "frontend command" -> seconds of finished jobs
    _done: int = 0
    _total: int = 0
    estimated: tuple[float, float, int] | None = None  # dry run: (job s, wall s, jobs without a duration)
    _rebuild: set[str] = field(default_factory=set)  # finished jobs run again: output gone, or runs only from dirty code
    _dirty: set[str] = field(default_factory=set)  # finished jobs whose every run comes from uncommitted code
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def command(self, job: Job) -> list[str]:
        if self.launcher == "torchrun":
            tr = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={self.nproc_per_node}",
                  f"--nnodes={self.nnodes}"]
            if self.nnodes > 1:
                if not self.rdzv_endpoint:
                    raise ValueError("--nnodes > 1 needs --rdzv-endpoint host:port")
                tr += ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.rdzv_endpoint}"]
            else:
                tr += ["--standalone"]
            return tr + ["-m", "suite", *job.argv()]
        if self.launcher != "local":
            raise ValueError(f"launcher must be local or torchrun, got {self.launcher!r}")
        return [sys.executable, "-m", "suite", *job.argv()]

    def thread_budget(self) -> int:
        """Threads per job process, so that jobs x processes per job x threads <= cores (``threads`` overrides)."""
        if self.threads:
            return self.threads
        procs = max(1, self.jobs) * (self.nproc_per_node if self.launcher == "torchrun" else 1)
        return max(1, (self.cores or available_cores()) // procs)

    def env(self, job: Job) -> dict[str, str]:
        """The child's environment: job hash, registry, and the thread budget (OpenMP / MKL / OpenBLAS, which
        torch's intra-op pool follows; ``SUITE_THREADS`` for front-ends that set torch threads themselves)."""
        t = str(self.thread_budget())
        env = {**os.environ, "SUITE_CONFIG_HASH": job.hash, "SUITE_REGISTRY": self.registry_url,
               "OMP_NUM_THREADS": t, "MKL_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "SUITE_THREADS": t}
        if self.launcher == "local":  # `python -m suite` asks for SIGTERM when this runner dies (suite.cli)
            env["SUITE_RUNNER_PID"] = str(os.getpid())
        if self.jobs > 1:
            env["SUITE_NO_PROGRESS"] = "1"
        return env

    def run_one(self, job: Job, reg: Registry) -> str:
        if self._stop.is_set():
            return "cancelled"
        if self.finished(job, reg):
            if not self.dry_run:
                self._end(job, None)
            return "skipped"
        if self.dry_run:
            print("would run:", " ".join(self.command(job)))
            return "dry-run"
        if not reg.claim_job(job.hash, job.label(), rerun=job.hash in self._rebuild):
            self._end(job, None)
            held = reg.job(job.hash) or {}
            if held.get("status") == "finished":
                return "skipped"
            print(f"[busy] {job.label()}  (running in pid {held.get('child_pid') or held.get('pid')} on "
                  f"{held.get('host')}; run again when it has ended)", flush=True)
            return "busy"
        with self._lock:
            self._pending.pop(job.hash, None)
            self._running[job.hash] = (job, time.monotonic())
        print(f"[start] {job.label()}\n{self.progress()}", flush=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{job.hash}.log"
        env = self.env(job)
        t0 = time.perf_counter()
        with open(log, "w") as fh:
            fh.write(" ".join(self.command(job)) + "\n")
            fh.flush()
            # its own session (process group): the runner signals the job with every process it starts
            proc = subprocess.Popen(self.command(job), stdout=fh, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            with self._lock:
                self._procs.add(proc)
                if self._stop.is_set():  # stop() ran between the check above and the start
                    _signal_group(proc, signal.SIGTERM)
            try:
                reg.set_job_child(job.hash, proc.pid)
                rc = proc.wait(timeout=job.timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=self.grace)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    rc = proc.wait()
            finally:
                with self._lock:
                    self._procs.discard(proc)
                if proc.poll() is None:  # the runner itself is failing: take the job down with it
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()
        status = "finished" if rc == 0 else ("interrupted" if self._stop.is_set() else f"failed (rc={rc}, log {log})")
        reg.finish_job(job.hash, status.split(" ")[0])
        took = time.perf_counter() - t0
        self._end(job, took if rc == 0 else None)
        if status.startswith("failed"):
            with self._lock:
                self.failures.append((job.label(), log))
        print(f"[{status}] {job.label()}  ({took:.1f} s)\n{self.progress()}", flush=True)
        return status

    @staticmethod
    def kind(job: Job) -> str:
        """What a job's duration is estimated from: its front-end and command (``graph tu``)."""
        return f"{job.frontend} {job.command}"

    def _end(self, job: Job, took: float | None) -> None:
        with self._lock:
            self._pending.pop(job.hash, None)
            self._running.pop(job.hash, None)
            self._done += 1
            if took is not None:
                self._durations.setdefault(self.kind(job), []).append(took)

    def eta(self) -> tuple[float, int]:
        """(seconds left, jobs with no recorded duration of their kind): the median duration of the finished
        jobs of the same front-end and command (registry, and this run's) for each pending job, what is left of
        it for each running one, divided by the jobs run in parallel."""
        now = time.monotonic()
        with self._lock:
            med = {k: statistics.median(v) for k, v in self._durations.items() if v}
            left = [(med.get(self.kind(j)), 0.0) for j in self._pending.values()]
            left += [(med.get(self.kind(j)), now - t0) for j, t0 in self._running.values()]
        known = sum(max(0.0, e - ran) for e, ran in left if e is not None)
        return known / max(1, self.jobs), sum(e is None for e, _ in left)

    def progress(self) -> str:
        """``[progress] 3/12 done, 2 running (...); ETA 4.2 min``."""
        now = time.monotonic()
        with self._lock:
            running = [f"{' '.join(j.argv())[:70]} ({now - t0:.0f} s)" for j, t0 in self._running.values()]
            done, total = self._done, self._total
        secs, unknown = self.eta()
        if unknown and secs == 0:
            eta = f"ETA unknown ({unknown} jobs of commands with no recorded duration yet)"
        else:
            eta = f"ETA {_duration(secs)}" + (f" + {unknown} jobs with no recorded duration" if unknown else "")
        return f"[progress] {done}/{total} done, {len(running)} running" + (
            f" ({'; '.join(running)})" if running else "") + f"; {eta}"

    def finished(self, job: Job, reg: Registry) -> bool:
        """Finished in the registry, and not a rebuild whose output is still missing (another runner on the same
        registry may have rebuilt it in the meantime: then it is not run a second time)."""
        if reg.job_status(job.hash) != "finished":
            return False
        if job.hash in self._dirty:  # its runs came from uncommitted code: finished once a clean run exists
            return not self.dirty_only([job], reg)
        return job.hash not in self._rebuild or ((out := job.output()) is not None and out.exists())

    @staticmethod
    def dirty_only(jobs: list[Job], reg: Registry) -> dict[str, str]:
        """{hash: code versions} of the finished jobs whose every finished run comes from uncommitted code (a code
        version ending ``-dirty``): no table uses those runs, so the jobs run again."""
        out = {}
        for j in jobs:
            if reg.job_status(j.hash) != "finished":
                continue
            versions = {str(r.get("code_version") or "") for r in reg.runs(status="finished", config_hash=j.hash)}
            if versions and all(v.endswith("-dirty") for v in versions):
                out[j.hash] = ", ".join(sorted(versions))
        return out

    def lost_outputs(self, jobs: list[Job], reg: Registry) -> dict[str, Path]:
        """{hash: folder} of the finished jobs whose output folder (:meth:`Job.output`) is gone while a job of a later
        stage that names the folder in its args (``init``, ``checkpoint``...) has still to run: it reads what the
        earlier job made (a pretrained encoder, a start model), so these jobs run again, and the new run supersedes the old one in the registry. Their config and seed are
        recorded, so the rebuilt output is the same run again."""
        status = {j.hash: reg.job_status(j.hash) for j in jobs}
        todo = [j for j in jobs if status[j.hash] != "finished"]

        def read_later(j: Job, out: Path) -> bool:  # a job still to run, of a later stage, names ``out`` in its args
            return any(t.stage > j.stage and any(isinstance(v, str) and v and k != "out" and resolve_model_path(v) == out
                                                 for k, v in t.values()) for t in todo)

        return {j.hash: out for j in jobs if status[j.hash] == "finished" and (out := j.output()) is not None
                and not out.exists() and read_later(j, out)}

    def estimate(self, jobs: list[Job], reg: Registry) -> tuple[float, float, int]:
        """(job seconds, wall seconds, jobs with no recorded duration) of the jobs not finished yet: each takes the
        median recorded duration of its front-end and command (:meth:`Registry.job_durations`); the wall time
        schedules them longest first on ``self.jobs`` slots, stage after stage."""
        med = {k: statistics.median(v) for k, v in reg.job_durations().items() if v}
        total, wall, unknown = 0.0, 0.0, 0
        for stage in sorted({j.stage for j in jobs}):
            ts = []
            for j in jobs:
                if j.stage != stage or self.finished(j, reg):
                    continue
                if self.kind(j) in med:
                    ts.append(med[self.kind(j)])
                else:
                    unknown += 1
            slots = [0.0] * max(1, self.jobs)
            for t in sorted(ts, reverse=True):
                slots[slots.index(min(slots))] += t
            total, wall = total + sum(ts), wall + max(slots)
        return total, wall, unknown

    def stop(self) -> None:
        """Stop scheduling and send SIGTERM to every running job's process group (their runs are marked
        interrupted); a group still alive after ``grace`` seconds gets SIGKILL."""
        self._stop.set()
        with self._lock:
            procs = [p for p in self._procs if p.poll() is None]
        for p in procs:
            _signal_group(p, signal.SIGTERM)
        if procs:
            timer = threading.Timer(self.grace, self.kill_all)
            timer.daemon = True
            timer.start()

    def kill_all(self) -> None:
        """SIGKILL every job's process group that is still running (the runner is going away)."""
        with self._lock:
            procs = [p for p in self._procs if p.poll() is None]
        for p in procs:
            _signal_group(p, signal.SIGKILL)

    def run(self, jobs: list[Job]) -> dict[str, int]:
        """Run the jobs stage by stage (a stage starts when the previous one has ended; after a stage with a failed
        job the later stages are not started but counted ``blocked``: they use what the earlier stages make)."""
        reg = Registry(self.registry_url)
        counts: dict[str, int] = {}
        lost = self.lost_outputs(jobs, reg)
        from suite.registry import schema

        # runs from uncommitted code run again from a commit (from uncommitted code again they would stay -dirty)
        dirty = {} if schema.code_version().endswith("-dirty") else self.dirty_only(jobs, reg)
        self._rebuild, self._dirty = set(lost) | set(dirty), set(dirty) - set(lost)
        for j in jobs:
            if j.hash in lost:
                print(f"[rebuild] {j.label()}  (finished, but its output {lost[j.hash]} is gone and a later stage "
                      "reads it: it runs again, and its new run supersedes the old one)", flush=True)
            elif j.hash in dirty:
                print(f"[rerun] {j.label()}  (finished, but only from uncommitted code ({dirty[j.hash]}): it runs "
                      "again from this commit, and its new run supersedes the old one)", flush=True)
        if self.dry_run:
            total, wall, unknown = self.estimate(jobs, reg)
            self.estimated = (total, wall, unknown)
            print(f"estimate: {_duration(total)} of job time, about {_duration(wall)} wall with {self.jobs} at a time "
                  f"(median durations of finished jobs of each front-end and command in the registry)"
                  + (f"; {unknown} jobs of commands with no recorded duration not counted" if unknown else ""))
        with self._lock:
            self._pending = {j.hash: j for j in jobs}
            self._running, self._done, self._total = {}, 0, len(jobs)
            if not self.dry_run:
                for k, v in reg.job_durations().items():
                    self._durations.setdefault(k, []).extend(v)
        failed_stage: int | None = None
        for stage in sorted({j.stage for j in jobs}):
            if failed_stage is not None:  # a later stage uses what earlier stages make: not started on a failure
                for j in (j for j in jobs if j.stage == stage):
                    self._end(j, None)
                    counts["blocked"] = counts.get("blocked", 0) + 1
                    print(f"[blocked] {j.label()}  (stage {stage} waits for stage {failed_stage}, which has failed "
                          f"job(s); fix them and run again)", flush=True)
                continue
            with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
                futures = [pool.submit(self.run_one, j, reg) for j in jobs if j.stage == stage]
                try:
                    for f in futures:
                        s = f.result().split(" ")[0]
                        counts[s] = counts.get(s, 0) + 1
                        if s in ("failed", "cancelled", "interrupted") and failed_stage is None:
                            failed_stage = stage
                except KeyboardInterrupt:
                    self.stop()
                    raise
        return counts


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run a benchmark suite (grid of front-end jobs), skipping finished ones")
    p.add_argument("suite", help="suite YAML file, or the name of a shipped suite (quick, cpu, paper)")
    p.add_argument("--jobs", type=int, default=1, help="jobs run in parallel")
    p.add_argument("--threads", type=int, default=0,
                   help="threads per job (OMP/MKL/torch; default: cores // jobs, so jobs x threads <= cores)")
    p.add_argument("--registry", default=None, help="registry path or SQLAlchemy URL (default $SUITE_REGISTRY)")
    p.add_argument("--launcher", choices=["local", "torchrun"], default="local")
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--rdzv-endpoint", default=None, help="host:port for multi-node torchrun")
    p.add_argument("--dry-run", action="store_true", help="print the commands that would run and the time they would "
                                                           "take, from durations recorded in the registry")
    p.add_argument("--only", default=None, metavar="REGEX",
                   help="run only the jobs whose command line matches this regular expression (a part of a grid)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="run although tracked code differs from the commit (a try-out: runs are recorded as -dirty)")
    p.add_argument("--budget", type=float, default=0.0,
                   help="with --dry-run: exit 1 if the estimated wall time exceeds this many seconds (or a job's "
                        "duration is unknown)")
    p.set_defaults(func=_main)


def require_committed_code(allow_dirty: bool) -> None:
    """Benchmark runs record the commit their code is, so it must name code that exists: a checkout whose tracked code
    differs from its commit is refused (results files and prose may differ), unless ``allow_dirty`` (a try-out; its
    runs are recorded with a ``-dirty`` code version) or ``$SUITE_ALLOW_DIRTY=1``."""
    from suite.registry.schema import code_version

    if allow_dirty or os.environ.get("SUITE_ALLOW_DIRTY") == "1":
        return
    version = code_version()
    if version.endswith("-dirty"):
        raise ValueError(f"uncommitted code changes (commit {version[:-6]} plus `git status`): benchmark runs must come "
                         "from committed code, so that their recorded code version names code that exists; commit "
                         "first, or pass --allow-dirty for a try-out (its runs are recorded as -dirty)")


def _main(args: argparse.Namespace) -> int:
    from suite.paths import registry_url

    name, jobs = load_suite(args.suite)
    if args.only:
        try:
            pattern = re.compile(args.only)
        except re.error as exc:
            raise ValueError(f"--only {args.only!r} is not a regular expression ({exc})") from None
        jobs = [j for j in jobs if pattern.search(j.label())]
        if not jobs:
            raise ValueError(f"--only {args.only!r} matches no job of suite {name}")
    if not args.dry_run:
        require_committed_code(args.allow_dirty)
    url = args.registry or registry_url()
    runner = Runner(url, jobs=args.jobs, launcher=args.launcher, nproc_per_node=args.nproc_per_node,
                    nnodes=args.nnodes, rdzv_endpoint=args.rdzv_endpoint, log_dir=Path("results/bench-logs") / name,
                    dry_run=args.dry_run, threads=args.threads)
    if args.jobs < 1 or args.threads < 0:
        raise ValueError(f"--jobs must be >= 1 and --threads >= 0, got --jobs {args.jobs} --threads {args.threads}")
    check_commands(_unfinished(jobs, url), args.suite)

    rc = execute(runner, name, jobs)
    if args.budget and runner.estimated is not None:
        _, wall, unknown = runner.estimated
        ok = wall <= args.budget and not unknown
        print(f"budget {_duration(args.budget)}: {'fits' if ok else 'EXCEEDED or unknown'} (estimated wall "
              f"{_duration(wall)}" + (f", {unknown} jobs without a recorded duration" if unknown else "") + ")")
        return rc or (0 if ok else 1)
    return rc


def _unfinished(jobs: list[Job], url: str) -> list[Job]:
    """The jobs the registry has not recorded finished (all of them when the registry file does not exist yet; it is
    not created here)."""
    if "://" not in url and not Path(url).expanduser().exists():
        return jobs
    reg = Registry(url)
    return [j for j in jobs if reg.job_status(j.hash) != "finished"]


def execute(runner: Runner, name: str, jobs: list[Job]) -> int:
    """Run the suite in this (main) thread; SIGTERM / SIGHUP / Ctrl-C stop it and its jobs, and any exit of
    the runner takes its jobs' process groups down (a SIGKILLed runner: see ``SUITE_RUNNER_PID`` in suite.cli)."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGHUP)}
    atexit.register(runner.kill_all)
    print(f"suite {name}: {len(jobs)} jobs, {runner.jobs} at a time x {runner.thread_budget()} threads "
          f"({available_cores()} cores), registry {runner.registry_url}", flush=True)
    try:
        counts = runner.run(jobs)
    except KeyboardInterrupt:
        runner.stop()
        print("interrupted: finished jobs are kept; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if runner.failures:
        print(f"{len(runner.failures)} job(s) failed; their logs:")
        for label, log in runner.failures:
            print(f"  {label}\n    log: {log}")
    return 0 if all(k in ("finished", "skipped", "dry-run", "busy") for k in counts) else 1  # blocked, failed: 1


def _duration(secs: float) -> str:
    return f"{secs:.0f} s" if secs < 90 else (f"{secs / 60:.1f} min" if secs < 5400 else f"{secs / 3600:.1f} h")
