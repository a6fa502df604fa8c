"""A two-rank gloo training (the engine of ``tests/suite/test_engine.py``) for the rank-failure probes: run as
``python -m tests.reliability.ranks RANK PORT OUTDIR FAULT`` by each rank, as torchrun would start it (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), the run wrapped as the run owner wraps it
(:func:`suite.distributed.watch_ranks`) and its errors said as ``suite``'s command line says them (one line on stderr,
exit 1). FAULT: ``none``, or ``raise``, ``kill`` or ``stall`` on rank 1 after step :data:`AT`; a checkpoint after
every :data:`EVERY` steps; the final parameters written to OUTDIR/rank<r>.pt."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

AT, EVERY, EPOCHS = 4, 3, 3


def train(rank: int, outdir: Path, fault: str) -> None:
    """This rank's training (its engine freed when it returns: :func:`main` ends the group as ``suite``'s command
    line does, after the run)."""
    import torch

    from suite import distributed as sd
    from tests.suite.test_engine import _batches, _engine, _model, _step

    with sd.watch_ranks():
        eng = _engine(_model())
        eng.generators["aug"].manual_seed(11 + rank)
        torch.manual_seed(11 + rank)
        ck = outdir / "ck.pt"
        if ck.exists():
            eng.load(ck, {"seed": 3})

        def on_step() -> None:
            if eng.step % EVERY == 0:
                eng.save(ck, {"seed": 3})  # a collective
            if rank == 1 and eng.step == AT and fault != "none":
                if fault == "raise":
                    raise ValueError("a bad batch on rank 1")
                if fault == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if fault == "stall":
                    time.sleep(120)  # a loader that waits on a hung mount

        eng.fit(_batches, _step(eng), epochs=EPOCHS, on_step=on_step)
        torch.save([p.detach() for p in eng.model.parameters()], outdir / f"rank{rank}.pt")


def main(rank: int, port: int, outdir: Path, fault: str) -> int:
    import torch

    from suite import distributed as sd
    from suite.faults import RunFault

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    sd.init_from_env("gloo")
    try:
        train(rank, outdir, fault)
        return 0
    except (RunFault, ValueError) as exc:  # as suite.cli.main says them
        print("error: " + " | ".join(str(exc).splitlines()), file=sys.stderr, flush=True)
        return 1
    finally:
        sd.cleanup()


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]))
