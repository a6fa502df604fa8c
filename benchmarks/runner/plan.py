"""The plan of ``suite bench run``: which of a suite's jobs run, stage after stage (:class:`Runner`). Finished jobs
are skipped; a finished job runs again where its output is gone while a later stage reads it, where its every run came
from uncommitted code, or where its input changed since its run read it (its new run supersedes the old one); a stage
after one with a failed job is blocked. The plan says its progress and ETA, and hands each stage's jobs to an executor
(:mod:`benchmarks.runner.executors`: this machine's processes, SLURM, Ray) with a narrow
:class:`~benchmarks.runner.executors.Stage` of its answers. The command line is :mod:`benchmarks.runner.run`; the suite
file's contract is :mod:`benchmarks.runner.suitefile`."""
from __future__ import annotations

import json
import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.runner.executors import Executor, Stage
from benchmarks.runner.executors.local import LocalExecutor, available_cores, job_command, job_env
from benchmarks.runner.progress import Progress, duration_text, job_kind
from benchmarks.runner.suitefile import Job
from suite.paths import resolve_model_path
from suite.registry import Registry


def snapshot_seconds(hashes: set[str], snapshot: Path | None = None) -> dict[str, float]:
    """{job hash: wall seconds} of the finished runs of the committed snapshot whose job is among ``hashes`` (a job's
    runs summed: its seeds run as one job where the front-end takes several)."""
    from benchmarks.paths import SNAPSHOT

    path = snapshot or SNAPSHOT
    out: dict[str, float] = {}
    if not path.is_file():
        return out
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            h, secs = row.get("config_hash"), row.get("wall_time")
            if h in hashes and row.get("status") == "finished" and isinstance(secs, (int, float)) and secs > 0:
                out[h] = out.get(h, 0.0) + float(secs)
    return out


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
    estimated: tuple[float, float, int] | None = None  # dry run: (job s, wall s, jobs without a duration)
    whole: list[Job] = field(default_factory=list)  # every job of the suite (``--only`` runs a part): durations
    _rebuild: set[str] = field(default_factory=set)  # finished jobs run again: output gone, runs only from dirty code
    _dirty: set[str] = field(default_factory=set)  # finished jobs whose every run comes from uncommitted code
    _stale: set[str] = field(default_factory=set)  # finished jobs whose input (an exported model) changed since
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    executor: Executor = None  # type: ignore[assignment]  # where the jobs run; None: this machine's (LocalExecutor)
    _progress: Progress = field(init=False)

    def __post_init__(self) -> None:
        self._progress = Progress(jobs=self.jobs)
        if self.executor is None:
            self.executor = LocalExecutor()

    def command(self, job: Job) -> list[str]:
        return job_command(job, self.launcher, self.nproc_per_node, self.nnodes, self.rdzv_endpoint)

    def thread_budget(self) -> int:
        """Threads per job process, so that jobs x processes per job x threads <= cores (``threads`` overrides)."""
        if self.threads:
            return self.threads
        procs = max(1, self.jobs) * (self.nproc_per_node if self.launcher == "torchrun" else 1)
        return max(1, (self.cores or available_cores()) // procs)

    def env(self, job: Job) -> dict[str, str]:
        """The child's environment: job hash, registry, and the thread budget (:func:`job_env`)."""
        return job_env(job, self.registry_url, self.thread_budget(), self.launcher, self.jobs)

    def stage(self) -> Stage:
        """What an executor is handed with each stage's jobs: the plan's answers, not the plan."""
        return Stage(registry_url=self.registry_url, log_dir=self.log_dir, grace=self.grace, command=self.command,
                     env=self.env, finished=self.finished, rerun=lambda job: job.hash in self._rebuild,
                     start=self._progress.start, end=self._progress.end, progress=self._progress.text,
                     failed=self._failed, stopping=self._stop.is_set, stop=self.stop, jobs=self.jobs,
                     threads=self.threads, budget=self.thread_budget(), dry_run=self.dry_run)

    kind = staticmethod(job_kind)  # what a job's duration is estimated from: its front-end and command (``graph tu``)

    def _failed(self, label: str, log: Path) -> None:
        with self._lock:
            self.failures.append((label, log))

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
        earlier job made (a pretrained encoder, a start model), so these jobs run again, and the new run supersedes the
        old one in the registry. Their config and seed are recorded, so the rebuilt output is the same run again."""
        status = {j.hash: reg.job_status(j.hash) for j in jobs}
        todo = [j for j in jobs if status[j.hash] != "finished"]

        def read_later(j: Job, out: Path) -> bool:  # a job still to run, of a later stage, names ``out`` in its args
            return any(t.stage > j.stage and any(isinstance(v, str) and v and k != "out"
                                                 and resolve_model_path(v) == out
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
            self._progress.again(job)
            print(f"[rerun] {job.label()}  (finished, but {why}: it runs again, and its new run supersedes the old "
                  "one)", flush=True)

    def durations(self, jobs: list[Job], reg: Registry) -> dict[str, list[float]]:
        """Seconds of the finished jobs by front-end and command: those the runner recorded
        (:meth:`Registry.job_durations`), and those of ``jobs`` and the whole suite (:attr:`whole`) imported from a
        snapshot (their rows have no command; the job says its kind); for a kind neither knows, the committed
        snapshot's runs of those jobs (:func:`snapshot_seconds`)."""
        out = reg.job_durations()
        kinds = {j.hash: self.kind(j) for j in [*self.whole, *jobs]}
        for h, secs in reg.imported_job_seconds(list(kinds)).items():
            out.setdefault(kinds[h], []).append(secs)
        known = set(out)  # a kind the registry has not timed (a fresh clone's): the committed snapshot's runs of these
        for h, secs in snapshot_seconds(set(kinds)).items():  # jobs say how long it takes (issue 80: it said 0 s)
            if kinds[h] not in known:
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
        """Stop scheduling and stop the running jobs (local: SIGTERM to every job's process group, SIGKILL after
        ``grace`` seconds; their runs are marked interrupted; a cluster: its tasks cancelled)."""
        self._stop.set()
        self.executor.stop()

    def kill_all(self) -> None:
        """SIGKILL every job's process group that is still running (the runner is going away)."""
        self.executor.kill()

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
            print(f"estimate: {duration_text(total)} of job time, about {duration_text(wall)} wall with {self.jobs} "
                  "at a time (median durations of finished jobs of each front-end and command in the registry, else "
                  "in the committed snapshot)"
                  + (f"; {unknown} jobs of commands with no recorded duration not counted" if unknown else ""))
        self._progress.begin(jobs, None if self.dry_run else self.durations(jobs, reg))
        if not self.dry_run:  # jobs finished before this run are done from the first progress line on, not left
            for j in jobs:    # in the ETA until the pool reaches them
                if self.finished(j, reg):
                    self._progress.end(j, None)
        failed_stage: int | None = None
        ctx = self.stage()
        for stage in sorted({j.stage for j in jobs}):
            if failed_stage is not None:  # a later stage uses what earlier stages make: not started on a failure
                for j in (j for j in jobs if j.stage == stage):
                    self._progress.end(j, None)
                    counts["blocked"] = counts.get("blocked", 0) + 1
                    print(f"[blocked] {j.label()}  (stage {stage} waits for stage {failed_stage}, which has failed "
                          f"job(s); fix them and run again)", flush=True)
                continue
            if stage != min(j.stage for j in jobs) and not self.dry_run:  # an earlier stage may have rebuilt an input
                self._mark_stale([j for j in jobs if j.stage == stage and j.hash not in self._rebuild], reg)
            try:  # the executor runs the stage's jobs to their ends
                statuses = self.executor.run_stage(ctx, [j for j in jobs if j.stage == stage], reg)
            except KeyboardInterrupt:
                self.stop()
                raise
            for s in (x.split(" ")[0] for x in statuses):
                counts[s] = counts.get(s, 0) + 1
                if s in ("failed", "cancelled", "interrupted") and failed_stage is None:
                    failed_stage = stage
        return counts


def _stale_reason(run: dict[str, Any], idents: dict[str, dict[str, Any]], reg: Registry) -> str | None:
    """Why the finished ``run`` read other inputs than ``idents`` ({arg value: its identity now}), or None
    (:meth:`Runner.stale_inputs`)."""
    from suite.inputs import recorded_inputs

    if (recorded := recorded_inputs(run)) is not None:
        read = {str(resolve_model_path(e["path"])): e for e in recorded.values()
                if isinstance(e, dict) and e.get("path")}
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

