"""``make gpu-bench`` (``python -m benchmarks.measurements.gpu_bench``): the suite's training step beside a plain
PyTorch loop of the same model, batch, precision, augmentation and optimiser, on one device, interleaved (issue 47).

Front-ends (``--size full``, the issue's sizes; ``tiny``: the same code at a size the CPU runs in seconds, for CI):

* ``vision-simclr`` / ``vision-moco``: SimCLR and MoCo-v2, CIFAR ResNet-18 (``tiny``: the small convnet), batch 512,
  bf16 on CUDA, the suite's own ``ViewAugment``, SGD; 10,240 synthetic CIFAR-sized images written as CIFAR pickles;
* ``graph-tu``: GraphCL on a generated TU-like set (1,152 graphs of 39 nodes on average, about PROTEINS' 1,113),
  batch 128,
  the suite's GIN and augmentation; the plain loop collates with PyG's own ``DataLoader`` (workers on CUDA);
* ``graph-mol``: molecular pretraining with Hu et al.'s GIN (5 x 300) on 20,480 generated molecular graphs, batch 256;
  the plain loop: PyG's ``DataLoader`` over the molecules as ``Data``;
* ``text-simcse``: unsupervised SimCSE with a MiniLM-L6-sized BERT (6 x 384, random weights and a WordPiece vocabulary
  trained on the generated sentences: no download), batch 128, max length 32, bf16 on CUDA; the plain loop: the
  Hugging Face model, the tokenizer called every step, mean pooling, InfoNCE, AdamW.

Every loss is InfoNCE (NT-Xent, 2N - 1 candidates, both directions; MoCo: the query against its key and the queue),
the plain loops computing it as the field writes it (normalise, matrix product, cross-entropy). The suite side is the
front-end's own :meth:`~suite.train.run.Task.build` driven by :class:`suite.train.Engine` (what ``suite ... train``
runs, less evaluation and export). After the size's ``warmup`` steps of each, ``rounds`` rounds of ``steps`` steps
(``full``: 10, 9 and 20) alternate between the two (the plain round runs inside the suite's step callback, the device
synchronised at each round's ends); rates are medians over rounds, the ratio the median of the per-round ratios
(their lowest and highest recorded beside it). On CUDA each side's peak
step memory is the most allocated above what was allocated when its round began (both models live together).

The loss core: every loss, dense and tiled (the rows per tile ``chunk_size="auto"`` takes above its dense limit; on
CUDA the tiles are the fused kernels of :mod:`suite.losses.fused` where a loss takes them), forward and backward at
2N = 8,192 and 32,768
(``tiny``: 256), d = 128, fp32, against the plain InfoNCE at the same 2N (three-view losses against three plain pairs),
interleaved round by round. On CUDA (``--compiled-losses``) the first size also times each loss's dense path as the
engine runs it on one GPU, its call compiled whole (``<loss>-compiled``), and the plain InfoNCE compiled beside it
(issue 78's target: every compiled loss at most 1.1x the plain InfoNCE at 2N = 8,192).

Every number is recorded in the registry (task ``gpu-bench`` per front-end, ``gpu-bench-loss`` per loss, path and 2N;
the device, torch and CUDA versions in the config), then ``benchmarks/results/gpu_bench.md`` is rendered from the
registry alone (:func:`table`). ``--no-record`` prints the table of this call only.

This module is the harness (sizes, the suite's side, the interleaved rounds, the command); the generated data are
:mod:`~benchmarks.measurements.gpu_data`, the plain loops :mod:`~benchmarks.measurements.gpu_loops`, the table
:mod:`~benchmarks.measurements.gpu_tables`; the losses' inputs :mod:`suite.losses.examples`, the timing and peak
memory :mod:`suite.measure`.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from benchmarks.measurements.gpu_data import mol_graphs, sentences, tu_graphs, write_bert, write_cifar
from benchmarks.measurements.gpu_loops import (PLAIN_VERSION, Plain, PlainGraphCL, PlainMoCo, PlainMol, PlainSimCLR,
                                               PlainSimCSE, nt_xent)
from benchmarks.measurements.gpu_tables import LOSS_TASK, TASK, table
from suite.measure import cuda_mark, cuda_peak_above, device_info, median_ratio, nan_max, step, sync

RESULTS = Path(__file__).resolve().parents[1] / "results" / "gpu_bench.md"
OUT = RESULTS  # the file :func:`table` renders (benchmarks.report: TABLES)


@dataclass(frozen=True)
class Size:
    images: int
    image_batch: int
    encoder: str
    width: float
    queue: int
    graphs: int
    graph_nodes: int
    graph_batch: int
    molecules: int
    mol_batch: int
    mol_layers: int
    mol_dim: int
    sentences: int
    text_batch: int
    text_layers: int
    text_hidden: int
    text_heads: int
    loss_n: tuple[int, ...]  # 2N of the loss core
    warmup: int
    rounds: int
    steps: int


# Each data set a whole number of batches: the suite keeps an epoch's last partial batch in one process, the plain
# loops draw full ones, so a remainder gave the suite cheaper steps (10,000 images at 512: one step in 20 of 272).
SIZES = {
    "full": Size(images=10_240, image_batch=512, encoder="resnet18", width=0, queue=4096, graphs=1152, graph_nodes=39,
                 graph_batch=128, molecules=20_480, mol_batch=256, mol_layers=5, mol_dim=300, sentences=20_480,
                 text_batch=128, text_layers=6, text_hidden=384, text_heads=12, loss_n=(8192, 32768), warmup=10,
                 rounds=9, steps=20),
    "tiny": Size(images=256, image_batch=32, encoder="convnet", width=8, queue=64, graphs=64, graph_nodes=12,
                 graph_batch=16, molecules=128, mol_batch=16, mol_layers=2, mol_dim=32, sentences=256,
                 text_batch=16, text_layers=2, text_hidden=32, text_heads=2, loss_n=(256,), warmup=2, rounds=2,
                 steps=3),
}


# ----------------------------------------------------------------------------- the suite's side

def suite_side(task: Any, cfg: Any, device: torch.device, folder: Path) -> tuple[Any, Any]:
    """The front-end's own training (``task.build``) and the :class:`suite.train.Engine` the run owner makes for it."""
    from suite.train import Engine
    from suite.train.run import RunContext
    from suite.train.seeding import seed_everything

    seed_everything(cfg.seed)
    ctx = RunContext(cfg, device, folder, cfg.seed)
    training = task.build(cfg, ctx)
    takes = inspect.signature(Engine).parameters
    kw = {k: getattr(training, k) for k in ("log_every", "compile") if k in takes and hasattr(training, k)}
    engine = Engine(training.model, training.optimizer, device=device, scheduler=training.scheduler,
                    precision=training.precision, grad_clip=training.grad_clip, loss=training.loss,
                    generators=ctx.generators, desc=f"gpu-bench {task.name}", **kw)
    ctx.engine = engine
    return engine, training


@dataclass
class Work:
    name: str
    unit: str  # what an example is
    suite: Callable[[Path], tuple[Any, Any]]  # scratch folder -> (engine, training)
    plain: Callable[[Path], Plain]
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rounds:
    suite_s: list[float] = field(default_factory=list)
    plain_s: list[float] = field(default_factory=list)
    suite_peak: float = math.nan  # the CPU: none measured
    plain_peak: float = math.nan



def interleave(engine: Any, training: Any, plain: Plain, device: torch.device, warmup: int, rounds: int,
               steps: int) -> Rounds:
    """``warmup`` steps of each, then ``rounds`` rounds of ``steps`` steps alternating plain, suite (the plain round
    runs in the suite's step callback; the device is synchronised at every round's ends)."""
    out = Rounds()
    total = warmup + rounds * steps
    clock: dict[str, float] = {}

    def plain_round() -> None:
        sync(device)
        base = cuda_mark(device)
        t0 = time.perf_counter()
        plain.run(steps)
        sync(device)
        out.plain_s.append(time.perf_counter() - t0)
        out.plain_peak = nan_max(out.plain_peak, cuda_peak_above(device, base))

    def on_step() -> None:
        if training.on_step is not None:
            training.on_step()
        s = engine.step
        if s < warmup or (s - warmup) % steps:
            return
        sync(device)
        if "t0" in clock:
            out.suite_s.append(time.perf_counter() - clock["t0"])
            out.suite_peak = nan_max(out.suite_peak, cuda_peak_above(device, int(clock["base"])))
        else:
            plain.run(warmup)
        if s < total:
            plain_round()
            clock["base"] = cuda_mark(device)
            clock["t0"] = time.perf_counter()

    engine.fit(training.batches, training.step, max_steps=total, size=training.size, on_step=on_step,
               **_prefetch(training))
    return out


def _prefetch(training: Any) -> dict[str, Any]:
    """The engine's collate / workers arguments of a training (none for code from before they existed)."""
    if getattr(training, "collate", None) is None:
        return {}
    return {"collate": training.collate, "workers": training.workers}


def _batch_size(training: Any) -> int:
    return len(training.batches(0)[0])


def front_ends(size: Size, device: torch.device, bf16: bool, scratch: Path, compile: bool = False) -> list[Work]:
    """The five front-ends at ``size``: the suite's task and the plain loop, on the same generated data; ``compile``:
    both sides' models through ``torch.compile`` (the suite's ``--compile``)."""
    works: list[Work] = []
    images = scratch / "images"

    def vision(framework: str) -> Callable[[Path], tuple[Any, Any]]:
        def build(folder: Path) -> tuple[Any, Any]:
            from vision.config import PretrainConfig
            from vision.train import PretrainTask

            cfg = PretrainConfig(dataset="cifar10", data_root=str(images), framework=framework, loss="infonce",
                                 encoder=size.encoder, width=size.width, batch_size=size.image_batch,
                                 queue_size=size.queue, bf16=bf16, device=str(device), eval_every=0,
                                 registry=False, out=str(folder / framework), compile=compile)
            return suite_side(PretrainTask(cfg), cfg, device, folder)
        return build

    def plain_vision(framework: str) -> Callable[[Path], Plain]:
        def build(folder: Path) -> Plain:
            from vision.data import load_cifar_pickle

            x = load_cifar_pickle(images).train_x
            if framework == "moco":
                return PlainMoCo(x, size.image_batch, size.encoder, size.width, bf16, device, size.queue,
                                 compile=compile)
            return PlainSimCLR(x, size.image_batch, size.encoder, size.width, bf16, device, compile=compile)
        return build

    write_cifar(images, size.images)
    common = {"precision": "bf16" if bf16 else "fp32"}
    for fw in ("simclr", "moco"):
        works.append(Work(f"vision-{fw}", "images", vision(fw), plain_vision(fw),
                          {**common, "encoder": size.encoder, "batch": size.image_batch, "images": size.images}))

    tu = tu_graphs(size.graphs, size.graph_nodes)

    def graph_suite(folder: Path) -> tuple[Any, Any]:
        from graph.tu.graphcl import TUConfig, TUTask

        cfg = TUConfig(dataset="GPUBENCH", loss="infonce", batch_size=size.graph_batch, device=str(device),
                       epochs=10**6, eval_epochs=[], out=str(folder / "tu"), compile=compile)
        return suite_side(TUTask(tu), cfg, device, folder)

    works.append(Work("graph-tu", "graphs", graph_suite,
                      lambda folder: PlainGraphCL(tu, size.graph_batch, device, compile=compile),
                      {"precision": "fp32", "batch": size.graph_batch, "graphs": size.graphs}))

    mols = mol_graphs(size.molecules)

    def mol_suite(folder: Path) -> tuple[Any, Any]:
        from graph.mol.pretrain import MolPretrainTask, PretrainMolConfig

        cfg = PretrainMolConfig(loss="infonce", batch_size=size.mol_batch, num_layers=size.mol_layers,
                                emb_dim=size.mol_dim, device=str(device), registry=False, out=str(folder / "mol"),
                                compile=compile)
        return suite_side(MolPretrainTask(mols), cfg, device, folder)

    works.append(Work("graph-mol", "molecules", mol_suite,
                      lambda folder: PlainMol(mols, size.mol_batch, size.mol_layers, size.mol_dim, device,
                                              compile=compile),
                      {"precision": "fp32", "batch": size.mol_batch, "gin": f"{size.mol_layers}x{size.mol_dim}"}))

    texts = sentences(size.sentences)
    (scratch / "sentences.txt").write_text("\n".join(texts) + "\n")
    bert = write_bert(scratch / "bert", texts, size.text_layers, size.text_hidden, size.text_heads)

    def text_suite(folder: Path) -> tuple[Any, Any]:
        from suite.gpu_check import write_data
        from text.methods.simcse import SimCSEConfig, SimCSETask

        cfg = SimCSEConfig(backbone=str(bert), pooling="mean", mlp_head=False, data=str(scratch / "sentences.txt"),
                           loss="infonce", batch_size=size.text_batch, max_steps=10**6, eval_every=0, bf16=bf16,
                           device=str(device), out=str(folder / "text"), compile=compile)
        stand_in = write_data(scratch / "data")["root"]  # a stand-in STS-B dev split: the task reads it when built
        was = os.environ.get("SUITE_DATA")
        os.environ["SUITE_DATA"] = str(stand_in)
        try:
            return suite_side(SimCSETask(cfg), cfg, device, folder)
        finally:
            if was is None:
                os.environ.pop("SUITE_DATA", None)
            else:
                os.environ["SUITE_DATA"] = was

    works.append(Work("text-simcse", "sentences", text_suite,
                      lambda folder: PlainSimCSE(bert, texts, size.text_batch, bf16, device, compile=compile),
                      {**common, "batch": size.text_batch,
                       "bert": f"{size.text_layers}x{size.text_hidden}"}))
    return works


def profile(engine: Any, training: Any, plain: Plain, device: torch.device, steps: int, path: Path) -> None:
    """torch.profiler tables of ``steps`` more steps of each side (the operators by device and by host time)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    kw = _prefetch(training)
    parts = []
    for side, run in (("suite", lambda: engine.fit(training.batches, training.step, max_steps=engine.step + steps,
                                                     size=training.size, on_step=training.on_step, **kw)),
                      ("plain", lambda: plain.run(steps))):
        sync(device)
        with torch_profile(activities=acts) as prof:
            run()
            sync(device)
        parts += [f"== {side}: {steps} steps, by {key}", prof.key_averages().table(sort_by=key, row_limit=25),
                  f"== {side}: by self_cpu_time_total", prof.key_averages().table(sort_by="self_cpu_time_total",
                                                                                   row_limit=25)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))


def measure_front_end(work: Work, size: Size, device: torch.device, scratch: Path,
                      profile_to: Path | None = None) -> dict[str, float]:
    engine, training = work.suite(scratch)
    batch = _batch_size(training)
    plain = work.plain(scratch)
    if profile_to is not None:
        engine.fit(training.batches, training.step, max_steps=size.warmup, size=training.size,
                   on_step=training.on_step, **_prefetch(training))
        plain.run(size.warmup)
        profile(engine, training, plain, device, size.steps, profile_to / f"profile-{work.name}.txt")
        return {}
    r = interleave(engine, training, plain, device, size.warmup, size.rounds, size.steps)
    suite_rates, plain_rates = [size.steps / t for t in r.suite_s], [size.steps / t for t in r.plain_s]
    suite_rate, plain_rate = statistics.median(suite_rates), statistics.median(plain_rates)
    out = {"suite_steps_per_s": suite_rate, "plain_steps_per_s": plain_rate,
           "suite_examples_per_s": suite_rate * batch, "plain_examples_per_s": plain_rate * plain.examples,
           **median_ratio(suite_rates, plain_rates), "suite_peak_mb": r.suite_peak, "plain_peak_mb": r.plain_peak,
           "batch": float(batch),
           "host_reads_per_step": getattr(engine, "host_reads", float("nan")) / max(engine.step, 1)}
    del engine, training, plain
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------------------- the loss core

def loss_cases(n: int, device: torch.device, compiled: bool = False
               ) -> dict[str, tuple[Callable[[], Tensor], list[Tensor], int]]:
    """Every loss of the core (installed plugins left out), dense and tiled, at 2N = ``n``, d = 128, fp32, on its
    example inputs (:func:`suite.losses.examples.example_inputs`, three views; the same seed for every case, so every
    loss sees the same samples); the plain InfoNCE at 2N (and three plain pairs for the three-view losses). Value:
    (forward, leaves, views). ``compiled``: each loss's dense path also as the engine runs it on one GPU, its call
    through ``torch.compile(fullgraph=True)`` (``<loss>-compiled``, :func:`suite.train.engine.compile_loss_of`;
    issue 78), and the plain InfoNCE compiled beside it (``plain-infonce-compiled``); compiled on first call."""
    import suite.losses as L
    from suite.losses.examples import example_inputs
    from suite.losses.tiling import auto_rows
    from suite.train.engine import compile_loss_of

    def inputs(name: str, graph: str = "matrix") -> Any:
        return example_inputs(name, n // 2, 128, views=3, graph=graph, generator=torch.Generator().manual_seed(0),
                              device=device)

    gen = torch.Generator().manual_seed(0)  # the plain loop's inputs: the same samples as every loss case's
    a, b, c = (torch.randn(n // 2, 128, generator=gen).to(device).requires_grad_() for _ in range(3))
    out: dict[str, tuple[Callable[[], Tensor], list[Tensor], int]] = {
        "plain-infonce": (lambda: nt_xent(a, b), [a, b], 2),
        "plain-infonce-3pairs": (lambda: nt_xent(a, b) + nt_xent(a, c) + nt_xent(b, c), [a, b, c], 3)}
    if compiled:
        plain = torch.compile(nt_xent, fullgraph=True)
        out["plain-infonce-compiled"] = (lambda: plain(a, b), [a, b], 2)
    for name in sorted(set(L.available()) - set(L.plugins())):
        for path, chunk in (("dense", None), ("tiled", auto_rows(n)), *((("compiled", None),) if compiled else ())):
            ex = inputs(name, "matrix" if chunk is None else "embeddings")
            loss = L.build(name, chunk_size=chunk).to(device)
            if path == "compiled":
                compile_loss_of(loss, device, wanted=True)
            out[f"{name}-{path}"] = (ex.call(loss), ex.leaves, 3 if loss.multi_view else 2)
    return out


def measure_losses(n: int, device: torch.device, repeats: int, compiled: bool = False) -> dict[str, dict[str, float]]:
    """Median forward + backward time of every case (``compiled``: :func:`loss_cases`' compiled ones too, compiled in
    the warm-up), interleaved; the ratio to the plain InfoNCE (three-view losses: to three plain pairs) by
    :func:`median_ratio`. The losses run as the engine runs them: their input checks deferred to the engine's read
    (:func:`suite.losses.checks.deferred`)."""
    from suite.losses.checks import DeferredChecks, deferred

    cases = loss_cases(n, device, compiled)
    times: dict[str, list[float]] = {k: [] for k in cases}
    peaks: dict[str, float] = {}
    failed: dict[str, str] = {}
    checks = DeferredChecks()

    def once(k: str) -> float:
        fn, leaves, _ = cases[k]
        # as the engine runs a loss: its input checks read with the loss, not in the step
        dt, peak = step(fn, leaves, device, lambda: deferred(checks))
        checks.pending.clear()
        peaks[k] = nan_max(peaks.get(k, math.nan), peak)
        return dt

    for k in list(cases):  # warm-up (and cases that cannot run at this size: out of memory; or cannot compile)
        try:
            once(k)
        except torch.cuda.OutOfMemoryError as exc:
            failed[k] = f"out of memory ({str(exc).splitlines()[0][:80]})"
            del cases[k]
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - a compiled case that does not compile is a finding, not a crash
            if not k.endswith("-compiled"):
                raise
            failed[k] = f"did not compile ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
            del cases[k]
    for _ in range(repeats):
        for k in cases:
            times[k].append(once(k))

    def value_and_grads(k: str) -> list[Tensor]:
        fn, leaves, _ = cases[k]
        for t in leaves:
            t.grad = None
        with deferred(checks):
            value = fn()
            value.backward()
        checks.pending.clear()
        return [value.detach(), *(t.grad for t in leaves if t.grad is not None)]

    out: dict[str, dict[str, float]] = {}
    for k in cases:
        ref = times["plain-infonce-3pairs" if cases[k][2] == 3 else "plain-infonce"]
        out[k] = {"ms": 1e3 * statistics.median(times[k]), **median_ratio(times[k], ref),
                  "peak_mb": peaks.get(k, math.nan)}
        eager = "plain-infonce" if k == "plain-infonce-compiled" else k.replace("-compiled", "-dense")
        if k.endswith("-compiled") and eager in cases:  # the compiled call against the eager one, gpu-check's measure
            pairs = list(zip(value_and_grads(k), value_and_grads(eager)))
            out[k]["max_rel_diff"] = max(float(((a - b).abs() / (b.abs() + 1e-2)).max()) for a, b in pairs)
    for k, why in failed.items():
        out[k] = {"ms": math.nan, "ratio": math.nan, "peak_mb": math.nan, "failed": why}  # type: ignore[dict-item]
    return out


# ----------------------------------------------------------------------------- record

def _record(registry: Any, task: str, dataset: str, config: dict[str, Any], metrics: dict[str, float]) -> None:
    from benchmarks.measurements.measured import Measurement, record

    record(registry, Measurement(task, dataset, "infonce" if task == TASK else dataset.rsplit("-", 2)[0], config,
                                 {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}, "ratio"))



def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.measurements.gpu_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA where there is one), cpu or cuda[:N]")
    ap.add_argument("--size", choices=sorted(SIZES), default=None, help="full on a GPU, tiny on the CPU (default)")
    ap.add_argument("--only", default="", help="comma-separated: front-end names, or 'losses'")
    ap.add_argument("--skip-losses", action="store_true")
    ap.add_argument("--repeats", type=int, default=0, help="loss-core rounds (default: 10 full, 3 tiny)")
    ap.add_argument("--registry", default=None, help="registry (default: $SUITE_REGISTRY)")
    ap.add_argument("--loss-n", default="", help="comma-separated 2N of the loss core (default: the size's)")
    ap.add_argument("--compiled-losses", action=argparse.BooleanOptionalAction, default=None,
                    help="the loss core at its first size also compiled, as the engine runs it on one GPU (default: "
                         "on CUDA)")
    ap.add_argument("--no-record", action="store_true", help="print this call's table only")
    ap.add_argument("--compile", action="store_true", help="both sides of each front-end through torch.compile (the "
                    "suite's --compile beside a compiled plain loop); recorded as its own rows")
    ap.add_argument("--out", default=None, help="the Markdown table, from the registry (default: results/tables/"
                    "gpu_bench.md; the committed one is rebuilt from the snapshot by suite bench report)")
    ap.add_argument("--profile", default="", help="a folder: instead of measuring, torch.profiler tables of each "
                    "front-end's two sides (a profiler slows every launch after it: never in a measuring process)")
    args = ap.parse_args(argv)
    from suite.train import resolve_device

    device = resolve_device(args.device)
    size_name = args.size or ("full" if device.type == "cuda" else "tiny")
    size = SIZES[size_name]
    if args.compiled_losses is None:
        args.compiled_losses = device.type == "cuda"
    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    info = {**device_info(device), "size": size_name, **({"compile": True} if args.compile else {})}
    only = {s for s in args.only.split(",") if s}
    from suite.registry import Registry

    reg = Registry(args.registry) if not args.no_record else Registry(str(Path(tempfile.mkdtemp()) / "r.sqlite"))
    from benchmarks.paths import results_target

    out = results_target(args.out, RESULTS, reg)  # never the committed table from a run's registry (issue 80)
    os.environ.setdefault("SUITE_NO_PROGRESS", "1")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        scratch = Path(tmp)
        # the loss core first, in a process nothing else has run in yet (front-ends leave workers and caches behind)
        if not args.skip_losses and not args.profile and (not only or "losses" in only):
            loss_n = [int(v) for v in args.loss_n.split(",") if v] or list(size.loss_n)
            for i, n in enumerate(loss_n):  # compiled as the engine runs them: at the first size (issue 78)
                res = measure_losses(n, device, args.repeats or (10 if size_name == "full" else 3),
                                     compiled=args.compiled_losses and i == 0)
                for case, m in res.items():
                    print(f"loss 2N={n} {case}: {m['ms']:.2f} ms, ratio {m['ratio']:.2f}", flush=True)
                    _record(reg, LOSS_TASK, case, {**info, "n": n, "d": 128, "precision": "fp32",
                                                   **({"failed": m["failed"]} if "failed" in m else {})}, m)
        if not only or only - {"losses"}:
            for work in front_ends(size, device, bf16, scratch, args.compile):
                if only and work.name not in only:
                    continue
                try:
                    m = measure_front_end(work, size, device, scratch, Path(args.profile) if args.profile else None)
                except Exception:  # noqa: BLE001 - one front-end's fault is reported, the others still measured
                    failures.append(work.name)
                    traceback.print_exc()
                    continue
                if args.profile:
                    continue
                print(f"{work.name}: suite {m['suite_examples_per_s']:,.0f} {work.unit}/s, plain "
                      f"{m['plain_examples_per_s']:,.0f}/s, ratio {m['ratio']:.2f}", flush=True)
                _record(reg, TASK, work.name, {**info, **work.config, "plain": PLAIN_VERSION}, m)
    text = table(reg, allow_dirty=True)
    if args.no_record:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"gpu-bench: {out}")
    if failures:
        print(f"gpu-bench: {len(failures)} front-end(s) failed: {', '.join(failures)} (tracebacks above)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
