"""``make gpu-check`` (``python -m suite.gpu_check``): the whole suite on a GPU in one command.

1. Every loss of the core on the same seeded inputs, on CUDA and on the CPU (float32, dense and tiled paths): values
   and input gradients must agree to ``rtol`` / ``atol``.
2. Every front-end for a few steps on CUDA under bf16 autocast: GraphCL on a TU data set, molecular pretraining,
   SimCLR and MoCo-v2 on images, SimCSE on sentences. Vision and text take their own ``--bf16``; the graph front-ends
   have no precision option, so their command runs inside ``torch.autocast(dtype=torch.bfloat16)``
   (``python -m suite.gpu_check exec-bf16 <suite command>``). Each must exit 0.
3. Where there are two GPUs or more, the front-ends that support ``torch.distributed`` once more as two processes under
   ``torchrun``.
4. Each front-end's throughput (the ``*_per_s`` rate its engine logs) recorded in the registry (``SUITE_REGISTRY``)
   as a run of task ``gpu-check``, dataset = the front-end, with ``throughput``, ``wall_s`` and ``processes``; the
   loss comparison as one more (dataset ``losses``: ``paths``, ``agree``, ``max_rel_diff``). Every row's config names
   the device, driver, CUDA, torch and Triton versions and the machine (:func:`suite.machine.environment`).

Without a GPU it says so and exits 0. The data are tiny and synthetic (written into a scratch folder: TU graphs,
SMILES, sentences and a stand-in STS-B dev file; images are scikit-learn's bundled digits), so the check needs
nothing but the installed package. The front-ends run as ``suite`` commands in subprocesses (this module imports
none of them). ``--device cpu`` runs the same plumbing on the CPU (a test of the check itself, not of a GPU).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

NO_GPU = "gpu-check: no CUDA GPU is visible (torch.cuda.is_available() is False); nothing was run."


# ----------------------------------------------------------------------------- 1. losses: CUDA against the CPU

def _value_and_grads(loss: Any, args: Sequence[torch.Tensor], extra: dict[str, torch.Tensor],
                     device: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    xs = [a.detach().to(device).requires_grad_(True) for a in args]
    value = loss.to(device)(*xs, **{k: v.to(device) for k, v in extra.items()})
    grads = torch.autograd.grad(value, xs)
    return value.detach().cpu(), [g.detach().cpu() for g in grads]


@dataclass
class LossResult:
    name: str
    path: str
    ok: bool
    max_rel_diff: float
    error: str = ""


# tiled paths beside each loss's own: X-CLR's graph as embeddings (its target term on the kernels' values path),
# InfoNCE's "cross" arrangement on both sides (the kernels' pair path), and the kernels' general path
# (fused.use("general")) where the symmetric or pair one runs by default
EXTRA_PATHS = (("xclr", "tiled-embeddings"), ("infonce", "tiled-cross"), ("infonce", "tiled-general"),
               ("tsimclr", "tiled-general"), ("cmc", "tiled-general"))


def check_losses(device: torch.device, n: int = 32, d: int = 16, rtol: float = 1e-4, atol: float = 1e-6) -> list[LossResult]:
    """Every loss of the core (installed plugins left out), dense and tiled (``chunk_size=5``), and
    :data:`EXTRA_PATHS`: value and input gradients on ``device`` against the CPU, float32, the same seeded inputs."""
    import suite.losses as L
    from suite.losses import fused
    from suite.losses.examples import example_inputs

    out = []
    plugins = set(L.plugins())
    cases = [(n_, p) for n_ in L.available() if n_ not in plugins for p in ("dense", "tiled")] + list(EXTRA_PATHS)
    for name, path in cases:
        chunk = None if path == "dense" else 5
        try:
            ex = example_inputs(name, n, d, classes=max(2, n // 4), generator=torch.Generator().manual_seed(0),
                                graph="embeddings" if path == "tiled-embeddings" else "matrix", requires_grad=False)
            hp = {"negatives": "cross"} if path == "tiled-cross" else {}
            v_cpu, g_cpu = _value_and_grads(L.build(name, chunk_size=chunk, **hp), ex.args, ex.extra,
                                            torch.device("cpu"))
            with fused.use("general") if path == "tiled-general" else contextlib.nullcontext():
                v_dev, g_dev = _value_and_grads(L.build(name, chunk_size=chunk, **hp), ex.args, ex.extra, device)
            pairs = [(v_dev, v_cpu), *zip(g_dev, g_cpu)]
            rel = max(float(((a - b).abs() / (b.abs() + atol / rtol)).max()) for a, b in pairs)
            ok = all(torch.allclose(a, b, rtol=rtol, atol=atol) for a, b in pairs)
            out.append(LossResult(name, path, ok, rel))
        except Exception as exc:  # a loss that fails on the device is a finding, not a crash of the check
            out.append(LossResult(name, path, False, float("nan"), f"{type(exc).__name__}: {exc}"))
    return out


# ----------------------------------------------------------------------------- 2. front-ends: tiny synthetic data

WORDS = ("a man woman dog cat child is are plays runs eats sleeps guitar piano ball park street red blue big small "
         "the on in with and near").split()
RINGS = ["c1ccccc1", "C1CCCCC1", "c1ccncc1", "C1CCNCC1", "c1ccc2ccccc2c1", "C1CCOC1", "c1ccsc1", "C1CC1", "c1ccoc1"]
TAILS = ["", "C", "O", "N", "CC", "Cl", "CO", "CN"]


def write_data(root: Path, seed: int = 0) -> dict[str, Path]:
    """The scratch data: a TU data set ``GPUCHECK`` (two classes of random graphs with 3 node labels), SMILES, and a
    sentence file with a stand-in STS-B dev split under ``senteval/downstream`` (``SUITE_DATA`` = ``root``)."""
    rng = random.Random(seed)
    tu = root / "TU" / "GPUCHECK" / "raw"
    tu.mkdir(parents=True, exist_ok=True)
    edges, indicator, node_labels, graph_labels, offset = [], [], [], [], 0
    for g in range(80):
        n = rng.randint(6, 14)
        p = 0.25 if g % 2 else 0.5
        for i in range(n):
            for j in range(i + 1, n):
                if j == i + 1 or rng.random() < p / 2:  # a path keeps the graph connected
                    edges += [(offset + i + 1, offset + j + 1), (offset + j + 1, offset + i + 1)]
        indicator += [g + 1] * n
        node_labels += [rng.randrange(3) for _ in range(n)]
        graph_labels.append(g % 2)
        offset += n
    (tu / "GPUCHECK_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (tu / "GPUCHECK_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (tu / "GPUCHECK_graph_labels.txt").write_text("".join(f"{y}\n" for y in graph_labels))
    (tu / "GPUCHECK_node_labels.txt").write_text("".join(f"{y}\n" for y in node_labels))
    smiles = root / "smiles.txt"
    smiles.write_text("".join(f"{t}{r}\n" for r in RINGS for t in TAILS))
    sentences = root / "sentences.txt"
    sent = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))  # noqa: E731
    sentences.write_text("".join(sent() + "\n" for _ in range(256)))
    stsb = root / "senteval" / "downstream" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (stsb / f"sts-{split}.csv").write_text("".join(
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{sent()}\t{sent()}\n" for i in range(32)))
    return {"root": root, "smiles": smiles, "sentences": sentences}


@dataclass
class FrontEnd:
    name: str
    argv: list[str]  # the suite command, without the output folder and device
    autocast: bool  # no precision option of its own: run it inside torch.autocast(bf16)
    distributed: bool = True  # also run as two processes under torchrun where there are two GPUs
    rate: str = ""  # the *_per_s metric its engine logs


def front_ends(data: dict[str, Path], text_backbone: str = "default") -> list[FrontEnd]:
    """The front-end commands of the check; ``text_backbone``: SimCSE's start model (a local model folder where the
    packaged all-MiniLM-L6-v2 is not installed)."""
    root = data["root"]
    return [
        FrontEnd("graph-tu", ["graph", "tu", "--dataset", "GPUCHECK", "--data-root", str(root / "TU"), "--loss", "macl",
                              "--epochs", "2", "--batch-size", "32", "--eval-epochs", "2", "--svm-folds", "2",
                              "--svm-inner-folds", "2"], autocast=True, rate="graphs_per_s"),
        FrontEnd("graph-mol", ["graph", "pretrain-mol", "--corpus", str(data["smiles"]), "--loss", "macl",
                               "--epochs", "1", "--batch-size", "16", "--num-layers", "2", "--emb-dim", "32"],
                 autocast=True, rate="mol_per_s"),
        FrontEnd("vision-simclr", ["vision", "pretrain", "--dataset", "digits", "--framework", "simclr", "--loss", "macl",
                                   "--encoder", "convnet", "--width", "8", "--epochs", "1", "--batch-size", "128",
                                   "--train-per-class", "40", "--eval-train-per-class", "20",
                                   "--eval-test-per-class", "10", "--no-linear-probe", "--bf16"],
                 autocast=False, rate="images_per_s"),
        FrontEnd("vision-moco", ["vision", "pretrain", "--dataset", "digits", "--framework", "moco", "--loss", "infonce",
                                 "--encoder", "convnet", "--width", "8", "--epochs", "1", "--batch-size", "64",
                                 "--queue-size", "256", "--train-per-class", "40", "--eval-train-per-class", "20",
                                 "--eval-test-per-class", "10", "--no-linear-probe", "--bf16"],
                 autocast=False, distributed=False, rate="images_per_s"),
        FrontEnd("text-simcse", ["text", "train", "--data", str(data["sentences"]), "--backbone", text_backbone,
                                 "--loss", "macl", "--max-steps", "4",
                                 "--batch-size", "16", "--eval-every", "0", "--bf16"],
                 autocast=False, rate="sentences_per_s"),
    ]


@dataclass
class FrontEndResult:
    name: str
    processes: int
    ok: bool
    wall_s: float
    throughput: float | None
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _command(fe: FrontEnd, device: str, out: Path, nproc: int) -> list[str]:
    argv = [*fe.argv, "--device", device, "--out", str(out)]
    if fe.autocast:
        argv = ["-m", "suite.gpu_check", "exec-bf16", *argv]
    else:
        argv = ["-m", "suite", *argv]
    if nproc > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), *argv]
    return [sys.executable, *argv]


def _rate(registry: Path, name: str) -> float | None:
    """The last ``name`` metric logged in the scratch registry (the front-end's engine logs it each epoch)."""
    from suite.registry import Registry

    values = [m["value"] for m in Registry(str(registry)).metrics(name=name)]
    return float(values[-1]) if values else None


def run_front_end(fe: FrontEnd, device: str, scratch: Path, nproc: int = 1, timeout: int = 900) -> FrontEndResult:
    tag = f"{fe.name}-x{nproc}"
    registry = scratch / f"{tag}.sqlite"
    env = {**os.environ, "SUITE_DATA": str(scratch / "data"), "SUITE_REGISTRY": str(registry),
           "SUITE_CACHE": str(scratch / "cache"), "SUITE_RUNS": str(scratch / "runs"), "SUITE_NO_PROGRESS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = _command(fe, device, scratch / "runs" / tag, nproc)
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        ok, log = res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    except subprocess.TimeoutExpired:
        ok, log = False, f"timed out after {timeout} s"
    wall = time.perf_counter() - t0
    rate = _rate(registry, fe.rate) if ok and registry.exists() else None
    return FrontEndResult(fe.name, nproc, ok, wall, rate, "" if ok else log, {"command": " ".join(cmd[1:])})


# ----------------------------------------------------------------------------- 3. the registry row of each result

def record(results: list[FrontEndResult], env: dict[str, Any], losses: list[LossResult] | None = None,
           registry: str | None = None) -> list[str]:
    """One ``gpu-check`` run per front-end and process count, and one (dataset ``losses``) for the loss comparison, in
    ``registry`` (default: ``SUITE_REGISTRY``), each with ``env`` (:func:`suite.machine.environment`: the device,
    driver, CUDA, torch and Triton versions, the machine) in its config; returns the run ids."""
    from suite.registry import Registry

    reg = Registry(registry)
    ids = []
    if losses:
        agree = [r for r in losses if r.ok]
        run_id = reg.start_run(modality="gpu", task="gpu-check", dataset="losses", loss="-", seed=0,
                               config={**env, "paths": len(losses)}, run_options={})
        reg.log_metrics(run_id, {"paths": float(len(losses)), "agree": float(len(agree)),
                                 "max_rel_diff": max((r.max_rel_diff for r in losses), default=float("nan"))},
                        split="gpu")
        reg.set_primary(run_id, "agree", "gpu")
        bad = ", ".join(f"{r.name} {r.path}" for r in losses if not r.ok)
        reg.finish(run_id, "finished" if not bad else "failed", f"disagree: {bad}" if bad else None)
        ids.append(run_id)
    for r in results:
        run_id = reg.start_run(modality="gpu", task="gpu-check", dataset=r.name, loss="-", seed=0,
                               config={**env, "front_end": r.name, "processes": r.processes},
                               run_options={"command": r.extra.get("command", "")})
        ids.append(run_id)
        metrics = {"wall_s": r.wall_s, "processes": float(r.processes)}
        if r.throughput is not None:
            metrics["throughput"] = r.throughput
        reg.log_metrics(run_id, metrics, split="gpu")
        if r.throughput is not None:
            reg.set_primary(run_id, "throughput", "gpu")
        reg.finish(run_id, "finished" if r.ok else "failed", None if r.ok else r.log[-500:])
    return ids


# ----------------------------------------------------------------------------- the command

def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["exec-bf16"]:  # a front-end command inside bf16 autocast (the graph front-ends)
        return _exec_bf16(argv[1:])
    p = argparse.ArgumentParser(prog="python -m suite.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu: the check's plumbing on the CPU "
                                                    "(default: cuda)")
    p.add_argument("--only", nargs="+", default=None, help="front-ends to run (default: all; 'none': the losses only)")
    p.add_argument("--skip-losses", action="store_true", help="the front-ends only (the losses' comparison not run)")
    p.add_argument("--no-record", action="store_true", help="do not write the results to the registry")
    p.add_argument("--registry", default=None, help="the registry the rows go to (default: $SUITE_REGISTRY)")
    p.add_argument("--keep", default=None, help="keep the scratch folder here (default: a temporary folder, removed)")
    p.add_argument("--text-backbone", default="default",
                   help="SimCSE's start model (default: the packaged all-MiniLM-L6-v2; a local Hugging Face model "
                        "folder on a machine without it)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(NO_GPU)
        print("gpu-check: run it on a machine with an NVIDIA GPU and a CUDA build of torch (`make gpu-check`).")
        return 0
    from suite.machine import environment

    env = environment(device)
    name = env["device"]
    n_gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    print(f"gpu-check on {name} ({n_gpus} GPU(s) visible), torch {torch.__version__}, driver {env['driver']}, "
          f"Triton {env['triton']}, machine {env['machine']}")

    losses = [] if args.skip_losses else check_losses(device)
    bad = [r for r in losses if not r.ok]
    if losses:
        print(f"\n1. losses on {device} against the CPU (float32, dense and tiled): {len(losses) - len(bad)} of "
              f"{len(losses)} agree")
        print(_table(["loss", "path", "max rel. diff", "agrees"],
                     [[r.name, r.path, f"{r.max_rel_diff:.1e}", "yes" if r.ok else f"**no** {r.error}"]
                      for r in losses]))

    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    results: list[FrontEndResult] = []
    try:
        data = write_data(scratch / "data")
        wanted = [fe for fe in front_ends(data, args.text_backbone) if args.only is None or fe.name in args.only]
        for fe in wanted:
            results.append(run_front_end(fe, str(device), scratch))
            if n_gpus >= 2 and fe.distributed:
                results.append(run_front_end(fe, str(device), scratch, nproc=2))
        if results:
            print(f"\n2. front-ends on {device}, bf16 autocast" + (", and 2 processes under torchrun" if n_gpus >= 2
                                                                     else " (fewer than two GPUs: no torchrun runs)"))
            print(_table(["front-end", "processes", "wall s", "throughput (/s)", "ok"],
                         [[r.name, str(r.processes), f"{r.wall_s:.1f}",
                           f"{r.throughput:.0f}" if r.throughput is not None else "-", "yes" if r.ok else "**no**"]
                          for r in results]))
            for r in results:
                if not r.ok:
                    print(f"\n--- {r.name} x{r.processes} failed: {r.extra.get('command')}\n{r.log}")
        if not args.no_record:
            record(results, env, losses, args.registry)
            print("\n3. recorded in the registry: `suite results list --task gpu-check`")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    failed = len(bad) + sum(not r.ok for r in results)
    print(f"\ngpu-check: {'all checks passed' if not failed else f'{failed} check(s) failed'}")
    return 1 if failed else 0


def _exec_bf16(argv: list[str]) -> int:
    from suite.cli import main as suite_main

    device = "cpu"
    if "--device" in argv:
        device = argv[argv.index("--device") + 1].split(":")[0]
    with torch.autocast(device, dtype=torch.bfloat16):
        return suite_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
