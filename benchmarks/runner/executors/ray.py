"""``--executor ray``: a stage's jobs as Ray tasks (one each, :func:`~benchmarks.runner.executors.node.ray_task`), on
the cluster at ``--ray-address`` or a local Ray cluster. Ray retries a task whose worker died up to
``--max-requeues`` times; the retried task takes its row back and resumes its run from its checkpoint."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from benchmarks.runner.executors import Stage
from benchmarks.runner.executors.cluster import ClusterExecutor, mem_bytes
from benchmarks.runner.executors.local import available_cores
from benchmarks.runner.executors.node import ray_task
from benchmarks.runner.suitefile import Job, resources_of


@dataclass
class RayExecutor(ClusterExecutor):
    """Ray tasks (handles: their object refs)."""
    name = "ray"
    ray_address: str | None = None

    @classmethod
    def options(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--ray-address", default=None, help="ray: the cluster's address (default: a local Ray cluster)")

    def check(self, registry_url: str) -> None:
        """Before anything is claimed: ray, and a registry the nodes share."""
        super().check(registry_url)
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ValueError("--executor ray needs ray: pip install 'contrastive-suite[ray]'") from None

    def submit(self, stage: Stage, jobs: list[Job], reg: Any) -> dict[str, Any]:
        """One task a job; {job hash: its object ref}. A job on several processes is refused: Ray runs one each."""
        import ray

        for j in jobs:
            res = resources_of(j)
            if res.get("nodes", 1) > 1 or res.get("tasks", 1) > 1:
                raise ValueError(f"ray: {j.label()} asks for {res.get('nodes', 1)} node(s) x {res.get('tasks', 1)} "
                                 "task(s); one run on several processes is for --executor slurm (srun's tasks) or "
                                 "--launcher torchrun")
        if not ray.is_initialized():
            kw: dict[str, Any] = {"address": self.ray_address} if self.ray_address else {"num_cpus": available_cores()}
            ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False)
        remote = ray.remote(ray_task)
        refs = {}
        for j in jobs:
            res = resources_of(j)
            opts: dict[str, Any] = {"num_cpus": int(res.get("cpus") or 1), "num_gpus": int(res.get("gpus") or 0),
                                    "max_retries": self.max_requeues, "retry_exceptions": False}
            if res.get("mem") is not None:
                opts["memory"] = mem_bytes(res["mem"])
            if res.get("options"):
                opts["resources"] = {k: float(v) for k, v in res["options"].items()}
            refs[j.hash] = remote.options(**opts).remote(self.spec(stage, j))
            self._remember(refs[j.hash])
        print(f"[submitted] {len(jobs)} job(s) of stage {jobs[0].stage} as Ray tasks "
              f"({self.ray_address or 'a local Ray cluster'})", flush=True)
        return refs

    def _poll(self, handles: dict[str, Any], left: dict[str, Job], state: dict[str, Any]) -> tuple[
            set[str], dict[str, str | None]]:
        import ray

        ready, _ = ray.wait([handles[h] for h in left], num_returns=len(left), timeout=0)
        return {h for h in left if handles[h] in ready}, {}

    def _gone(self, job: Job, handle: Any) -> None:
        import ray

        try:
            ray.get(handle)
        except Exception as exc:  # the task died (its worker, a retried node failure): the row says
            print(f"[ray] {job.label()}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}", flush=True)

    def _cancel_all(self, handles: list[Any]) -> None:
        import ray

        for ref in handles:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already ended
                pass
