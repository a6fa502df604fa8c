"""Suite files: a declared grid of jobs, each one command line of a front-end's own CLI (run by :mod:`benchmarks.runner.run`).

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
        log_to: tensorboard,mlflow # trackers the training commands send step curves to (--log-to), and
        mlflow_uri: http://host:5000  # where MLflow's go (--mlflow-uri); run options, so not part of the job hash;
                                   # beside `name` and `jobs` they apply to every group that names none
        resources: {gpus: 1, cpus: 4, mem: 16G, time: "4:00:00", partition: gpu, account: lab,
                    options: {constraint: a100}}  # what a cluster executor asks for (--executor slurm|ray); beside
                                   # `jobs`: every group's defaults, a group's own replace them key by key; not hashed;
                                   # {nodes: 2, tasks: 4}: one run on 8 processes (SLURM's srun tasks)

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
import dataclasses
import functools
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from suite.config import UniqueKeyLoader
from suite.paths import resolve_model_path
from suite.registry import config_hash

SUITES = Path(__file__).resolve().parents[1] / "suites"
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
    log_to: str = ""  # run options passed as --log-to / --mlflow-uri: not part of the hash
    mlflow_uri: str = ""
    resources: tuple[tuple[str, Any], ...] = ()  # what a cluster executor asks for (``resources:``): not in the hash
    data: tuple[tuple[str, str], ...] = ()  # the suite's data roots: (placeholder, environment variable); not hashed

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
        ctx = {**{k: v for k, v in self.args}, "seed": self.seed, "job": self.hash[:12],
               **{name: os.environ.get(env) or f"${env}" for name, env in self.data}}
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
        if self.log_to:
            out += ["--log-to", self.log_to]
        if self.mlflow_uri:
            out += ["--mlflow-uri", self.mlflow_uri]
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
    if "not_run" in spec and not (isinstance(spec["not_run"], dict) and all(
            isinstance(v, str) and v.strip() for v in spec["not_run"].values())):
        raise ValueError(f"suite {p}: not_run must map a paper's table or row to why the suite does not run it")
    if not isinstance(spec.get("jobs"), list) or not spec["jobs"]:
        raise ValueError(f"suite {p} must have a non-empty 'jobs' list")
    name = suite_name(spec["name"], p) if "name" in spec else _SAFE_CHARS.sub("_", p.stem)
    jobs: list[Job] = []
    tracking = _tracking(spec, f"suite {p}", {})
    resources = _resources(spec.get("resources"), f"suite {p}", {})
    data = _data(spec.get("data"), f"suite {p}")
    roots = tuple(sorted((k, v["env"]) for k, v in data.items()))
    for i, g in enumerate(spec["jobs"]):
        jobs += [dataclasses.replace(j, data=roots) if roots else j
                 for j in _group_jobs(g, f"suite {p}, job group {i}", tracking, resources, roots)]
    hashes = [j.hash for j in jobs]
    if len(set(hashes)) != len(hashes):
        raise ValueError(f"suite {p} declares the same job twice")
    return name, tuple(jobs)


TRACKING_KEYS = {"log_to", "mlflow_uri"}  # run options of every training command: a suite's or a group's
SUITE_KEYS = {"name", "jobs", "report", "resources", "data", "not_run"} | TRACKING_KEYS  # report: what benchmarks/report shows of the suite
GROUP_KEYS = {"frontend", "command", "grid", "args", "seeds", "seed_flag", "timeout", "stage", "resources"} | TRACKING_KEYS
# what a group reproduces and the papers' settings with their sources, and our readings of each departure
# (:mod:`benchmarks.runner.explain`; ``bench run --dry-run --explain``): documentation, never part of a job's hash
GROUP_KEYS |= {"reproduces", "paper", "readings"}
# what a job asks a cluster executor for (``resources:`` beside ``jobs``: the suite's defaults; in a group: its own,
# key by key); the local executor ignores them. ``options``: further scheduler options as they are spelled there
# (sbatch's long options without ``--``, e.g. {constraint: a100, qos: high}; for Ray, custom resources).
RESOURCE_KEYS = {"gpus": "an integer >= 0", "cpus": "an integer >= 1", "nodes": "an integer >= 1",
                 "tasks": "an integer >= 1", "mem": "a size such as 16G or a number of GB",
                 "time": "minutes (an integer) or H:MM:SS", "partition": "a string", "account": "a string",
                 "options": "a mapping of scheduler option -> value"}
_SAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_SCALARS = (str, int, float, bool, type(None))
_YAML_LOADER = UniqueKeyLoader  # libyaml's parser where PyYAML has it; a key given twice is refused, naming it


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _tracking(spec: dict[str, Any], where: str, default: dict[str, str]) -> dict[str, str]:
    """``log_to`` / ``mlflow_uri`` of a suite or a group (``default``: the suite's), checked: strings, trackers the
    suite knows (their packages are the job's to find: a missing one is its first line)."""
    from suite.train.trackers import KNOWN

    out = dict(default)
    for key in sorted(TRACKING_KEYS & set(spec)):
        value = spec[key]
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key} must be a string (log_to: tensorboard,mlflow), got {value!r}")
        out[key] = value
    unknown = [n for n in (s.strip() for s in out.get("log_to", "").split(",")) if n and n not in KNOWN]
    if unknown:
        raise ValueError(f"{where}: log_to names an unknown tracker {unknown[0]!r}; choose from "
                         f"{', '.join(sorted(KNOWN))} (comma-separated)")
    return out


def _resources(value: Any, where: str, default: dict[str, Any]) -> dict[str, Any]:
    """A ``resources:`` mapping (:data:`RESOURCE_KEYS`) checked, over ``default`` (the suite's) key by key."""
    if value is None:
        return dict(default)
    if not isinstance(value, dict):
        raise ValueError(f"{where}: resources must be a mapping ({', '.join(sorted(RESOURCE_KEYS))}), got {value!r}")
    out = dict(default)
    for k, v in value.items():
        if k not in RESOURCE_KEYS:
            raise ValueError(f"{where}: resources key {k!r} is unknown; known: {', '.join(sorted(RESOURCE_KEYS))}")
        ok = {"gpus": lambda x: _is_int(x) and x >= 0, "cpus": lambda x: _is_int(x) and x >= 1,
              "nodes": lambda x: _is_int(x) and x >= 1, "tasks": lambda x: _is_int(x) and x >= 1,
              "mem": lambda x: (isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0)
              or (isinstance(x, str) and re.fullmatch(r"\d+(\.\d+)?[KMGT]?B?", x, re.I) is not None),
              "time": lambda x: (_is_int(x) and x > 0) or (isinstance(x, str) and re.fullmatch(
                  r"(\d+-)?\d+(:\d\d){0,2}", x) is not None),
              "partition": lambda x: isinstance(x, str) and bool(x), "account": lambda x: isinstance(x, str) and bool(x),
              "options": lambda x: isinstance(x, dict) and all(isinstance(a, str) and isinstance(b, _SCALARS)
                                                               for a, b in x.items())}[k]
        if not ok(v):
            raise ValueError(f"{where}: resources {k} must be {RESOURCE_KEYS[k]}, got {v!r}")
        out[k] = {**out.get("options", {}), **v} if k == "options" else v
    return out


# a suite's data roots (``data:`` beside ``jobs``): {placeholder: {env, layout, images}}; a job's args name a root as
# ``{placeholder}``, filled from the environment variable when the job runs, so the job (and its hash) does not
# depend on where a machine keeps the data
DATA_KEYS = {"env": "an environment variable name", "layout": "a string describing the expected layout",
             "images": "the number of training images (GPU-hour estimates)"}


def _data(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """A ``data:`` mapping checked: each root a word, with an ``env`` variable and a ``layout``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: data must be a mapping of root name -> {{env, layout, images}}, got {value!r}")
    out = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _WORD.match(name) or not isinstance(spec, dict):
            raise ValueError(f"{where}: data {name!r} must be a word mapped to {{env, layout, images}}")
        unknown = set(spec) - set(DATA_KEYS)
        if unknown:
            raise ValueError(f"{where}: data {name}: unknown key(s) {sorted(map(str, unknown))}; known: "
                             f"{', '.join(sorted(DATA_KEYS))}")
        if not isinstance(spec.get("env"), str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec["env"]):
            raise ValueError(f"{where}: data {name}: env must be {DATA_KEYS['env']}, got {spec.get('env')!r}")
        if not isinstance(spec.get("layout"), str):
            raise ValueError(f"{where}: data {name}: layout must be {DATA_KEYS['layout']}")
        if "images" in spec and not (_is_int(spec["images"]) and spec["images"] > 0):
            raise ValueError(f"{where}: data {name}: images must be an integer > 0, got {spec['images']!r}")
        out[name] = dict(spec)
    return out


PAPER_KEYS = {"value", "source", "quote"}


def check_paper(g: dict[str, Any], where: str) -> None:
    """A group's (:mod:`benchmarks.runner.explain`) ``reproduces`` (a string), ``paper`` (setting -> {value, source, quote?}) and ``readings`` (setting ->
    a reason), checked when the suite is loaded: one line naming the group and the key."""
    if "reproduces" in g and not (isinstance(g["reproduces"], str) and g["reproduces"].strip()):
        raise ValueError(f"{where}: reproduces must be a string naming the table or figure, got {g['reproduces']!r}")
    paper, readings = g.get("paper") or {}, g.get("readings") or {}
    if not isinstance(paper, dict) or not isinstance(readings, dict):
        raise ValueError(f"{where}: paper and readings must be mappings of setting -> ...")
    for k, v in paper.items():
        if not isinstance(v, dict) or "value" not in v or not isinstance(v.get("source"), str) or set(v) - PAPER_KEYS:
            raise ValueError(f"{where}: paper {k!r} must be {{value, source, quote?}} (value null where the paper is "
                             f"silent), got {v!r}")
    for k, v in readings.items():
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{where}: reading {k!r} must be a sentence saying why, got {v!r}")


def data_of(path: str | Path) -> dict[str, dict[str, Any]]:
    """The ``data:`` roots a suite file declares ({} without)."""
    p = Path(path)
    if not p.exists() and (SUITES / f"{path}.yaml").exists():
        p = SUITES / f"{path}.yaml"
    spec = yaml.load(p.read_text(), Loader=_YAML_LOADER) or {}
    return _data(spec.get("data") if isinstance(spec, dict) else None, f"suite {p}")


def missing_data(path: str | Path, jobs: list[Job]) -> list[str]:
    """One line per data root the jobs use whose environment variable is unset or names nothing: the variable, what
    it should hold and the expected layout."""
    used = {name for j in jobs for name, _ in j.data if any(isinstance(v, str) and "{" + name + "}" in v
                                                           for _, v in j.args)}
    out = []
    for name, spec in sorted(data_of(path).items()):
        if name not in used:
            continue
        where = os.environ.get(spec["env"])
        first = (where or "").split("::")[0]
        # a shard pattern: its folder (the part before the first brace); a folder: itself
        probe = Path(re.sub(r"\{[^}]*\}.*$", "", first)).parent if "{" in first else Path(first)
        if not where or not probe.exists():
            out.append(f"data {name}: ${spec['env']} is " + (f"{where}, which does not exist" if where else "not set")
                       + f"; expected {spec['layout']}")
    return out


def resources_of(job: Job) -> dict[str, Any]:
    """A job's ``resources:`` as a mapping (``options`` a mapping too)."""
    return {k: dict(v) if k == "options" else v for k, v in job.resources}


def _group_jobs(g: Any, where: str, tracking: dict[str, str] | None = None,
                resources: dict[str, Any] | None = None, data: tuple[tuple[str, str], ...] = ()) -> list[Job]:
    """The jobs of one job group, every value checked first (``where``: the file and group, for the message): a
    word for frontend and command, mappings of scalars (or lists of them) for grid and args with no empty list,
    integer seeds, a ``--flag``, a positive timeout, a stage >= 0, and ``{placeholders}`` that name an arg;
    ``tracking``: the suite's ``log_to`` / ``mlflow_uri``, which the group's own replace."""
    if not isinstance(g, dict):
        raise ValueError(f"{where}: must be a mapping (frontend, command, ...), got {g!r}")
    unknown = set(g) - GROUP_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(map(str, unknown))}; a job group takes "
                         f"{', '.join(sorted(GROUP_KEYS))}")
    check_paper(g, where)
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
    tracking = _tracking(g, where, tracking or {})
    res = _resources(g.get("resources"), where, resources or {})
    frozen = tuple(sorted((k, tuple(sorted(v.items())) if k == "options" else v) for k, v in res.items()))
    if tracking.get("mlflow_uri") and "mlflow" not in [n.strip() for n in tracking.get("log_to", "").split(",")]:
        raise ValueError(f"{where}: mlflow_uri is set but log_to does not name mlflow")
    # a grid key that is also an arg replaces it: a group's args are often a YAML anchor shared with other groups,
    # and the grid varies one of them (text-sts, vision-cifar-paper...); a key twice in one mapping is refused above
    keys = sorted(grid)
    values = [v if isinstance(v, list) else [v] for v in (grid[k] for k in keys)]
    jobs = []
    for combo in itertools.product(*values):
        args = {**fixed, **dict(zip(keys, combo))}
        for seed in seeds:
            job = Job(g["frontend"], g["command"], tuple(sorted(args.items(), key=lambda kv: kv[0])), seed, flag,
                      timeout, stage, **tracking, resources=frozen, data=data)
            try:
                job.argv()
            except (KeyError, IndexError, ValueError) as exc:
                k, v = next(((k, v) for k, v in args.items() if isinstance(v, str) and "{" in v), ("?", "?"))
                raise ValueError(f"{where}: arg {k!r} = {v!r} uses a placeholder that is not an arg "
                                 f"({type(exc).__name__}: {exc}); known: {{job}}, {{seed}}, "
                                 f"{', '.join('{' + a + '}' for a in sorted([*args, *dict(data)]))}") from None
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
    if frontend == "bench":  # a module (or package) per benchmark command (loading them would import every front-end)
        from benchmarks.cli import candidates

        return candidates()
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


