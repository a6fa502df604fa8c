"""``--executor slurm``: a stage's jobs as SLURM job arrays through submitit, one array per set of resources; each array
task runs :class:`~benchmarks.runner.executors.node.SlurmTask` on its node.

Preemption: SLURM's ``scontrol requeue`` (preemption, node failure) or submitit's time-limit signal (``USR2`` before
``--time``; :meth:`SlurmTask.checkpoint` stops the job's command, which the run owner ends as ``interrupted``, and asks
submitit to requeue it) starts the same array task again; its process takes its own row back by its scheduler id
(``requeues`` counts the restarts, ``SLURM_RESTART_COUNT``) and runs the same command, and the run owner resumes the run
from its newest checkpoint into the same registry row (one row; no checkpoint yet: a clean start). The runner reads
every state of its tasks (``squeue --states=all``) and takes a job whose row has not ended as gone only when SLURM has
ended its task (COMPLETED, FAILED, OUT_OF_MEMORY...: said with the failure) or no longer lists it, for ``vanish_grace``
seconds: a task ending to be requeued passes through such states. After ``--max-requeues`` restarts the job fails with
one line."""
from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.runner.executors import Stage
from benchmarks.runner.executors.cluster import ClusterExecutor, mem_string, time_minutes
from benchmarks.runner.executors.node import SlurmTask
from benchmarks.runner.suitefile import Job, resources_of

# SLURM's states of a task that holds nothing any more (squeue --states=all); a requeued task passes through others
# (COMPLETING, REQUEUED, REQUEUE_HOLD, PENDING...), and is followed on while it does
SLURM_ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                         "OUT_OF_MEMORY", "PREEMPTED"})


@dataclass
class SlurmExecutor(ClusterExecutor):
    """SLURM job arrays (handles ``slurm:<array>_<task>``)."""
    name = "slurm"

    @classmethod
    def cancel_tasks(cls, ids: list[str]) -> bool:
        """``scancel`` the array tasks; from a host that shares the registry but is not a SLURM client, one line saying
        they may still run."""
        try:
            p = subprocess.run(["scancel", *ids], capture_output=True, text=True)
        except FileNotFoundError:
            print(f"scancel is not on this host: SLURM task(s) {' '.join(ids)} are marked cancelled in the "
                  "registry but may still run; cancel them on the cluster (scancel <id>)", file=sys.stderr)
        else:
            if p.returncode != 0 and p.stderr.strip():
                print(f"scancel: {p.stderr.strip().splitlines()[-1]}", file=sys.stderr)
        return True
    max_parallel: int = 0  # array tasks at a time (0: no limit)
    # seconds a SLURM job whose row has not ended may be ended or missing in squeue before it is taken as gone: a task
    # that ends to be requeued (submitit's time-limit signal, scontrol requeue) can be so between its end and its
    # requeued pending state (fresh-clone CI runs saw it so, and called the job failed)
    vanish_grace: float = 30.0

    @classmethod
    def options(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--max-parallel", type=int, default=0,
                       help="slurm: array tasks running at a time (0: as many as SLURM gives)")

    def check(self, registry_url: str) -> None:
        """Before anything is claimed: submitit, sbatch, a controller that answers, and a registry the nodes share."""
        super().check(registry_url)
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

    def submit(self, stage: Stage, jobs: list[Job], reg: Any) -> dict[str, str]:
        """One array per set of resources; {job hash: SLURM id (array_task)}."""
        import submitit

        groups: dict[tuple[Any, ...], list[Job]] = {}
        for j in jobs:
            groups.setdefault(j.resources, []).append(j)
        ids: dict[str, str] = {}
        for resources, group in groups.items():
            res = resources_of(group[0])
            ex = submitit.SlurmExecutor(folder=str(stage.log_dir / "slurm" / "%j"), max_num_timeout=self.max_requeues)
            params: dict[str, Any] = {"job_name": f"suite-{stage.log_dir.name}", "stderr_to_stdout": True,
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
                    subs = ex.map_array(SlurmTask(), [self.spec(stage, j) for j in group])
            except Exception as exc:  # sbatch refused (unknown partition, account, over a limit...): its last line
                msg = str(exc).strip().splitlines()
                raise ValueError(f"slurm: sbatch refused the {len(group)} job(s) of stage {group[0].stage} (first: "
                                 f"{group[0].label()}): {msg[-1] if msg else type(exc).__name__}") from None
            for j, s in zip(group, subs):
                sid = f"slurm:{s.job_id}"
                ids[j.hash] = sid
                reg.update_job(j.hash, ("queued",), scheduler_id=sid)
            self._remember(subs[0].job_id.split("_")[0])
            print(f"[submitted] {len(group)} job(s) of stage {group[0].stage} as SLURM array "
                  f"{subs[0].job_id.split('_')[0]} ({res or 'default resources'})", flush=True)
        return ids

    def _poll(self, handles: dict[str, Any], left: dict[str, Job], state: dict[str, Any]) -> tuple[
            set[str], dict[str, str | None]]:
        """squeue's word on the arrays' tasks; while the controller does not answer, nothing is gone (said once, and
        again after it has answered)."""
        held = self._squeue(sorted({h.split(":", 1)[1].split("_")[0] for h in handles.values()}))
        if isinstance(held, str) and not state.get("unanswered"):
            print(f"[waiting] the SLURM controller does not answer (squeue: {held}); the jobs go on on their "
                  "nodes, and the runner keeps following them until it answers again", flush=True)
        state["unanswered"] = isinstance(held, str)
        said_by: dict[str, str | None] = {}  # SLURM's state of each task (None: not listed)
        if not isinstance(held, str):
            said_by = {h: held.get(handles[h].split(":", 1)[1]) for h in left}
        gone = {h for h, said in said_by.items() if said is None or said in SLURM_ENDED}
        missing = state.setdefault("missing", {})  # tasks ended or unlisted while their rows have not ended: since when
        for h in left:
            if h not in gone:
                missing.pop(h, None)
        return gone, said_by

    def _hold(self, job: Job, handle: Any, row: dict[str, Any], said: str | None, state: dict[str, Any]) -> bool:
        """A restart SLURM could not start is requeued again (:meth:`_relaunch`); a task ended or unlisted is followed
        on for ``vanish_grace`` seconds (perhaps between its end and its requeue)."""
        missing = state.setdefault("missing", {})
        relaunched = state.setdefault("relaunched", {})  # tasks the runner requeued after a restart that never ran
        if said in SLURM_ENDED and self._relaunch(job, handle, row, relaunched):
            missing.pop(job.hash, None)
            return True
        since = missing.setdefault(job.hash, time.monotonic())
        return time.monotonic() - since < self.vanish_grace

    def _lost(self, stage: Stage, handle: Any, said: str | None, log: str) -> str:
        """What SLURM and submitit saw of a job whose process never ended its run."""
        sid = str(handle).split(":", 1)[1]
        return (f"{log}; scheduler's log {stage.log_dir / 'slurm' / sid / f'{sid}_0_log.out'}; SLURM: "
                f"{said or 'no longer lists it'}")

    def _cancel_all(self, handles: list[Any]) -> None:
        subprocess.run(["scancel", *map(str, handles)], capture_output=True)

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
            said_q = (((q.stderr or q.stdout).strip().splitlines() or [f"exit {q.returncode}"])[-1] if q
                      else "no scontrol")
            print(f"[requeue refused] {job.label()}  ({sid}: SLURM could not start its restart {restarts} ("
                  f"{said.get('JobState')}, {said.get('Reason')}) and refused to requeue it: {said_q})", flush=True)
            return False
        print(f"[requeued again] {job.label()}  ({sid}: SLURM could not start its restart {restarts} "
              f"({said.get('JobState')}, {said.get('Reason')}); requeued by the runner, it resumes from its last "
              "checkpoint)", flush=True)
        return True

    @staticmethod
    def _scontrol(*args: str) -> subprocess.CompletedProcess[str] | None:
        """``scontrol <args>``'s answer; None where there is no scontrol (a test's stand-in, a host that is no
        client)."""
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
