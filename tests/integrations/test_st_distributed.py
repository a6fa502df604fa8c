"""The sentence-transformers losses under torch.distributed: 2 gloo processes with N sentences each give,
after gradient averaging, the gradients of one process with the 2N sentences (negatives gathered across
ranks by the core, through the wrapper)."""
from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytest.importorskip("sentence_transformers")

W, N = 2, 4


def _grads(model_dir: str, loss_name: str, rows: slice) -> tuple[float, dict[str, torch.Tensor]]:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from suite.integrations.sentence_transformers import SuiteLoss

    torch.manual_seed(0)
    t = Transformer(model_dir, max_seq_length=16)
    model = SentenceTransformer(modules=[t, Pooling(t.get_embedding_dimension(), "mean")], device="cpu")
    model.eval()  # no dropout: both views equal up to the loss's own arrangement; deterministic
    words = ["alpha beta", "gamma delta", "eps zeta eta", "theta iota", "kappa lambda mu", "nu xi", "omicron pi", "rho"]
    a = words[rows]
    b = [w + " x" for w in a]
    feats = [model.tokenize(a), model.tokenize(b)]
    loss = SuiteLoss(model, loss_name)
    out = loss(feats, None)
    out.backward()
    return out.item(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def _worker(rank: int, init: str, outdir: str, model_dir: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=W)
    try:
        res = {}
        for name in ("infonce", "macl"):
            v, g = _grads(model_dir, name, slice(rank * N, (rank + 1) * N))
            for k in g:
                dist.all_reduce(g[k])
                g[k] /= W
            res[name] = (v, g)
        torch.save(res, os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process(tmp_path, tiny_model_dir):
    mp.spawn(_worker, args=(f"file://{tmp_path / 'pg'}", str(tmp_path), str(tiny_model_dir)), nprocs=W, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(W)]
    for name in ("infonce", "macl"):
        v, g = _grads(str(tiny_model_dir), name, slice(0, W * N))
        assert abs(sum(r[name][0] for r in ranks) / W - v) < 1e-5
        for k in g:
            assert torch.allclose(ranks[0][name][1][k], g[k], atol=1e-6, rtol=1e-4), (name, k)
