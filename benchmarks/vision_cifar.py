"""CIFAR-10 benchmark of the vision front-end: every loss of the core in SimCLR, kNN and linear
accuracy on balanced and CACR-imbalanced (linear / exponential) training sets, and the images/s of
augmentation alone, the encoder alone and a full training step.

Profiles:
- ``cpu``: small ConvNet (width 16), a seeded balanced subset of the local CIFAR-10 training
  images (``--train-per-class``, default 500 = 5,000 images), 6 epochs, Adam (MACL's CIFAR
  optimiser); kNN bank and linear-probe training set: the same 500 training images per class;
  test: all 10,000 test images. A V = 2 run takes about 70 s (``--jobs 2 --threads 1`` on the 2
  idle cores; V = 5 rows about 2.5x); the whole grid (240 runs) measured 3.9 h of run time summed,
  about 2 h wall. It ranks losses at small scale; it does not reproduce the papers' accuracies.
- ``paper``: CIFAR ResNet-18 (AlexNet for the CACR rows with ``--alexnet-cacr``), 200 epochs, the
  full CIFAR-10 training and test sets (for GPU users).

Rows: infonce, dcl, macl, cacr (V = 2 and V = 5), cmc (V = 5), align_uniform, hard_negative,
tsimclr and infonce at d = 128 and d = 8, supcon and xclr (labelled references), plus the randomly
initialised encoder. Each (row, batch size, imbalance, seed) is one registry run (task
``bench-vision-cifar``); runs already finished with the same config are reused, so an interrupted
benchmark resumes, and the table is regenerated from the registry after every run.

Run: ``suite bench vision-cifar --profile cpu`` (or ``python -m benchmarks.vision_cifar``);
``--quick`` runs the priority subset only. Writes ``benchmarks/results/vision_cifar.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks.claims import RULE_TEXT, Claim, combine, mean_std
from benchmarks.parallel import run_cells
from suite.registry import Registry, config_hash, markdown_table
from vision.config import PretrainConfig

RESULTS = Path(__file__).resolve().parent / "results" / "vision_cifar.md"
TASK = "bench-vision-cifar"


@dataclass(frozen=True)
class Row:
    name: str
    loss: str
    views: int = 2
    proj_dim: int = 128
    hparams: dict[str, Any] = field(default_factory=dict)
    epochs0: bool = False  # the randomly initialised reference


ROWS = [
    Row("random init", "infonce", epochs0=True),
    Row("infonce (SimCLR)", "infonce"),
    Row("dcl", "dcl"),
    Row("macl", "macl"),
    Row("cacr K=1 (V=2)", "cacr"),
    Row("cacr K=4 (V=5)", "cacr", views=5),
    Row("cmc K=4 (V=5)", "cmc", views=5),
    Row("align_uniform", "align_uniform"),
    Row("hard_negative", "hard_negative"),
    Row("tsimclr d=128", "tsimclr"),
    Row("tsimclr d=8", "tsimclr", proj_dim=8),
    Row("infonce d=8", "infonce", proj_dim=8),
    Row("supcon (labels)", "supcon"),
    Row("xclr (labels + captions)", "xclr"),
]
ROW_BY_NAME = {r.name: r for r in ROWS}

# Published numbers beside ours (CIFAR-10, %). Keys: (row name, batch size or None, imbalance).
PUBLISHED: dict[tuple[str, str], str] = {
    ("infonce (SimCLR)", "cacr"): "83.47 / 79.88 / 71.74 (CACR T2, AlexNet, linear; bal / lin / exp)",
    ("align_uniform", "cacr"): "83.49 / 80.25 / 71.62 (CACR T2)",
    ("hard_negative", "cacr"): "83.67 / 80.51 / 72.74 (CACR T2)",
    ("cacr K=1 (V=2)", "cacr"): "83.73 / 80.46 / 73.02 (CACR T2)",
    ("cmc K=4 (V=5)", "cacr"): "85.54 / 82.20 / 74.77 (CACR T2)",
    ("cacr K=4 (V=5)", "cacr"): "86.54 / 83.62 / 75.89 (CACR T2)",
    ("infonce (SimCLR)", "macl"): "linear 82.31 @64, 84.65 @256 (MACL T9, ResNet-18); kNN 80.8 d=128 (t-SimCLR F2b)",
    ("dcl", "macl"): "linear 86.28 @64, 86.29 @256 (MACL T9)",
    ("macl", "macl"): "linear 87.11 @64, 87.27 @256 (MACL T9)",
    ("tsimclr d=128", "tsimclr"): "kNN 83.9 (t-SimCLR F2b, ResNet-18)",
    ("tsimclr d=8", "tsimclr"): "kNN 81.7 (t-SimCLR F2b)",
}

PROFILES: dict[str, dict[str, Any]] = {
    "cpu": dict(encoder="convnet", width=16, epochs=6, optimizer="adam", lr=1e-3, weight_decay=1e-6,
                train_per_class=500, eval_train_per_class=500, test_per_class=0, geometry_batches=2,
                batch_sizes=(64, 256), seeds=(0, 1, 2)),
    "paper": dict(encoder="resnet18", width=0, epochs=200, optimizer="adam", lr=1e-3, weight_decay=1e-6,
                  train_per_class=0, eval_train_per_class=0, test_per_class=0, geometry_batches=20,
                  batch_sizes=(64, 256), seeds=(0, 1, 2)),
}

# Priority order for --quick: what the papers' claims need first.
QUICK = [
    ("random init", 64, "none"), ("infonce (SimCLR)", 64, "none"), ("macl", 64, "none"),
    ("infonce (SimCLR)", 256, "none"), ("macl", 256, "none"),
    ("cacr K=4 (V=5)", 64, "none"), ("cmc K=4 (V=5)", 64, "none"),
    ("tsimclr d=8", 64, "none"), ("infonce d=8", 64, "none"), ("tsimclr d=128", 64, "none"),
    ("infonce (SimCLR)", 64, "linear"), ("cacr K=4 (V=5)", 64, "linear"), ("cmc K=4 (V=5)", 64, "linear"),
    ("infonce (SimCLR)", 64, "exponential"), ("cacr K=4 (V=5)", 64, "exponential"), ("cmc K=4 (V=5)", 64, "exponential"),
    ("dcl", 64, "none"), ("cacr K=1 (V=2)", 64, "none"), ("align_uniform", 64, "none"), ("hard_negative", 64, "none"),
    ("supcon (labels)", 64, "none"), ("xclr (labels + captions)", 64, "none"),
]


def make_config(row: Row, profile: str, batch_size: int, imbalance: str, seed: int, out_dir: str,
                epochs: int | None = None, train_per_class: int | None = None, alexnet_cacr: bool = False) -> PretrainConfig:
    p = PROFILES[profile]
    encoder = "alexnet" if (alexnet_cacr and profile == "paper" and row.loss in ("cacr", "cmc")) else p["encoder"]
    return PretrainConfig(
        dataset="cifar10", framework="simclr", loss=row.loss, loss_hparams=dict(row.hparams), views=row.views,
        proj_dim=row.proj_dim, encoder=encoder, width=p["width"] if encoder == p["encoder"] else 0.0,
        epochs=0 if row.epochs0 else (epochs if epochs is not None else p["epochs"]), batch_size=batch_size,
        optimizer=p["optimizer"], lr=p["lr"] * max(1.0, batch_size / 256), weight_decay=p["weight_decay"],
        imbalance=imbalance,  # type: ignore[arg-type]
        train_per_class=p["train_per_class"] if train_per_class is None else train_per_class,
        eval_train_per_class=p["eval_train_per_class"], eval_test_per_class=p["test_per_class"], geometry_batches=p["geometry_batches"], iou_weights=False, seed=seed, out_dir=out_dir,
        run_name="", resume=True, registry=False, ckpt_every=1,
    )


def run_one(cfg: PretrainConfig, registry: Registry, row: Row, profile: str, signature: str) -> dict[str, float]:
    """Pretrain + evaluate one configuration and record it; a finished identical run is reused."""
    from vision.train import pretrain

    logged = {**dataclasses.asdict(cfg), "row": row.name, "profile": profile, "signature": signature}
    done = registry.find_finished(config_hash(logged))
    if done is not None:
        return {k[0]: v for k, v in registry.final_metrics(done["id"]).items() if k[1] == "test"}
    res = pretrain(cfg, None)
    with registry.run(modality="vision", task=TASK, dataset=f"cifar10-{profile}-{cfg.imbalance}", loss=cfg.loss,
                      loss_hparams=dict(cfg.loss_hparams), config=logged, seed=cfg.seed) as run:
        run.log_many({k: float(v) for k, v in res.get("train", {}).items()}, split="train", step=cfg.epochs)
        run.log_many({"train_images": res["data"]["train"], "wall_s": res["wall_s"]}, split="data")
        run.log_many({f"class_count_{i}": c for i, c in enumerate(res["data"].get("class_counts", []))}, split="data")
        run.log_many(res["metrics"], split="test", step=cfg.epochs)
    return dict(res["metrics"])


# ----------------------------------------------------------------------------- throughput

def throughput(profile: str, batch_size: int = 256, views: int = 2, repeats: int = 3) -> dict[str, float]:
    """images/s of augmentation alone, encoder alone (forward + backward of V views), full step."""
    import suite.losses as L
    from vision.methods import SimCLR
    from vision.models import build_encoder
    from vision.transforms import ViewAugment, get_recipe

    p = PROFILES[profile]
    torch.manual_seed(0)
    x = torch.randint(0, 256, (batch_size, 3, 32, 32), dtype=torch.uint8)
    aug = ViewAugment(get_recipe("cifar"), views)
    enc = build_encoder(p["encoder"], p["width"], 32)
    method = SimCLR(enc, L.build("infonce"))
    opt = torch.optim.Adam(method.parameters(), lr=1e-3)
    v = aug(x).views

    def t_aug() -> None:
        aug(x)

    def t_enc() -> None:
        opt.zero_grad()
        enc(v.flatten(0, 1)).float().pow(2).mean().backward()

    def t_step() -> None:
        opt.zero_grad()
        method(aug(x).views).backward()
        opt.step()

    out = {}
    for name, fn in (("augmentation", t_aug), ("encoder", t_enc), ("full_step", t_step)):
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        out[name] = batch_size / statistics.median(ts)
    out["aug_fraction"] = out["full_step"] / out["augmentation"]
    return out


# ----------------------------------------------------------------------------- table

def _fmt(vals: list[float]) -> str:
    return mean_std(vals, digits=1, scale=100, show_n=False, empty="not run")


def signature_of(profile: str, epochs: int, train_per_class: int) -> str:
    """Runs of one table share the profile (with its evaluation sizes), epochs and training-subset size."""
    p = PROFILES[profile]
    return f"{profile}-e{epochs}-tpc{train_per_class}-ev{p['eval_train_per_class']}-te{p['test_per_class']}"


def collect(registry: Registry, signature: str) -> dict[tuple[str, int, str], dict[str, list[float]]]:
    out: dict[tuple[str, int, str], dict[str, list[float]]] = {}
    for r in registry.runs(task=TASK, status="finished"):
        cfg = r["config"] if isinstance(r["config"], dict) else json.loads(r["config"])
        if cfg.get("signature") != signature:
            continue
        key = (cfg["row"], int(cfg["batch_size"]), cfg["imbalance"])
        fm = registry.final_metrics(r["id"])
        d = out.setdefault(key, {"knn": [], "lin": [], "seeds": [], "wall": []})
        if ("knn_acc", "test") in fm:
            d["knn"].append(fm[("knn_acc", "test")])
        if ("linear_acc", "test") in fm:
            d["lin"].append(fm[("linear_acc", "test")])
        d["seeds"].append(r["seed"])
        d["wall"].append(fm.get(("wall_s", "data"), float("nan")))
    return out


def _mean(d: dict[str, list[float]] | None, k: str) -> float | None:
    return statistics.mean(d[k]) if d and d.get(k) else None


def write_table(registry: Registry, signature: str, out: Path, settings: str, thr: dict[str, float] | None,
                batch_sizes: tuple[int, ...], commands: list[str] | None = None) -> str:
    res = collect(registry, signature)
    rows = []
    for row in ROWS:
        for bs in batch_sizes[:1] if row.epochs0 else batch_sizes:
            bal = res.get((row.name, bs, "none"))
            cells = [row.name, bs]
            for imb in ("none", "linear", "exponential"):
                d = res.get((row.name, bs, imb))
                for k in ("knn", "lin"):
                    cell = _fmt(d[k]) if d else ("n/a (not trained)" if row.epochs0 and imb != "none" else "not run")
                    if imb != "none" and d and bal and _mean(bal, k) is not None and _mean(d, k) is not None:
                        cell += f" ({100 * (_mean(d, k) - _mean(bal, k)):+.1f})"  # type: ignore[operator]
                    cells.append(cell)
            seeds = sorted({s for imb in ("none", "linear", "exponential") for s in res.get((row.name, bs, imb), {}).get("seeds", [])})
            cells.append(",".join(map(str, seeds)) or "-")
            walls = [w for imb in ("none", "linear", "exponential") for w in res.get((row.name, bs, imb), {}).get("wall", [])]
            cells.append(f"{sum(walls):.0f}" if walls else "-")
            pub = "; ".join(v for (n, _), v in PUBLISHED.items() if n == row.name) if bs == batch_sizes[0] else ""
            cells.append(pub or "")
            rows.append(cells)
    table = markdown_table(["row", "batch", "kNN bal", "linear bal", "kNN lin-imb (change)", "linear lin-imb (change)",
                            "kNN exp-imb (change)", "linear exp-imb (change)", "seeds", "run s (summed over its runs)", "published (CIFAR-10, full scale)"], rows)
    claims = _claims(res, batch_sizes)
    lines = ["# Vision CIFAR-10 benchmark (generated by `suite bench vision-cifar`)", "", settings, "",
             "Accuracies in %; kNN: weighted k = 200, T = 0.1 on backbone features; linear: logistic regression on "
             "standardised frozen backbone features. Changes (in points, negative = drop) are from the balanced run of the same row and batch size. "
             "\"not run\" = not measured yet (see the commands at the end).", "", table, "", "## Claims at this scale", ""]
    lines += [f"- {c}" for c in claims]
    lines += ["", "Each claim is a set of margins (contrasts of cell means, linear probe unless stated) that must all be "
              "positive; each margin is judged by Welch's t-test on the per-seed values of its cells (Welch-Satterthwaite "
              "degrees of freedom for contrasts of more than two cells), and the claim is confirmed when every margin is. "
              + RULE_TEXT + " With three seeds and a few hundred training steps the verdicts say what this run measured, "
              "not whether the paper's claim holds at its scale."]
    if thr:
        lines += ["", "## Throughput (images/s, batch 256, V = 2, this profile's encoder, CPU)", "",
                  markdown_table(["augmentation alone", "encoder alone (fwd+bwd, 2 views)", "full step", "augmentation share of a step"],
                                 [[f"{thr['augmentation']:.0f}", f"{thr['encoder']:.0f}", f"{thr['full_step']:.0f}",
                                   f"{100 * thr['aug_fraction']:.0f}%"]]),
                  "", f"Target: augmentation under 25% of a step: {'met' if thr['aug_fraction'] < 0.25 else '**missed**'}."]
    rnd = res.get(("random init", batch_sizes[0], "none"))
    trained = {k: v for k, v in res.items() if k[2] == "none" and k[0] != "random init" and v["knn"]}
    gains = [100 * (statistics.mean(v["knn"]) - statistics.mean(rnd["knn"])) for v in trained.values()] if rnd and rnd["knn"] else []
    lines += ["", "## Notes", "",
              f"- Scale: the randomly initialised encoder scores kNN {_fmt(rnd['knn']) if rnd else 'n/a'} / linear "
              f"{_fmt(rnd['lin']) if rnd else 'n/a'} on the same evaluation"
              + (f"; the trained balanced rows gain {min(gains):+.1f} to {max(gains):+.1f} kNN points over it" if gains else "")
              + ". The papers' numbers (ResNet-18 / AlexNet, 200 epochs, 50,000 images) are printed for reference, not for "
              "comparison.",
              "- Imbalanced rows pretrain on the class-imbalanced subset of the same training subset for the same "
              "number of epochs (fewer steps, as in CACR) and are evaluated on the balanced bank and test split.",
              "- K = 4 rows (V = 5) use the same batch size in images as the V = 2 rows, so each step encodes 5 B "
              "views (CACR divides the batch by 4 for K = 4 instead).",
              "- xclr's soft graph: cosine similarities of \"a photo of a {class}\" captions under the packaged "
              "all-MiniLM-L6-v2 (cached); supcon and xclr use labels and are reference points, not self-supervised.",
              "- The exponential rule keeps 0.1^((10-l)/9) of class l (the CACR text's formula is garbled in "
              "extraction; this is the standard exponential profile with the same 10x range as the linear rule)."]
    walls = [w for d in res.values() for w in d["wall"] if w == w]
    if walls:
        lines.append(f"- Cost: {len(walls)} runs in this table, {sum(walls) / 3600:.1f} h of run time summed over them "
                     f"(1 torch thread each); with `--jobs 2 --threads 1` on 2 cores that is about "
                     f"{sum(walls) / 7200:.1f} h wall.")
    if commands:
        missing = sum(c.startswith("not run") for r in rows for c in r[2:8])
        lines += ["", "## Commands" + (f" ({missing} cells not run yet)" if missing else ""), ""]
        lines += [f"- `{c}`" for c in commands]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


Cells = dict[tuple[str, int, str], dict[str, list[float]]]
Key = tuple[str, int, str, str]  # (row, batch size, imbalance, "lin" | "knn")


def _judge(res: Cells, text: str, margins: list[list[tuple[float, Key]]]) -> str:
    """Verdict of a claim whose ``margins`` (each a contrast: [(coefficient, cell)]) must all be positive."""
    claim = Claim("vision-cifar", "", "", "accuracy (%)", text)

    def vals(row: str, bs: int, imb: str, k: str) -> list[float]:
        return [100 * v for v in res.get((row, bs, imb), {}).get(k, [])]

    results = [claim.judge_contrast([(c, vals(*key)) for c, key in m]) for m in margins]
    return f"**{combine(results)}** (" + "; ".join(f"margin {i + 1}: {r.evidence(1)}" for i, r in enumerate(results)) + ")"


def _claims(res: Cells, batch_sizes: tuple[int, ...]) -> list[str]:
    def acc(row: str, bs: int, imb: str = "none", k: str = "lin") -> float | None:
        return _mean(res.get((row, bs, imb)), k)

    nce, cacr, cmc = "infonce (SimCLR)", "cacr K=4 (V=5)", "cmc K=4 (V=5)"
    out = []
    small, large = min(batch_sizes), max(batch_sizes)
    m_s, n_s, m_l, n_l = (acc("macl", small), acc(nce, small), acc("macl", large), acc(nce, large))
    if None in (m_s, n_s, m_l, n_l):
        out.append(f"MACL beats NT-Xent most at small batch (MACL Table 9): **not checked** (needs macl and infonce at "
                   f"batch {small} and {large}).")
    else:
        gs, gl = m_s - n_s, m_l - n_l  # type: ignore[operator]
        gain_small = [(1.0, ("macl", small, "none", "lin")), (-1.0, (nce, small, "none", "lin"))]
        gain_large = [(1.0, ("macl", large, "none", "lin")), (-1.0, (nce, large, "none", "lin"))]
        out.append(f"MACL beats NT-Xent most at small batch (MACL Table 9): gain {100 * gs:+.1f} at {small}, "
                   f"{100 * gl:+.1f} at {large} (linear) -> "
                   + _judge(res, "MACL beats NT-Xent most at small batch",
                            [gain_small, gain_small + [(-c, k) for c, k in gain_large]]) + ".")
    c, m = acc(cacr, small), acc(cmc, small)
    if None in (c, m):
        out.append("CACR K=4 beats CMC K=4 (CACR Table 2): **not checked**.")
    else:
        out.append(f"CACR K=4 beats CMC K=4 (CACR Table 2): {100 * c:.1f} vs {100 * m:.1f} (linear, batch {small}) -> "  # type: ignore[operator]
                   + _judge(res, "CACR K=4 beats CMC K=4", [[(1.0, (cacr, small, "none", "lin")),
                                                               (-1.0, (cmc, small, "none", "lin"))]]) + ".")
    rows3 = (nce, cacr, cmc)
    drops = {(r, i): acc(r, small) - acc(r, small, i)  # type: ignore[operator]
             for r in rows3 for i in ("linear", "exponential") if acc(r, small) is not None and acc(r, small, i) is not None}
    if len(drops) == 6:
        parts, margins = [], []
        for imb in ("linear", "exponential"):
            for r in (nce, cmc):  # CACR's drop must be smaller than each other row's: drop(r) - drop(cacr) > 0
                margins.append([(1.0, (r, small, "none", "lin")), (-1.0, (r, small, imb, "lin")),
                                (-1.0, (cacr, small, "none", "lin")), (1.0, (cacr, small, imb, "lin"))])
            parts.append(f"{imb}: " + ", ".join(f"{r} {100 * drops[(r, imb)]:.1f}" for r in rows3))
        out.append(f"CACR loses least under imbalance (CACR Tables 2, 8): linear-probe drops {'; '.join(parts)} -> "
                   + _judge(res, "CACR loses least under imbalance", margins) + ".")
    else:
        out.append("CACR loses least under imbalance (CACR Tables 2, 8): **not checked** (imbalanced runs missing).")
    t8, t128, s8, s128 = (acc("tsimclr d=8", small, k="knn"), acc("tsimclr d=128", small, k="knn"),
                          acc("infonce d=8", small, k="knn"), acc(nce, small, k="knn"))
    if None in (t8, t128, s8, s128):
        out.append("t-SimCLR keeps its accuracy at d = 8 better than SimCLR (t-SimCLR Fig. 2b): **not checked**.")
    else:
        dt, ds = t128 - t8, s128 - s8  # type: ignore[operator]
        # SimCLR's drop minus t-SimCLR's drop > 0, and t-SimCLR d=8 above SimCLR d=8
        smaller_drop = [(1.0, (nce, small, "none", "knn")), (-1.0, ("infonce d=8", small, "none", "knn")),
                        (-1.0, ("tsimclr d=128", small, "none", "knn")), (1.0, ("tsimclr d=8", small, "none", "knn"))]
        above_at_8 = [(1.0, ("tsimclr d=8", small, "none", "knn")), (-1.0, ("infonce d=8", small, "none", "knn"))]
        out.append(f"t-SimCLR keeps its accuracy at d = 8 better than SimCLR (t-SimCLR Fig. 2b): kNN drop 128 -> 8 "
                   f"t-SimCLR {100 * dt:+.1f}, SimCLR {100 * ds:+.1f}; t-SimCLR d=8 {100 * t8:.1f} vs SimCLR d=8 "  # type: ignore[operator]
                   f"{100 * s8:.1f} -> " + _judge(res, "t-SimCLR keeps its accuracy at d = 8", [smaller_drop, above_at_8])
                   + ".")
    return out


def settings_text(profile: str, epochs: int, train_per_class: int, batch_sizes: tuple[int, ...], seeds: tuple[int, ...],
                  quick: bool) -> str:
    p = PROFILES[profile]
    return (f"Profile `{profile}`: SimCLR framework, encoder {p['encoder']} (width {p['width'] or 'default'}), "
            f"{epochs} epochs, Adam lr 1e-3 x max(1, B/256), weight decay {p['weight_decay']}, CIFAR recipe (crop scale "
            f"0.2-1, flip, jitter 0.4/0.4/0.4/0.1 p 0.8, grayscale p 0.2); training images: "
            f"{'all 50,000' if not train_per_class else f'{train_per_class} per class (seeded subset of the local cifar10-jpg)'}"
            f" before the imbalance rule (linear: class l keeps l/10; exponential: 0.1^((10-l)/9)); kNN bank and probe "
            f"training set: {p['eval_train_per_class'] or 'all'} per class of the balanced training split; test: "
            f"{p['test_per_class'] or 'all'} per class of the test split. Batch sizes {list(batch_sizes)}, seeds "
            f"{list(seeds)}{' (--quick priority subset)' if quick else ''}. Losses use their core defaults (temperature 0.1; "
            f"tsimclr tau 5, df 5; cacr t+ 1, t- 2). Torch threads per run: {torch.get_num_threads()}.")


def run(profile: str = "cpu", quick: bool = False, rows: list[str] | None = None, batch_sizes: tuple[int, ...] | None = None,
        seeds: tuple[int, ...] | None = None, imbalances: tuple[str, ...] = ("none", "linear", "exponential"),
        epochs: int | None = None, train_per_class: int | None = None, out: Path = RESULTS,
        registry: Registry | None = None, out_dir: str = "runs/bench-vision-cifar", measure_throughput: bool = True,
        alexnet_cacr: bool = False, max_runs: int = 0, table_only: bool = False, jobs: int = 1, threads: int = 0) -> str:
    """Run the grid (``jobs`` worker processes with ``threads`` torch threads each; 0 = torch's default)
    and rewrite the table after every run."""
    reg = registry or Registry()
    if threads:  # the throughput measurement then matches what each worker gets
        torch.set_num_threads(threads)
    p = PROFILES[profile]
    bss = tuple(batch_sizes or p["batch_sizes"])
    sds = tuple(seeds or p["seeds"])
    ep = epochs if epochs is not None else p["epochs"]
    tpc = train_per_class if train_per_class is not None else p["train_per_class"]
    if quick:
        plan = [(ROW_BY_NAME[r], b, i, s) for s in sds for (r, b, i) in QUICK if b in bss and i in imbalances]
    else:
        names = rows or [r.name for r in ROWS]
        plan = [(ROW_BY_NAME[n], b, i, s) for s in sds for i in imbalances for b in bss for n in names
                if not (ROW_BY_NAME[n].epochs0 and i != "none")]
    settings = settings_text(profile, ep, tpc, bss, sds, quick)
    sig = signature_of(profile, ep, tpc)
    thr = throughput(profile) if measure_throughput else None
    commands = [f"OMP_NUM_THREADS=1 suite bench vision-cifar --profile {profile} --jobs 2 --threads 1  # full grid: "
                f"{len(ROWS)} rows x batch {list(bss)} x 3 imbalance settings x seeds {list(sds)}; finished runs are "
                "reused from the registry",
                "suite bench vision-cifar --profile paper --alexnet-cacr  # the papers' scale (GPU)"]
    text = write_table(reg, sig, out, settings, thr, bss, commands)
    if table_only:
        return text
    plan = plan[:max_runs] if max_runs else plan
    t_grid = time.perf_counter()
    tasks = [(row.name, profile, bs, imb, seed, out_dir, ep, tpc, alexnet_cacr, sig, threads, reg.url)
             for row, bs, imb, seed in plan]
    for k, (m, took) in run_cells(_job, tasks, jobs):
        row, bs, imb, seed = plan[k]
        print(f"[{k + 1}/{len(plan)}] {row.name:26s} B={bs:3d} {imb:11s} seed {seed}: kNN "
              f"{100 * m.get('knn_acc', float('nan')):.1f} linear {100 * m.get('linear_acc', float('nan')):.1f} "
              f"({took:.0f} s)", flush=True)
        text = write_table(reg, sig, out, settings, thr, bss, commands)
    print(f"grid of {len(plan)} runs: {(time.perf_counter() - t_grid) / 60:.1f} min wall with {jobs} job(s), "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    return text


def _job(row_name: str, profile: str, bs: int, imb: str, seed: int, out_dir: str, epochs: int, tpc: int,
         alexnet_cacr: bool, signature: str, threads: int, registry_url: str) -> tuple[dict[str, float], float]:
    """One (row, batch size, imbalance, seed) run in a worker process (its own registry connection)."""
    if threads:
        torch.set_num_threads(threads)
    row = ROW_BY_NAME[row_name]
    cfg = make_config(row, profile, bs, imb, seed, out_dir, epochs, tpc, alexnet_cacr)
    t0 = time.perf_counter()
    return run_one(cfg, Registry(registry_url), row, profile, signature), time.perf_counter() - t0


def register(sub: Any) -> None:
    p = sub.add_parser("vision-cifar", help="CIFAR-10 SimCLR benchmark of every loss; writes benchmarks/results/vision_cifar.md")
    p.add_argument("--profile", choices=sorted(PROFILES), default="cpu")
    p.add_argument("--quick", action="store_true", help="priority subset of rows (the papers' claims first)")
    p.add_argument("--rows", nargs="+", default=None, choices=[r.name for r in ROWS], metavar="ROW")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--imbalances", nargs="+", default=["none", "linear", "exponential"],
                   choices=["none", "linear", "exponential"])
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--train-per-class", type=int, default=None)
    p.add_argument("--max-runs", type=int, default=0, help="stop after this many runs (0 = all)")
    p.add_argument("--alexnet-cacr", action="store_true", help="paper profile: AlexNet for the cacr/cmc rows")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel (worker processes)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per worker (0 = default); with --jobs 2 on 2 cores use 1")
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument("--table-only", action="store_true", help="only regenerate the table from the registry")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--out-dir", default="runs/bench-vision-cifar", help="checkpoints")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    print(run(args.profile, args.quick, args.rows, tuple(args.batch_sizes) if args.batch_sizes else None,
              tuple(args.seeds) if args.seeds else None, tuple(args.imbalances), args.epochs, args.train_per_class,
              args.out, None, args.out_dir, not args.no_throughput, args.alexnet_cacr, args.max_runs, args.table_only,
              args.jobs, args.threads))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["vision-cifar", *sys.argv[1:]])))
