"""Where the runner's jobs run: ``--executor local`` (processes of this machine, :class:`benchmarks.runner.run.Runner`),
``slurm`` (job arrays through submitit) or ``ray`` (Ray tasks).

A cluster executor keeps the runner's rules, and does not repeat them: the submitting runner decides per stage which
jobs run (finished ones skipped, rebuilds and reruns as with ``local``), claims each in the registry's ``jobs`` table as
``queued`` (so a second runner on the same registry does not submit it again), and submits them, one SLURM job array
(or one Ray task each) per stage and set of resources. On the node, the job's own process (:func:`node_main`) is a
one-job :class:`Runner`: it takes its queued row (``claim_job(queued_by=...)``), runs the front-end's command as a child
exactly as ``local`` does (thread budget, log file, the child follows it when it dies), and records the end. The
submitting runner follows the jobs through the scheduler and the registry, prints their ends and progress, and blocks a
stage after a failed one.

Preemption: SLURM's ``scontrol requeue`` (preemption, node failure) or submitit's time-limit signal (``USR2`` before
``--time``; :meth:`SlurmTask.checkpoint` stops the job's command, which the run owner ends as ``interrupted``, and asks
submitit to requeue it) starts the same array task again; its process takes its own row back by its scheduler id
(``requeues`` counts the restarts, ``SLURM_RESTART_COUNT``) and runs the same command, and the run owner resumes the run
from its newest checkpoint into the same registry row (one row; no checkpoint yet: a clean start). The runner reads
every state of its tasks (``squeue --states=all``) and takes a job whose row has not ended as gone only when SLURM has
ended its task (COMPLETED, FAILED, OUT_OF_MEMORY...: said with the failure) or no longer lists it, for ``vanish_grace``
seconds: a task ending to be requeued passes through such states. After ``--max-requeues`` restarts the job fails with
one line. Ray retries a task whose worker died up to the same limit.

An SQLite registry on a network file system is refused (:func:`check_registry`): SQLite's locks are not safe there.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.runner.suitefile import Job, resources_of

if TYPE_CHECKING:
    from benchmarks.runner.run import Runner

EXECUTORS = ("local", "slurm", "ray")
# file systems a registry file must not be on (SQLite's locking is unreliable there); /proc/mounts' type names
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p", "afs",
              "panfs", "wekafs", "orangefs", "pvfs2", "ncpfs", "coda", "davfs", "fuse.sshfs", "fuse.glusterfs",
              "fuse.ceph", "fuse.beegfs", "fuse.gcsfuse", "fuse.s3fs", "fuse.juicefs"}
_PASSED_ENV = re.compile(r"^(SUITE_|HF_|TRANSFORMERS_|TORCH_|OMP_|MKL_|CUDA_VISIBLE|PYTHON|TRITON_|WANDB_|MLFLOW_)")


def mount_of(path: str | Path, mounts: str = "/proc/mounts") -> tuple[str, str]:
    """(mount point, file system type) of the mount that holds ``path`` (the longest mount point above it)."""
    p = os.path.realpath(os.path.abspath(os.path.expanduser(str(path))))
    best = ("/", "")
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (p == point or p.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def check_registry(url: str, executor: str, mounts: str = "/proc/mounts") -> None:
    """A cluster executor on an SQLite registry file on a network file system: a ``ValueError``, one line saying why."""
    if executor == "local":
        return
    if "://" in url and not url.startswith("sqlite"):
        return
    path = url.split(":///", 1)[1] if url.startswith("sqlite") else url
    point, fs = mount_of(Path(path).expanduser().parent if not Path(path).exists() else path, mounts)
    if fs in NETWORK_FS or fs.startswith("nfs"):
        raise ValueError(f"--executor {executor}: the registry {path} is an SQLite file on a network file system "
                         f"({fs} at {point}), where SQLite's locking is not safe for jobs on several nodes; use a "
                         "PostgreSQL registry (--registry postgresql+psycopg://user@host/db)")


def time_minutes(value: Any) -> int:
    """``time:`` of ``resources`` in minutes (an integer, or SLURM's [D-]H:MM[:SS] / MM:SS spelling)."""
    if isinstance(value, int):
        return value
    days, _, rest = str(value).rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    if len(parts) == 2:  # H:MM with a day, MM:SS without (SLURM's reading)
        h, m, s = (parts[0], parts[1], 0) if days else (0, parts[0], parts[1])
    return max(1, (int(days or 0) * 24 + h) * 60 + m + (1 if s else 0))


def mem_string(value: Any) -> str:
    """``mem:`` as SLURM spells it: a number is GB."""
    return f"{value}G" if isinstance(value, (int, float)) else str(value).upper().rstrip("B")


def mem_bytes(value: Any) -> int:
    text = mem_string(value)
    unit = text[-1] if text[-1] in "KMGT" else "M"
    num = float(text[:-1] if text[-1] in "KMGT" else text)
    return int(num * 1024 ** ("KMGT".index(unit) + 1))


@dataclass
class Spec:
    """What a job's own process on a node is handed (pickled by submitit or Ray): the job, where it reports, the
    submitting runner (whose queued row it takes) and the environment it needs."""
    job: Job
    registry_url: str
    log_dir: str
    cwd: str
    queued_by: tuple[str, int]
    threads: int
    max_requeues: int
    grace: float
    env: dict[str, str] = field(default_factory=dict)


ENDED = ("finished", "failed", "cancelled", "interrupted")  # a job row's states after its end
# SLURM's states of a task that holds nothing any more (squeue --states=all); a requeued task passes through others
# (COMPLETING, REQUEUED, REQUEUE_HOLD, PENDING...), and is followed on while it does
SLURM_ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                         "OUT_OF_MEMORY", "PREEMPTED"})
RANK0_POLL_S = 5.0  # how often another task of a job on several processes reads rank 0's row
_ACTIVE: dict[str, Any] = {}  # the one-job runner of this node process (for SIGTERM and submitit's checkpoint)


def node_main(spec: Spec, scheduler_id: str, requeues: int | None) -> str:
    """Run one job on a node as the local executor would (claim, child process, log, end), from its queued row;
    ``requeues``: restarts by the scheduler (None: counted from the row, for Ray's retries)."""
    from benchmarks.runner.run import Runner
    from suite.registry import Registry

    os.chdir(spec.cwd)
    os.environ.update(spec.env)
    reg = Registry(spec.registry_url)
    row = reg.job(spec.job.hash) or {}
    if requeues is None:
        again = row.get("scheduler_id") == scheduler_id and row.get("status") in ("running", "interrupted")
        requeues = (row.get("requeues") or 0) + 1 if again else (row.get("requeues") or 0)
    log = Path(spec.log_dir) / f"{spec.job.hash}.log"
    if requeues > spec.max_requeues:
        reg.update_job(spec.job.hash, ("queued", "running", "interrupted"), status="failed", requeues=requeues,
                       ended_at=_now())
        print(f"[failed] {spec.job.label()}  (requeued {requeues} times, more than --max-requeues "
              f"{spec.max_requeues}; log {log})", flush=True)
        return "failed"
    runner = Runner(spec.registry_url, jobs=1, threads=spec.threads, log_dir=Path(spec.log_dir), grace=spec.grace)
    runner.claim_options = {"queued_by": spec.queued_by, "scheduler_id": scheduler_id, "requeues": requeues,
                            "log": str(log)}
    _ACTIVE["runner"] = runner
    out = spec.job.output()
    ckpts = sorted((out / "checkpoints").glob("step-*.pt"), key=lambda p: p.stat().st_mtime) if out else []
    if requeues:  # said in the scheduler's log and in the job's own, which goes on
        msg = (f"[requeued {requeues}] {spec.job.label()}  (" + (f"resumes from {ckpts[-1]}" if ckpts else
               "no checkpoint yet: starts again") + ")")
        print(msg, flush=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(msg + "\n")

    def on_term(signum: int, frame: Any) -> None:  # the scheduler stops the job (requeue, cancel, time limit)
        runner.stop()

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        return runner.run_one(spec.job, reg)
    finally:
        signal.signal(signal.SIGTERM, old)
        _ACTIVE.pop("runner", None)


def node_rank(spec: Spec, rank: int, requeues: int) -> str:
    """Another task (``rank`` > 0) of a job on several processes (``resources: {nodes: N, tasks: T}``): the same
    command, which joins rank 0's through torch.distributed (:func:`suite.distributed.slurm_env`); its log
    ``<hash>.rank<r>.log``. The registry is rank 0's (its row, its end); this task only runs and stops its process."""
    from benchmarks.runner.run import Runner

    from suite.registry import Registry

    if requeues > spec.max_requeues:  # rank 0 fails the job
        return "failed"
    os.chdir(spec.cwd)
    os.environ.update(spec.env)
    runner = Runner(spec.registry_url, jobs=1, threads=spec.threads, log_dir=Path(spec.log_dir), grace=spec.grace)
    done = threading.Event()

    def follow_rank0() -> None:  # rank 0 ended the job (failed before its command started, cancelled...): stop too,
        reg = Registry(spec.registry_url)  # not wait for a rendezvous that never comes (torch's timeout: 30 min)
        ended = lambda: (reg.job(spec.job.hash) or {}).get("status") in ENDED  # noqa: E731
        while not done.wait(RANK0_POLL_S):
            # still ended after the grace: a finished job's other ranks end with it, and a requeued task's rank 0
            # takes the row of the attempt before back within it
            if ended() and not done.wait(spec.grace) and ended():
                runner.stop()
                return

    old = signal.signal(signal.SIGTERM, lambda signum, frame: runner.stop())
    threading.Thread(target=follow_rank0, daemon=True).start()
    try:
        rc = runner.spawn(spec.job, Path(spec.log_dir) / f"{spec.job.hash}.rank{rank}.log", append=requeues > 0)
    finally:
        done.set()
        signal.signal(signal.SIGTERM, old)
    return "finished" if rc == 0 else "failed"


def _alive(proc: subprocess.Popen) -> bool:  # type: ignore[type-arg]
    """Whether a child still runs, without reaping it (its waiting thread may be the one this signal handler
    interrupted, holding the Popen's lock): a zombie has ended."""
    try:
        return Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: what the Popen knows
        return proc.returncode is None


def _now() -> str:
    from suite.registry.schema import _now as now

    return now()


class SlurmTask:
    """The callable submitit runs in each array task: :func:`node_main` with SLURM's ids; :meth:`checkpoint` is
    submitit's hook on the time-limit / preemption signal (stop the job's command, requeue the same task)."""

    def __call__(self, spec: Spec) -> str:
        array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        sid = f"slurm:{array}_{task}" if array and task else f"slurm:{os.environ.get('SLURM_JOB_ID', '?')}"
        requeues = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        rank = int(os.environ.get("SLURM_PROCID") or 0)
        return node_main(spec, sid, requeues) if rank == 0 else node_rank(spec, rank, requeues)

    def checkpoint(self, spec: Spec) -> Any:
        import submitit

        runner = _ACTIVE.get("runner")
        if runner is not None:  # the run owner ends the run interrupted; its checkpoints stay for the next start
            runner.stop()
            deadline = time.monotonic() + spec.grace
            while any(map(_alive, list(runner._procs))) and time.monotonic() < deadline:
                time.sleep(0.2)
        if int(os.environ.get("SLURM_RESTART_COUNT") or 0) >= spec.max_requeues:
            return None
        return submitit.helpers.DelayedSubmission(self, spec)


def _ray_task(spec: Spec) -> str:
    import ray

    return node_main(spec, f"ray:{ray.get_runtime_context().get_task_id()}", None)


@dataclass
class ClusterExecutor:
    """Runs a stage's jobs on a cluster (:meth:`run_stage`, called by :meth:`Runner.run` for each stage)."""
    kind: str  # slurm | ray
    max_parallel: int = 0  # SLURM: array tasks at a time (0: no limit)
    max_requeues: int = 3
    ray_address: str | None = None
    poll: float = 1.0
    # seconds a SLURM job whose row has not ended may be ended or missing in squeue before it is taken as gone: a task
    # that ends to be requeued (submitit's time-limit signal, scontrol requeue) can be so between its end and its
    # requeued pending state (fresh-clone CI runs saw it so, and called the job failed)
    vanish_grace: float = 30.0
    _cancel: list[Any] = field(default_factory=list)  # SLURM array ids / Ray object refs of this runner
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, registry_url: str) -> None:
        """Before anything is claimed: the executor's package, its scheduler, and a registry the nodes can share."""
        check_registry(registry_url, self.kind)
        if self.kind == "slurm":
            try:
                import submitit  # noqa: F401
            except ImportError:
                raise ValueError("--executor slurm needs submitit: pip install 'contrastive-suite[slurm]'") from None
            if shutil.which("sbatch") is None:
                raise ValueError("--executor slurm: sbatch is not on PATH (run on a SLURM login node)")
            # scontrol ping asks the controller itself (squeue -j 0 was refused by the client, the controller unasked)
            probe = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
            said = ((probe.stderr or "").strip() or (probe.stdout or "").strip()).splitlines()
            if " is UP" not in probe.stdout:  # a controller answers (a backup that is down does not matter)
                raise ValueError(f"--executor slurm: the SLURM controller does not answer (scontrol ping: "
                                 f"{said[0] if said else probe.returncode})")
        elif self.kind == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                raise ValueError("--executor ray needs ray: pip install 'contrastive-suite[ray]'") from None
        else:
            raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {self.kind!r}")

    def spec(self, runner: Runner, job: Job) -> Spec:
        res = resources_of(job)
        return Spec(job, runner.registry_url, str(runner.log_dir.resolve()), os.getcwd(),
                    (socket.gethostname(), os.getpid()), runner.threads or int(res.get("cpus") or 1),
                    self.max_requeues, runner.grace, {k: v for k, v in os.environ.items() if _PASSED_ENV.match(k)})

    def run_stage(self, runner: Runner, jobs: list[Job], reg: Any) -> list[str]:
        """The stage's statuses (one per job, as :meth:`Runner.run_one` gives them)."""
        out: dict[str, str] = {}
        todo: list[Job] = []
        for j in jobs:
            if runner._stop.is_set():
                out[j.hash] = "cancelled"
            elif runner.finished(j, reg):
                runner._end(j, None)
                out[j.hash] = "skipped"
            elif runner.dry_run:
                print(f"would submit ({self.kind}, {resources_of(j) or 'default resources'}):",
                      " ".join(runner.command(j)))
                out[j.hash] = "dry-run"
            elif not reg.claim_job(j.hash, j.label(), rerun=j.hash in runner._rebuild, status="queued",
                                   log=str(runner.log_dir / f"{j.hash}.log")):
                runner._end(j, None)
                held = reg.job(j.hash) or {}
                out[j.hash] = "skipped" if held.get("status") == "finished" else "busy"
                if out[j.hash] == "busy":
                    print(f"[busy] {j.label()}  ({held.get('status')} on {held.get('host')}"
                          f"{', ' + held['scheduler_id'] if held.get('scheduler_id') else ''}; run again when it has "
                          "ended)", flush=True)
            else:
                todo.append(j)
        if todo:
            runner.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                handles = self._submit_slurm(runner, todo, reg) if self.kind == "slurm" else self._submit_ray(runner, todo)
            except Exception:
                for j in todo:  # nothing was submitted: the rows are not left queued
                    reg.finish_job(j.hash, "failed", only_if=("queued",))
                raise
            out.update(self._follow(runner, todo, handles, reg))
        return [out[j.hash] for j in jobs]

    # ---------------------------------------------------------------- SLURM
    def _submit_slurm(self, runner: Runner, jobs: list[Job], reg: Any) -> dict[str, str]:
        """One array per set of resources; {job hash: SLURM id (array_task)}."""
        import submitit

        groups: dict[tuple[Any, ...], list[Job]] = {}
        for j in jobs:
            groups.setdefault(j.resources, []).append(j)
        ids: dict[str, str] = {}
        for resources, group in groups.items():
            res = resources_of(group[0])
            ex = submitit.SlurmExecutor(folder=str(runner.log_dir / "slurm" / "%j"), max_num_timeout=self.max_requeues)
            params: dict[str, Any] = {"job_name": f"suite-{runner.log_dir.name}", "stderr_to_stdout": True,
                                      "cpus_per_task": int(res.get("cpus") or 1), "signal_delay_s": 90,
                                      "additional_parameters": {"requeue": True, **res.get("options", {})}}
            if res.get("gpus"):
                params["gpus_per_node"] = int(res["gpus"])
            if res.get("nodes", 1) > 1 or res.get("tasks", 1) > 1:  # one run on several processes (srun's tasks)
                params.update(nodes=int(res.get("nodes", 1)), ntasks_per_node=int(res.get("tasks", 1)))
            if res.get("mem") is not None:
                params["mem"] = mem_string(res["mem"])
            if res.get("time") is not None:
                params["time"] = time_minutes(res["time"])
            else:
                params["time"] = 24 * 60
            for key in ("partition", "account"):
                if res.get(key):
                    params[key] = res[key]
            if self.max_parallel:
                params["array_parallelism"] = self.max_parallel
            ex.update_parameters(**params)
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # submitit prints sbatch's error too: said once, below
                    subs = ex.map_array(SlurmTask(), [self.spec(runner, j) for j in group])
            except Exception as exc:  # sbatch refused (unknown partition, account, over a limit...): its last line
                msg = str(exc).strip().splitlines()
                raise ValueError(f"slurm: sbatch refused the {len(group)} job(s) of stage {group[0].stage} (first: "
                                 f"{group[0].label()}): {msg[-1] if msg else type(exc).__name__}") from None
            for j, s in zip(group, subs):
                sid = f"slurm:{s.job_id}"
                ids[j.hash] = sid
                reg.update_job(j.hash, ("queued",), scheduler_id=sid)
            with self._lock:
                self._cancel.append(subs[0].job_id.split("_")[0])
            print(f"[submitted] {len(group)} job(s) of stage {group[0].stage} as SLURM array "
                  f"{subs[0].job_id.split('_')[0]} ({res or 'default resources'})", flush=True)
        return ids

    def _relaunch(self, job: Job, handle: str, row: dict[str, Any], relaunched: dict[str, int]) -> bool:
        """A requeued task that SLURM restarted but could not start (its process never took the row back: the row's
        ``requeues`` is below SLURM's ``Restarts``), and which SLURM then ended, is requeued again, once per restart
        and up to ``max_requeues``; True if it was. SLURM refuses to launch a job in the second its previous run was
        killed ("Job credential revoked" in slurmctld's log; the task ends FAILED, NonZeroExitCode, with no output of
        its own), which a requeued job released early (``scontrol update StartTime=now``, ``scontrol release``) meets:
        left alone, the job was called failed."""
        sid = handle.split(":", 1)[1]
        p = self._scontrol("show", "job", "-o", sid)
        said = dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv) if p and p.returncode == 0 else {}
        try:
            restarts = int(said.get("Restarts", "0"))
        except ValueError:
            return False
        if not (restarts > (row.get("requeues") or 0) and restarts <= self.max_requeues
                and relaunched.get(job.hash, -1) < restarts):
            return False
        relaunched[job.hash] = restarts
        q = self._scontrol("requeue", sid)
        if q is None or q.returncode != 0:
            said_q = ((q.stderr or q.stdout).strip().splitlines() or [f"exit {q.returncode}"])[-1] if q else "no scontrol"
            print(f"[requeue refused] {job.label()}  ({sid}: SLURM could not start its restart {restarts} ("
                  f"{said.get('JobState')}, {said.get('Reason')}) and refused to requeue it: {said_q})", flush=True)
            return False
        print(f"[requeued again] {job.label()}  ({sid}: SLURM could not start its restart {restarts} "
              f"({said.get('JobState')}, {said.get('Reason')}); requeued by the runner, it resumes from its last "
              "checkpoint)", flush=True)
        return True

    @staticmethod
    def _scontrol(*args: str) -> subprocess.CompletedProcess[str] | None:
        """``scontrol <args>``'s answer; None where there is no scontrol (a test's stand-in, a host that is no client)."""
        try:
            return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    @staticmethod
    def _squeue(arrays: list[str]) -> dict[str, str] | str:
        """{array_task id: state} of the arrays' tasks SLURM still knows, ended ones included (``--states=all``:
        COMPLETED, FAILED, OUT_OF_MEMORY... for MinJobAge after their end; a requeued task in whatever state it passes
        through); squeue's error when it does not answer (the controller is down: the runner keeps waiting)."""
        if not arrays:
            return {}
        p = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i %T", "-j", ",".join(arrays)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            said = p.stderr.strip().splitlines()
            return {} if "Invalid job id" in p.stderr else (said[-1] if said else f"exit {p.returncode}")
        return {k: v.strip() for k, v in (line.split(None, 1) for line in p.stdout.splitlines() if line.strip())}

    # ---------------------------------------------------------------- Ray
    def _submit_ray(self, runner: Runner, jobs: list[Job]) -> dict[str, Any]:
        import ray

        for j in jobs:
            res = resources_of(j)
            if res.get("nodes", 1) > 1 or res.get("tasks", 1) > 1:
                raise ValueError(f"ray: {j.label()} asks for {res.get('nodes', 1)} node(s) x {res.get('tasks', 1)} "
                                 "task(s); one run on several processes is for --executor slurm (srun's tasks) or "
                                 "--launcher torchrun")
        if not ray.is_initialized():
            from benchmarks.runner.run import available_cores

            kw: dict[str, Any] = {"address": self.ray_address} if self.ray_address else {"num_cpus": available_cores()}
            ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False)
        remote = ray.remote(_ray_task)
        refs = {}
        for j in jobs:
            res = resources_of(j)
            opts: dict[str, Any] = {"num_cpus": int(res.get("cpus") or 1), "num_gpus": int(res.get("gpus") or 0),
                                    "max_retries": self.max_requeues, "retry_exceptions": False}
            if res.get("mem") is not None:
                opts["memory"] = mem_bytes(res["mem"])
            if res.get("options"):
                opts["resources"] = {k: float(v) for k, v in res["options"].items()}
            refs[j.hash] = remote.options(**opts).remote(self.spec(runner, j))
            with self._lock:
                self._cancel.append(refs[j.hash])
        print(f"[submitted] {len(jobs)} job(s) of stage {jobs[0].stage} as Ray tasks "
              f"({self.ray_address or 'a local Ray cluster'})", flush=True)
        return refs

    # ---------------------------------------------------------------- following
    def _follow(self, runner: Runner, jobs: list[Job], handles: dict[str, Any], reg: Any) -> dict[str, str]:
        """Wait for the submitted jobs; each one's status when the scheduler no longer holds it, read from its row."""
        out: dict[str, str] = {}
        started: set[str] = set()
        requeued: dict[str, int] = {}
        t0 = {j.hash: time.monotonic() for j in jobs}
        left = {j.hash: j for j in jobs}
        unanswered = False  # said once while the controller does not answer, again after it has answered
        missing: dict[str, float] = {}  # SLURM tasks ended or unlisted while their rows have not ended: since when
        relaunched: dict[str, int] = {}  # SLURM tasks the runner requeued after a restart that never ran: restart
        while left:
            said_by: dict[str, str | None] = {}  # SLURM's state of each task (None: not listed)
            if self.kind == "slurm":
                held = self._squeue(sorted({h.split(":", 1)[1].split("_")[0] for h in handles.values()}))
                if isinstance(held, str) and not unanswered:
                    print(f"[waiting] the SLURM controller does not answer (squeue: {held}); the jobs go on on their "
                          "nodes, and the runner keeps following them until it answers again", flush=True)
                unanswered = isinstance(held, str)
                if not isinstance(held, str):
                    said_by = {h: held.get(handles[h].split(":", 1)[1]) for h in left}
                gone = [h for h, state in said_by.items() if state is None or state in SLURM_ENDED]
            else:
                import ray

                ready, _ = ray.wait([handles[h] for h in left], num_returns=len(left), timeout=0)
                gone = [h for h in left if handles[h] in ready]
            rows = reg.jobs_of(list(left))
            for h in list(left):
                row = rows.get(h) or {}
                if (row.get("requeues") or 0) > requeued.get(h, 0):
                    requeued[h] = row["requeues"]
                    print(f"[requeued {row['requeues']}] {left[h].label()}  ({row.get('scheduler_id')}; it resumes "
                          "from its last checkpoint)", flush=True)
                if h not in started and row.get("status") == "running":
                    started.add(h)
                    t0[h] = time.monotonic()
                    with runner._lock:
                        runner._pending.pop(h, None)
                        runner._running[h] = (left[h], t0[h])
                    print(f"[start] {left[h].label()}  ({row.get('scheduler_id')} on {row.get('host')})\n"
                          f"{runner.progress()}", flush=True)
                if h not in gone:
                    missing.pop(h, None)
                    continue
                if (self.kind == "slurm" and row.get("status") in ("queued", "running", "interrupted")
                        and said_by.get(h) in SLURM_ENDED and self._relaunch(left[h], handles[h], row, relaunched)):
                    missing.pop(h, None)
                    continue
                if self.kind == "slurm" and row.get("status") in ("queued", "running", "interrupted"):
                    since = missing.setdefault(h, time.monotonic())  # perhaps between its end and its requeue
                    if time.monotonic() - since < self.vanish_grace:
                        continue
                job = left.pop(h)
                if self.kind == "ray":
                    import ray

                    try:
                        ray.get(handles[h])
                    except Exception as exc:  # the task died (its worker, a retried node failure): the row says
                        print(f"[ray] {job.label()}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}",
                              flush=True)
                row = reg.job(h) or {}
                status = row.get("status") or "failed"
                log = row.get("log") or str(runner.log_dir / f"{h}.log")
                if status in ("queued", "running", "interrupted"):  # it ended without recording its end
                    reg.finish_job(h, "failed", only_if=("queued", "running", "interrupted"))
                    status = "failed"
                    if self.kind == "slurm":  # what SLURM and submitit saw of it (its process never ended its run)
                        sid = str(handles[h]).split(":", 1)[1]
                        log = (f"{log}; scheduler's log {runner.log_dir / 'slurm' / sid / f'{sid}_0_log.out'}; SLURM: "
                               f"{said_by.get(h) or 'no longer lists it'}")
                took = time.monotonic() - t0[h]
                runner._end(job, took if status == "finished" else None)
                if status == "failed":
                    with runner._lock:
                        runner.failures.append((job.label(), Path(log)))
                again = f", requeued {row['requeues']}x" if row.get("requeues") else ""
                shown = f"failed (log {log})" if status == "failed" else status
                print(f"[{shown}] {job.label()}  ({took:.1f} s{again})\n{runner.progress()}", flush=True)
                out[h] = status
            if left:
                time.sleep(self.poll)
        return out

    def stop(self) -> None:
        """Cancel what this runner submitted (Ctrl-C / SIGTERM to the runner)."""
        with self._lock:
            handles, self._cancel = list(self._cancel), []
        if self.kind == "slurm" and handles:
            subprocess.run(["scancel", *map(str, handles)], capture_output=True)
        elif self.kind == "ray":
            import ray

            for ref in handles:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # already ended
                    pass


def cancel_jobs(reg: Any, jobs: list[Job]) -> list[tuple[Job, str]]:
    """Stop a grid's queued and running jobs: each row becomes ``cancelled`` (its end never overwrites that), SLURM's
    tasks are ``scancel``-ed, and a runner of this host that holds jobs (local, Ray) gets SIGTERM, which stops its
    jobs. [(job, what it was)] of the jobs cancelled."""
    done: list[tuple[Job, str]] = []
    slurm: set[str] = set()
    runners: set[int] = set()
    host = socket.gethostname()
    for j in jobs:
        row = reg.job(j.hash) or {}
        if row.get("status") not in ("queued", "running"):
            continue
        sid = str(row.get("scheduler_id") or "")
        if reg.update_job(j.hash, ("queued", "running"), status="cancelled", ended_at=_now()):
            done.append((j, f"{row['status']}" + (f", {sid}" if sid else "") + f" on {row.get('host')}"))
        if sid.startswith("slurm:"):
            slurm.add(sid.split(":", 1)[1])
        elif row.get("host") == host and row.get("pid") and row["pid"] != os.getpid():
            runners.add(int(row["pid"]))
    if slurm:
        try:
            p = subprocess.run(["scancel", *sorted(slurm)], capture_output=True, text=True)
        except FileNotFoundError:  # cancelled from a host that shares the registry but is not a SLURM client
            print(f"scancel is not on this host: SLURM task(s) {' '.join(sorted(slurm))} are marked cancelled in the "
                  "registry but may still run; cancel them on the cluster (scancel <id>)", file=sys.stderr)
        else:
            if p.returncode != 0 and p.stderr.strip():
                print(f"scancel: {p.stderr.strip().splitlines()[-1]}", file=sys.stderr)
    for pid in sorted(runners):
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    return done
