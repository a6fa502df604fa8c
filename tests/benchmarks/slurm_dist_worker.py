"""One task of ``srun -n 2 python -m tests.benchmarks.slurm_dist_worker OUT``: torch.distributed from SLURM's
environment alone (no torchrun variables), then every loss of tests/suite/test_distributed.py on this rank's rows of
the global batch, saved to ``OUT/rank<r>.pt`` with what the process group saw."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch


def main(out: str) -> None:
    torch.set_num_threads(1)
    from suite import distributed as sd
    from tests.suite.test_distributed import rank_results

    torchrun = sorted(k for k in ("WORLD_SIZE", "RANK", "MASTER_ADDR") if k in os.environ)
    assert sd.init_from_env("gloo"), "no process group from SLURM's environment"
    try:
        torch.save({"results": rank_results(sd.rank()), "world": sd.world_size(), "rank": sd.rank(),
                    "slurm_procid": int(os.environ["SLURM_PROCID"]), "torchrun_before": torchrun,
                    "master": os.environ["MASTER_ADDR"]}, Path(out) / f"rank{sd.rank()}.pt")
    finally:
        sd.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
