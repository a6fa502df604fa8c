"""``suite bench run <suite.yaml>``: run the jobs of a suite file (:mod:`benchmarks.runner.suitefile`) through the
front-ends' own CLIs, claimed in the registry's ``jobs`` table, resumable, in parallel up to ``--jobs``; see the
suite file module for the whole contract."""
from __future__ import annotations

import argparse
import atexit
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

from benchmarks.runner.suitefile import Job, _loss_origin, check_commands, load_suite, missing_data
from suite.config import LOSS_SHA_ENV
from suite.paths import resolve_model_path
from suite.registry import Registry


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
    whole: list[Job] = field(default_factory=list)  # every job of the suite (``--only`` runs a part): durations
    _rebuild: set[str] = field(default_factory=set)  # finished jobs run again: output gone, or runs only from dirty code
    _dirty: set[str] = field(default_factory=set)  # finished jobs whose every run comes from uncommitted code
    _stale: set[str] = field(default_factory=set)  # finished jobs whose input (an exported model) changed since
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    executor: Any = None  # a cluster executor (benchmarks.runner.executors.ClusterExecutor); None: local processes
    claim_options: dict[str, Any] = field(default_factory=dict)  # a job's process on a node: how it takes its row

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
        origin = _loss_origin(dict(job.args).get("loss"))
        if origin:  # the user's loss source the job's hash was made with: the child refuses another (suite.config)
            env[LOSS_SHA_ENV] = origin["sha256"]
        else:
            env.pop(LOSS_SHA_ENV, None)
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
        log = self.log_dir / f"{job.hash}.log"
        if not reg.claim_job(job.hash, job.label(), rerun=job.hash in self._rebuild, **self.claim_options):
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
        t0 = time.perf_counter()
        rc = self.spawn(job, log, append=bool(self.claim_options.get("requeues")), child=reg.set_job_child)
        status = "finished" if rc == 0 else ("interrupted" if self._stop.is_set() else f"failed (rc={rc}, log {log})")
        reg.finish_job(job.hash, status.split(" ")[0], only_if=("running",))  # a cancelled job stays cancelled
        took = time.perf_counter() - t0
        self._end(job, took if rc == 0 else None)
        if status.startswith("failed"):
            with self._lock:
                self.failures.append((job.label(), log))
        print(f"[{status}] {job.label()}  ({took:.1f} s)\n{self.progress()}", flush=True)
        return status

    def spawn(self, job: Job, log: Path, append: bool = False, child: Any = None) -> int:
        """Run the job's command in its own session (process group: the runner signals every process it starts), its
        output to ``log`` (``append``: a requeued job's log goes on); ``child(hash, pid)`` is told its pid. Its
        ``timeout`` ends it with SIGTERM, then SIGKILL after ``grace``. The exit code."""
        with open(log, "a" if append else "w") as fh:
            fh.write(" ".join(self.command(job)) + "\n")
            fh.flush()
            proc = subprocess.Popen(self.command(job), stdout=fh, stderr=subprocess.STDOUT, env=self.env(job),
                                    start_new_session=True)
            with self._lock:
                self._procs.add(proc)
                if self._stop.is_set():  # stop() ran between the check above and the start
                    _signal_group(proc, signal.SIGTERM)
            try:
                if child is not None:
                    child(job.hash, proc.pid)
                return proc.wait(timeout=job.timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGTERM)
                try:
                    return proc.wait(timeout=self.grace)
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    return proc.wait()
            finally:
                with self._lock:
                    self._procs.discard(proc)
                if proc.poll() is None:  # the runner itself is failing: take the job down with it
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()

    @staticmethod
    def kind(job: Job) -> str:
        """What a job's duration is estimated from: its front-end and command (``graph tu``)."""
        return f"{job.frontend} {job.command}"

    def _end(self, job: Job, took: float | None) -> None:
        with self._lock:  # once per job: a job found finished up front is not counted again when its turn comes
            if self._pending.pop(job.hash, None) is not None or self._running.pop(job.hash, None) is not None:
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
        if job.hash in self._stale:  # its input changed: finished once a run from the present input exists
            return not self.stale_inputs([job], reg)
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

    @staticmethod
    def stale_inputs(jobs: list[Job], reg: Registry) -> dict[str, str]:
        """{hash: why} of the finished jobs whose input changed after their run read it, so they run again (their new
        run supersedes the old one); the data a run read counts too (:func:`_data_changed`: ``data changed: ...``).
        An input is an arg (not ``out``) naming an exported model, a folder with the run
        owner's record (a pretrained encoder a fine-tuning starts from, a model an evaluation scores).

        A run records what it read (``run_options["inputs"]``, :func:`suite.inputs.input_identities`): it
        is stale when the folder's files now have another digest. A rebuild that made the same files leaves it alone.
        A run from before inputs were recorded is stale when the run that made the folder now (its record's run id)
        ended after this run started, unless the run it replaced, the one this run read, reproduced it: the same
        training loss at every epoch (:func:`_same_training`). Where the folder is gone or was made outside the
        registry, nothing is known and the job is left alone."""
        from suite.inputs import input_identity

        seen: dict[str, dict[str, Any] | None] = {}
        out = {}
        for j in jobs:
            specs = [v for k, v in j.values() if k != "out" and isinstance(v, str) and v.strip()]
            for v in specs:
                if v not in seen:
                    seen[v] = input_identity(v)
            idents = {v: i for v in specs if (i := seen[v]) is not None}
            if reg.job_status(j.hash) != "finished":
                continue
            runs = reg.runs(status="finished", config_hash=j.hash)
            if runs and (why := (_stale_reason(runs[-1], idents, reg) if idents else None) or _data_changed(runs[-1])):
                out[j.hash] = why
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

    def _mark_stale(self, jobs: list[Job], reg: Registry) -> None:
        """Mark the finished jobs among ``jobs`` whose input changed (:meth:`stale_inputs`) to run again, and say why;
        one counted done already goes back to the pending ones."""
        for h, why in self.stale_inputs(jobs, reg).items():
            job = next(j for j in jobs if j.hash == h)
            with self._lock:
                self._rebuild.add(h)
                self._stale.add(h)
                if h not in self._pending and h not in self._running and self._total:
                    self._pending[h] = job
                    self._done -= 1
            print(f"[rerun] {job.label()}  (finished, but {why}: it runs again, and its new run supersedes the old "
                  "one)", flush=True)

    def durations(self, jobs: list[Job], reg: Registry) -> dict[str, list[float]]:
        """Seconds of the finished jobs by front-end and command: those the runner recorded
        (:meth:`Registry.job_durations`), and those of ``jobs`` and the whole suite (:attr:`whole`) imported from a
        snapshot (their rows have no command; the job says its kind)."""
        out = reg.job_durations()
        kinds = {j.hash: self.kind(j) for j in [*self.whole, *jobs]}
        for h, secs in reg.imported_job_seconds(list(kinds)).items():
            out.setdefault(kinds[h], []).append(secs)
        return out

    def estimate(self, jobs: list[Job], reg: Registry) -> tuple[float, float, int]:
        """(job seconds, wall seconds, jobs with no recorded duration) of the jobs not finished yet: each takes the
        median recorded duration of its front-end and command (:meth:`durations`); the wall time schedules them
        longest first on ``self.jobs`` slots, stage after stage."""
        med = {k: statistics.median(v) for k, v in self.durations(jobs, reg).items() if v}
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
        if self.executor is not None:
            self.executor.stop()
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
        self._mark_stale([j for j in jobs if j.hash not in self._rebuild], reg)
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
                for k, v in self.durations(jobs, reg).items():
                    self._durations.setdefault(k, []).extend(v)
        if not self.dry_run:  # jobs finished before this run are done from the first progress line on, not left
            for j in jobs:    # in the ETA until the pool reaches them
                if self.finished(j, reg):
                    self._end(j, None)
        failed_stage: int | None = None
        for stage in sorted({j.stage for j in jobs}):
            if failed_stage is not None:  # a later stage uses what earlier stages make: not started on a failure
                for j in (j for j in jobs if j.stage == stage):
                    self._end(j, None)
                    counts["blocked"] = counts.get("blocked", 0) + 1
                    print(f"[blocked] {j.label()}  (stage {stage} waits for stage {failed_stage}, which has failed "
                          f"job(s); fix them and run again)", flush=True)
                continue
            if stage != min(j.stage for j in jobs) and not self.dry_run:  # an earlier stage may have rebuilt an input
                self._mark_stale([j for j in jobs if j.stage == stage and j.hash not in self._rebuild], reg)
            if self.executor is not None:  # a cluster: the stage's jobs submitted, followed to their ends
                try:
                    statuses = self.executor.run_stage(self, [j for j in jobs if j.stage == stage], reg)
                except KeyboardInterrupt:
                    self.stop()
                    raise
                for s in (x.split(" ")[0] for x in statuses):
                    counts[s] = counts.get(s, 0) + 1
                    if s in ("failed", "cancelled", "interrupted") and failed_stage is None:
                        failed_stage = stage
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


def _stale_reason(run: dict[str, Any], idents: dict[str, dict[str, Any]], reg: Registry) -> str | None:
    """Why the finished ``run`` read other inputs than ``idents`` ({arg value: its identity now}), or None
    (:meth:`Runner.stale_inputs`)."""
    from suite.inputs import recorded_inputs

    if (recorded := recorded_inputs(run)) is not None:
        read = {str(resolve_model_path(e["path"])): e for e in recorded.values() if isinstance(e, dict) and e.get("path")}
        for v, now in idents.items():
            then = read.get(str(resolve_model_path(v)))
            if then is not None and then.get("files") != now["files"]:
                return (f"its input {v} has changed since it read it (files {then.get('files')} then, {now['files']} "
                        f"now, made by run {str(now['run_id'])[:8]})")
        return None
    for v, now in idents.items():  # a run from before inputs were recorded
        try:
            maker = reg.get(str(now["run_id"]))
        except KeyError:  # made outside this registry: nothing to compare
            continue
        if not maker.get("ended_at") or maker["ended_at"] <= run["started_at"]:
            continue
        earlier = [r for r in reg.runs(config_hash=maker["config_hash"]) if r["id"] != maker["id"]
                   and r.get("ended_at") and r["ended_at"] <= run["started_at"]]
        last = max(earlier, key=lambda r: r["ended_at"], default=None)
        if last is not None and _same_training(last["id"], maker["id"], reg):
            continue
        return (f"its input {v} was made again by run {maker['id'][:8]} (ended {maker['ended_at'][:16]}) after it "
                f"started ({run['started_at'][:16]}), " + ("with another training loss than run "
                f"{last['id'][:8]}, which it read" if last is not None else "and no earlier run made it here")
                + ", and it recorded no digest of what it read")
    return None


def _data_changed(run: dict[str, Any]) -> str | None:
    """``data changed: <files>`` where the data the finished ``run`` recorded reading (its run options' ``data``) is
    other data now at the path it read, else None (a run from before data was recorded: nothing known)."""
    from suite.inputs import data_changes, data_identity, recorded_data

    then = recorded_data(run) or {}
    now = {k: data_identity(v["path"]) for k, v in then.items() if isinstance(v, dict) and v.get("path")}
    changed = data_changes(then, now)
    return f"data changed: {', '.join(changed)}" if changed else None


def _same_training(a: str, b: str, reg: Registry) -> bool:
    """Runs ``a`` and ``b`` logged the same training loss at every epoch, to the last bit (a rebuild that reproduced
    the run it replaced; a different result shows within an epoch)."""
    def trace(run_id: str) -> list[tuple[Any, float]]:
        return sorted((m["step"], m["value"]) for m in reg.metrics(run_id, name="loss") if m["split"] == "train")

    ta = trace(a)
    return bool(ta) and ta == trace(b)


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
    add_executor_options(p)
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


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """``--executor`` and its options (``bench run`` and ``bench compare``)."""
    from benchmarks.runner.executors import EXECUTORS

    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where the jobs run: processes of this machine (local), SLURM job arrays through submitit "
                        "(slurm), Ray tasks (ray); a suite file's resources: say what a job asks a cluster for")
    p.add_argument("--max-parallel", type=int, default=0,
                   help="slurm: array tasks running at a time (0: as many as SLURM gives)")
    p.add_argument("--max-requeues", type=int, default=3,
                   help="slurm/ray: times a preempted or timed-out job is requeued (it resumes from its checkpoint)")
    p.add_argument("--ray-address", default=None, help="ray: the cluster's address (default: a local Ray cluster)")


def executor_of(args: argparse.Namespace, registry_url: str, check: bool = True) -> Any:
    """The cluster executor the options name (``check``: its package, scheduler and registry checked before any job
    is claimed; a dry run plans on a machine that need not be a login node), None for local."""
    if args.executor == "local":
        return None
    from benchmarks.runner.executors import ClusterExecutor

    if args.max_parallel < 0 or args.max_requeues < 0:
        raise ValueError(f"--max-parallel and --max-requeues must be >= 0, got {args.max_parallel} and "
                         f"{args.max_requeues}")
    ex = ClusterExecutor(args.executor, max_parallel=args.max_parallel, max_requeues=args.max_requeues,
                         ray_address=args.ray_address)
    if check:
        ex.check(registry_url)
    return ex


def only_jobs(jobs: list[Job], only: str | None, suite: str) -> list[Job]:
    """The jobs whose command line matches the regular expression ``only`` (``--only``; None: all of them); a bad
    expression, or one that matches no job, is a ``ValueError`` naming it."""
    if not only:
        return jobs
    try:
        pattern = re.compile(only)
    except re.error as exc:
        raise ValueError(f"--only {only!r} is not a regular expression ({exc})") from None
    out = [j for j in jobs if pattern.search(j.label())]
    if not out:
        raise ValueError(f"--only {only!r} matches no job of suite {suite}")
    return out


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
    whole = jobs
    jobs = only_jobs(jobs, args.only, name)
    if not args.dry_run:
        require_committed_code(args.allow_dirty)
    url = args.registry or registry_url()
    runner = Runner(url, jobs=args.jobs, launcher=args.launcher, nproc_per_node=args.nproc_per_node,
                    nnodes=args.nnodes, rdzv_endpoint=args.rdzv_endpoint, log_dir=Path("results/bench-logs") / name,
                    dry_run=args.dry_run, threads=args.threads, whole=whole)
    if args.jobs < 1 or args.threads < 0:
        raise ValueError(f"--jobs must be >= 1 and --threads >= 0, got --jobs {args.jobs} --threads {args.threads}")
    if args.executor != "local" and args.launcher != "local":
        raise ValueError("--launcher torchrun is for --executor local (a cluster job runs one process)")
    missing = missing_data(args.suite, jobs)
    if missing and not args.dry_run:  # one line naming each root, before anything is submitted
        raise ValueError(f"suite {name}: " + "; ".join(missing))
    runner.executor = executor_of(args, url, check=not args.dry_run)  # a dry run asks no scheduler
    check_commands(_unfinished(jobs, url), args.suite)
    for line in missing:
        print(f"note: {line}")
    if args.dry_run:
        from benchmarks.runner.gpu_hours import estimate

        for line in estimate(args.suite, jobs, Registry(url)):
            print(line)

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
    where = (f"on {runner.executor.kind}" if runner.executor is not None else
             f"{runner.jobs} at a time x {runner.thread_budget()} threads ({available_cores()} cores)")
    print(f"suite {name}: {len(jobs)} jobs, {where}, registry {runner.registry_url}", flush=True)
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
