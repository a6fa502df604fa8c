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
    from graph.tu.data import load_tu
    from graph.tu.graphcl import TUConfig, train
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


def mol_worker(rank: int, world: int, port: int, corpus: str, out: str) -> None:
    """Molecular pretraining on 2 gloo ranks, plain and with gradient caching (chunk = the per-rank batch), with
    a checkpoint every epoch (a collective: every rank's random state)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank), SUITE_NO_PROGRESS="1")
    torch.set_num_threads(1)
    from graph.mol.pretrain import PretrainMolConfig, pretrain
    from suite import distributed as sd

    assert sd.init_from_env("gloo")
    try:
        base = dict(corpus=corpus, epochs=2, loss="graphcl", registry=False, keep_checkpoints=1, device="cpu",
                    num_layers=2, emb_dim=16, batch_size=4)
        res = {}
        for chunk in (0, 4):
            s = pretrain(PretrainMolConfig(out=str(Path(out) / f"c{chunk}"), grad_cache_chunk=chunk, **base))
            res[chunk] = [h["loss"] for h in s.info["history"]]
        Path(out, f"mol_rank{rank}.json").write_text(json.dumps({"plain": res[0], "cached": res[4]}))
    finally:
        sd.cleanup()
