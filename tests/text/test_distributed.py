"""Unsupervised SimCSE under DDP: 2 CPU gloo processes, tiny random BERT, fake data."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, port: int, model_dir: str, out: str) -> None:
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    import torch

    torch.set_num_threads(1)
    from suite import distributed as sd
    from text.methods.simcse import SimCSEConfig, train_simcse

    cfg = SimCSEConfig(backbone=model_dir, pooling="cls", max_length=12, batch_size=8, lr=1e-3, max_steps=3, eval_every=0,
                       out=out + "/model", loss="macl")
    s = train_simcse(cfg)
    import text.models as tm

    psum = sum(float(p.double().sum()) for p in tm.load_encoder(out + "/model").parameters()) if rank == 0 else 0.0
    Path(out, f"rank{rank}.json").write_text(json.dumps({"world": sd.world_size(), "steps": s.steps, "psum": psum}))
    sd.cleanup()


@pytest.mark.slow
def test_two_process_gloo(tiny_model_dir, data_env, tmp_path):
    import text.methods.simcse  # noqa: F401  (imported before fork)

    mp.start_processes(_worker, args=(_free_port(), str(tiny_model_dir), str(tmp_path)), nprocs=2, join=True, start_method="fork")
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2 and r0["steps"] == r1["steps"] == 3
    assert (tmp_path / "model" / "export" / "modules.json").exists()
