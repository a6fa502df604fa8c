"""The measurement kit: every loss runs on the example inputs the loss core makes for it (suite/losses/examples.py),
and the timing and peak-memory helpers every bench and ``make gpu-check`` share (suite/measure.py)."""
from __future__ import annotations

import math

import pytest
import torch

import suite.losses as L
from suite.losses.examples import example_extra, example_inputs
from suite.measure import median_ratio, peak_tensor_bytes, round_robin, step, time_interleaved

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", L.available())
def test_every_loss_runs_on_its_example_inputs(name: str) -> None:
    """each loss, dense and tiled, on its own example inputs -> a finite scalar and a gradient for every leaf; its
    graph as a matrix and as embeddings is the same graph (the same value)"""
    values = []
    for graph, chunk in (("matrix", None), ("embeddings", 3)):
        ex = example_inputs(name, 8, 5, generator=torch.Generator().manual_seed(0), graph=graph, dtype=torch.float64)
        value = ex.call(L.build(name, chunk_size=chunk))()
        value.backward()
        assert value.dim() == 0 and math.isfinite(float(value))
        assert all(t.grad is not None and bool(torch.isfinite(t.grad).all()) for t in ex.leaves)
        values.append(float(value))
    assert values[0] == pytest.approx(values[1], rel=1e-9)


def test_the_inputs_follow_what_the_loss_declares() -> None:
    """a multi-view loss gets (V, N, d) views, a two-view loss the first two of the same seed's views; SupCon its
    labels, X-CLR its graph in the form asked for; the same seed gives the same inputs on any device"""
    gen = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    views = example_inputs("cmc", 6, 4, views=4, generator=gen()).args
    pair = example_inputs("infonce", 6, 4, generator=gen()).args
    assert [tuple(t.shape) for t in views] == [(4, 6, 4)] and len(pair) == 2
    assert torch.equal(pair[0], views[0][0]) and torch.equal(pair[1], views[0][1])
    assert set(example_inputs("supcon", 6, 4, classes=2, generator=gen()).extra) == {"labels"}
    graph = example_extra("xclr", 6, generator=gen(), dtype=torch.float64)["similarity"]
    assert graph.shape == (6, 6) and graph.dtype == torch.float64 and torch.allclose(graph.diagonal(), torch.ones(6,
                                                                                      dtype=torch.float64))
    assert example_extra("xclr", 6, graph="embeddings", generator=gen())["similarity_embeddings"].shape == (6, 10)
    assert example_extra("infonce", 6, generator=gen()) == {}


def test_bad_requests_are_refused_by_name() -> None:
    class Needs:
        name, requires = "needs_weights", ("weights",)

    with pytest.raises(ValueError, match="needs_weights.*'weights'.*cannot make"):
        example_extra(Needs, 4)
    with pytest.raises(ValueError, match="graph must be one of"):
        example_extra("xclr", 4, graph="dense")
    with pytest.raises(ValueError, match="n >= 1"):
        example_inputs("infonce", 0, 4)


def test_timing_and_memory_on_the_cpu() -> None:
    """a step clears the leaves' gradients and times one forward and backward (no CUDA peak on the CPU); round-robin
    timing gives every case a time per round and a ratio to its reference; the peak of live tensors is counted"""
    ex = example_inputs("infonce", 16, 8, generator=torch.Generator().manual_seed(0))
    fn, leaves = ex.call(L.build("infonce")), ex.leaves
    seconds, peak = step(fn, leaves)
    assert seconds > 0 and math.isnan(peak) and all(t.grad is not None for t in leaves)
    rounds = round_robin({"a": (fn, leaves), "b": (fn, leaves)}, 3)
    assert [len(v) for v in rounds.values()] == [3, 3]
    med, ratio = time_interleaved({"infonce": (fn, leaves), "other": (fn, leaves)}, 2)
    assert set(med) == {"infonce", "other"} and ratio["infonce"] == 1.0
    assert peak_tensor_bytes(fn, leaves) > 16 * 16 * 4  # the (2N, 2N) similarities at least
    r = median_ratio([2.0, 4.0, 3.0], [2.0, 2.0, 3.0])
    assert r == {"ratio": 1.5, "ratio_min": 1.0, "ratio_max": 2.0}
