"""GraphCL training under DDP with 2 CPU gloo processes on a tiny synthetic TU dataset."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch.multiprocessing as mp

import graph.tu.graphcl  # noqa: F401  (imported before fork)
from tests.graph.dist_worker import worker
from tests.graph.synthetic import write_synthetic_tu


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # ~14 s on 2 shared cores (two processes, gloo rendezvous)
def test_two_process_gloo(tmp_path: Path) -> None:
    root = write_synthetic_tu(tmp_path / "tu", n_graphs=32)
    out = tmp_path / "out"
    out.mkdir()
    # fork: the children reuse the imported modules (spawn would re-import torch_geometric twice)
    mp.start_processes(worker, args=(2, _free_port(), str(root), str(out)), nprocs=2, join=True, start_method="fork")
    r0, r1 = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    # DDP keeps the replicas identical; only the main rank evaluates
    assert abs(r0["param_sum"] - r1["param_sum"]) < 1e-4 * max(1.0, r0["param_abs"])
    assert r0["evals"] == [2] and r1["evals"] == []
    assert all(v == v for v in r0["loss"] + r1["loss"])  # finite (not NaN)


def test_two_process_mol_pretraining_with_grad_cache_and_checkpoints(tmp_path: Path) -> None:
    """molecular pretraining on 2 gloo ranks: checkpoints (a collective) are written every epoch with both ranks'
    random states, and gradient caching with the chunk equal to the per-rank batch gives the plain run's losses"""
    from graph.mol import pretrain  # noqa: F401  (imported before fork)
    from suite.train import load_checkpoint
    from tests.graph.dist_worker import mol_worker
    from tests.graph.test_mol_train import CORPUS

    corpus = tmp_path / "corpus.csv"
    corpus.write_text("SMILES\n" + "\n".join(CORPUS) + "\n")
    mp.start_processes(mol_worker, args=(2, _free_port(), str(corpus), str(tmp_path)), nprocs=2, join=True,
                       start_method="fork")
    r0, r1 = (json.loads((tmp_path / f"mol_rank{r}.json").read_text()) for r in (0, 1))
    for r in (r0, r1):
        assert len(r["plain"]) == 2 and r["cached"] == pytest.approx(r["plain"], rel=1e-5)
    from suite.train.run import Checkpoints

    state = load_checkpoint(Checkpoints(tmp_path / "c4" / "checkpoints").latest())  # type: ignore[arg-type]
    assert len(state["rank_rng"]) == 2 and state["epoch"] == 2
