"""Worker for the 2-process gloo test (importable, so torch.multiprocessing.spawn can pickle it)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch


def worker(rank: int, world: int, port: int, root: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank), SUITE_NO_PROGRESS="1")
    torch.set_num_threads(1)
    from graph.data.tu import load_tu
    from graph.methods.graphcl import TUConfig, train
    from suite import distributed as sd

    assert sd.init_from_env("gloo")
    try:
        data = load_tu("SYNTH", root)
        cfg = TUConfig(dataset="SYNTH", loss="graphcl", epochs=2, batch_size=8, eval_epochs=[], svm_folds=4,
                       svm_inner_folds=2)
        res = train(cfg, data, seed=0)
        flat = torch.cat([p.detach().flatten() for p in res.model.parameters()])
        Path(out, f"rank{rank}.json").write_text(json.dumps({
            "world": sd.world_size(), "loss": [s["loss"] for s in res.epoch_stats], "param_sum": float(flat.sum()),
            "param_abs": float(flat.abs().sum()), "evals": sorted(res.evals)}))
    finally:
        sd.cleanup()
