"""Issue 68: the plain loops of ``make gpu-bench`` written as the fastest public code writes them, each property
checked on the CPU: SimCSE tokenised once and indexed, every host copy through pinned memory (the suite's
``to_device``), the vision encoder itself converted to channels_last, the suite's prefetch depth, a compiled plain
loop wired beside ``--compile``; and the one ratio definition."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.measurements import gpu_bench as gb
from benchmarks.measurements import gpu_data as gd
from benchmarks.measurements import gpu_loops as gl
from benchmarks.measurements import gpu_tables as gt
from suite.measure import median_ratio

CPU = torch.device("cpu")
TINY = gb.SIZES["tiny"]


def _copies(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every host batch the plain loops hand to the pinning copy (the suite's ``to_device``, still called)."""
    seen: list[Any] = []
    real = gl.to_device

    def spy(batch: Any, device: torch.device) -> Any:
        seen.append(batch)
        return real(batch, device)

    monkeypatch.setattr(gl, "to_device", spy)
    return seen


def test_simcse_tokenises_once_and_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data set tokenised when the loop is built, never in a step; a step's tokens are the tokenizer's own for
    its sentences (trimmed to their longest, as per-batch padding gives), its indices copied through pinned memory"""
    texts = gd.sentences(64)
    bert = gd.write_bert(tmp_path / "bert", texts, 1, 16, 2)
    plain = gl.PlainSimCSE(bert, texts, 8, False, CPU)
    assert plain.ids.shape == (64, 32) and plain.ids.device == CPU
    tok = plain.tok
    monkeypatch.setattr(type(tok), "__call__", lambda *a, **k: pytest.fail("tokenised in a step"))
    seen = _copies(monkeypatch)
    state = plain.gen.get_state()
    ids, mask = plain.tokens()
    idx = torch.randperm(64, generator=torch.Generator().manual_seed(0).set_state(state))[:8]
    assert len(seen) == 1 and torch.equal(seen[0], idx)
    monkeypatch.undo()
    want = tok([texts[i] for i in idx.tolist()], padding=True, truncation=True, max_length=32, return_tensors="pt")
    assert torch.equal(ids, want["input_ids"]) and torch.equal(mask, want["attention_mask"])
    seen = _copies(monkeypatch)
    monkeypatch.setattr(type(tok), "__call__", lambda *a, **k: pytest.fail("tokenised in a step"))
    plain.run(2)
    assert len(seen) == 2


def test_molecule_and_graph_views_are_copied_through_pinned_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step hands both molecule views, and the GraphCL batch, to the pinning copy (on CUDA:
    ``pin_memory().to(non_blocking=True)``); the loaders pin on CUDA as the engine does"""
    seen = _copies(monkeypatch)
    mol = gl.PlainMol(gd.mol_graphs(32), 8, 2, 16, CPU)
    mol.run(2)
    assert len(seen) == 4 and all(type(v).__name__ == "DataBatch" and v.num_graphs == 8 for v in seen)
    seen.clear()
    tu = gl.PlainGraphCL(gd.tu_graphs(32, 8), 8, CPU)
    tu.run(2)
    assert len(seen) == 2 and all(v.num_graphs == 8 for v in seen)
    assert not mol.loader.pin_memory and gl.plain_loader([0] * 8, 4, torch.device("cuda"), workers=0).pin_memory


def test_the_plain_loaders_keep_the_suites_prefetch_depth() -> None:
    """With workers the plain graph loaders keep as many batches ready per worker as the suite's Prefetch (PyG's
    default is 2); whole batches only"""
    from suite.train.batches import Prefetch

    depth = Prefetch(lambda b: b, workers=2).loader.prefetch_factor  # type: ignore[union-attr]
    assert gl.suite_prefetch_depth() == depth != 2
    for plain in (gl.PlainGraphCL(gd.tu_graphs(32, 8), 8, CPU, workers=1),
                  gl.PlainMol(gd.mol_graphs(32), 8, 2, 16, CPU, workers=1)):
        assert plain.loader.num_workers == 1 and plain.loader.prefetch_factor == depth
        assert plain.loader.drop_last


def test_the_vision_encoder_itself_is_channels_last() -> None:
    """Converted where the suite converts its own (CUDA): weights NHWC and the encoder's ``features`` keep the NHWC
    views as they come (before: converted back to NCHW every step); on the CPU neither side converts"""
    x = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)
    plain = gl.PlainMoCo(x, 8, "convnet", 8, False, CPU, 32, channels_last=True)
    seen = []
    for enc in (plain.encoder, plain.key_encoder):
        assert enc.memory_format == torch.channels_last
        enc.backbone.register_forward_pre_hook(lambda m, a: seen.append(a[0].is_contiguous(
            memory_format=torch.channels_last) and a[0].stride(1) == 1))
        conv = next(m for m in enc.modules() if isinstance(m, torch.nn.Conv2d))
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    plain.run(1)
    assert seen == [True, True]
    assert gl.PlainSimCLR(x, 8, "convnet", 8, False, CPU).encoder.memory_format == torch.contiguous_format


def test_compile_is_wired_on_both_sides(tmp_path: Path) -> None:
    """``--compile``: the plain loop's model is compiled beside the suite's ``compile`` run option (wiring only: a
    compiled step's speed needs a GPU)"""
    x = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)
    plain = gl.PlainMoCo(x, 8, "convnet", 8, False, CPU, 32, compile=True)
    compiled = torch._dynamo.eval_frame.OptimizedModule
    assert isinstance(plain.model, compiled) and isinstance(plain.key, compiled)
    assert not isinstance(plain.encoder, compiled)
    works = {w.name: w for w in gb.front_ends(TINY, CPU, False, tmp_path, compile=True)}
    engine, training = works["graph-tu"].suite(tmp_path)
    assert training.compile and isinstance(engine.ddp, compiled)
    assert isinstance(works["graph-tu"].plain(tmp_path).model, compiled)


def test_one_ratio_definition() -> None:
    """The ratio is the ratio of the two sides' medians over the rounds, the per-round ratios its range; the table
    computes a front-end's ratio from its row's median rates, so a row's rates and ratio cannot disagree"""
    r = median_ratio([30.0, 36.0, 40.0, 35.9, 20.0], [41.3, 30.0, 50.0, 41.3, 41.0])
    assert r["ratio"] == pytest.approx(35.9 / 41.3)
    assert r["ratio_min"] == pytest.approx(20 / 41) and r["ratio_max"] == pytest.approx(1.2)
    assert gt.front_end_ratio({"suite_steps_per_s": 35.9, "plain_steps_per_s": 41.3, "ratio": 0.99}) == \
        pytest.approx(0.869, abs=1e-3)
