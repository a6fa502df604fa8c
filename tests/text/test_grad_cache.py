"""Gradient caching through the engine for SimCSE (`suite text train --grad-cache-chunk K`, issue 14)."""
from __future__ import annotations

import torch

from suite.train import CachedStep, Engine
from suite.presets import make_loss
from text.methods.simcse import SimCSEConfig, simcse_step, train_simcse
from text.models import build_encoder, load_encoder


def _cfg(tmp_path, model_dir, **kw):
    base = dict(backbone=str(model_dir), pooling="cls", max_length=12, batch_size=16, max_steps=3, eval_every=0,
                eval_batch_size=32, out=str(tmp_path), seed=0, dropout=0.0)
    base.update(kw)
    return SimCSEConfig(**base)


def test_grad_cache_gives_the_full_batch_parameters(tiny_model_dir, data_env, tmp_path, mode="unsup"):
    """`suite text train` 3 steps, dropout 0, with --grad-cache-chunk 4 and without -> the same parameters to 1e-5 (float32)

    At SimCSE's lr (3e-5; the largest difference seen is ~1e-6). AdamW's first steps move every
    parameter by about lr * sign(g), so at a 100x larger lr float rounding of near-zero gradient
    entries alone reaches 5e-5 (same for any change of summation order, not a caching error)."""
    bs = 16 if mode == "unsup" else 8
    states = []
    for chunk in (0, 4):
        train_simcse(_cfg(tmp_path / f"c{chunk}", tiny_model_dir, mode=mode, batch_size=bs, grad_cache_chunk=chunk,
                          keep_checkpoints=0))
        states.append(load_encoder(str(tmp_path / f"c{chunk}")).state_dict())
    init = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.0).state_dict()
    moved = 0
    for k, v in states[0].items():
        torch.testing.assert_close(states[1][k], v, rtol=0, atol=1e-5, msg=lambda m: f"{k}: {m}")
        moved += int(k in init and not torch.equal(init[k], v))
    assert moved > 0  # the steps did change the parameters


def test_grad_cache_replays_dropout_masks(tiny_model_dir):
    """a cached SimCSE step with dropout 0.3 -> every chunk re-encoded with gradients equals its cached embedding exactly"""
    enc = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.3)
    cfg = SimCSEConfig(backbone=str(tiny_model_dir), max_length=12, grad_cache_chunk=3)
    loss = make_loss("text", "infonce").loss
    data = [f"sentence number {i} about a {w}" for i, w in enumerate(["dog", "cat", "car", "tree", "house", "boat", "ball"])]
    eng = Engine(enc, torch.optim.SGD(enc.parameters(), lr=0.1), device="cpu", loss=loss)
    cs = simcse_step(eng.ddp, enc, loss, data, torch.arange(7), cfg, 2, None, torch.device("cpu"))
    assert isinstance(cs, CachedStep) and [len(c) for c in cs.chunks] == [3, 3, 1]
    seen: list[torch.Tensor] = []
    inner = cs.encode
    cs.encode = lambda c: seen.append(inner(c)) or seen[-1]  # type: ignore[method-assign]
    enc.train()
    eng.backward(cs)
    first, second = seen[:3], seen[3:]
    assert len(second) == 3
    for a, b in zip(first, second):
        assert torch.equal(a, b.detach())
    assert not torch.equal(first[0][0], first[0][1])  # dropout on: the two views differ


def test_grad_cache_supervised_gradient_equals_full_batch(tiny_model_dir):
    """a supervised (triplet + hard negative) step in float64, dropout 0, chunks of 3 vs the full batch -> the same gradient to 1e-10

    float64 separates the method from rounding: in float32 the encoder's rounding differs with the
    chunk's batch size and the tiny random model's gradient (~1e-4 of its terms) magnifies it."""
    data = [(f"a man {w} plays", f"someone plays the {w}", f"nobody sleeps near the {w}")
            for w in ["guitar", "piano", "drums", "ball", "dog", "car", "tree", "house"]]
    grads = []
    for chunk in (0, 3):
        torch.manual_seed(0)  # the same MLP-head initialisation
        enc = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.0).train().double()
        cfg = SimCSEConfig(backbone=str(tiny_model_dir), max_length=12, mode="sup", grad_cache_chunk=chunk,
                           hard_negative_weight=0.5)
        loss = make_loss("text", "infonce").loss
        eng = Engine(enc, torch.optim.SGD(enc.parameters(), lr=0.0), device="cpu", loss=loss, accumulate=2)
        eng.backward(simcse_step(eng.ddp, enc, loss, data, torch.arange(8), cfg, 2, None, torch.device("cpu")))
        grads.append(torch.cat([p.grad.flatten() for p in enc.parameters() if p.grad is not None]))  # kept: no step yet
    scale = float(grads[0].abs().max())
    assert scale > 0 and float((grads[0] - grads[1]).norm()) <= 1e-10 * float(grads[0].norm())
