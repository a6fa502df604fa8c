"""Text benchmark: SimCSE with the core's losses on the default backbone, SentEval STS (+ transfer).

Rows: the backbone as shipped (packaged all-MiniLM-L6-v2), unsupervised SimCSE with infonce, macl,
dcl, cacr and tsimclr on the local wiki sentences (seeds), supervised SimCSE from the local NLI
triplets (SNLI dev+test, SICK train+trial). Columns: STS12-16 ("all" aggregation), STS-B test,
SICK-R test, their average; transfer tasks where run. Published BERT-base numbers are printed beside
ours for reference. Also checked: our STS-B test Spearman vs sentence-transformers'
``EmbeddingSimilarityEvaluator`` for the same model, and the wall/CPU time of the 7-task STS evaluation.

Profiles (settings are written into the table):
- ``cpu``: default backbone, the first ``limit`` (1024) wiki sentences / NLI triplets, batch 64,
  max length 32, lr 3e-5, 1 epoch, STS-B dev at the end only; 3 seeds.
- ``quick``: as cpu with 256 sentences, infonce and macl, seed 0 (smoke run).
- ``paper``: BERT-base (``--backbone`` local path), [CLS] pooling, full wiki1m (``--data``), eval every
  125 steps, transfer tasks too: the SimCSE / MACL setting, for a GPU.

Every run is stored in the registry and as JSON under ``cache_dir("text", "bench")``, so an
interrupted benchmark resumes and ``--write-only`` rebuilds the table from what was measured.

Run: ``suite bench text-sts [--profile cpu] [--losses ...] [--seeds 0 1 2]`` or
``python -m benchmarks.text_sts ...``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.claims import RULE_TEXT, Claim, mean_std
from suite.paths import cache_dir
from suite.registry import Registry, markdown_table

RESULTS = Path(__file__).resolve().parent / "results" / "text_sts.md"
STS_COLS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg")
TR_COLS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "transfer_avg")
PUBLISHED = [  # BERT-base, wiki1m, GPU; MACL paper Table B.4
    ("SimCSE (published, BERT-base, wiki1m)", (68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23, 76.25)),
    ("SimCSE + MACL (published, BERT-base, wiki1m)", (67.16, 82.78, 74.41, 82.52, 79.07, 77.69, 73.00, 76.66)),
]
UNSUP_LOSSES = ("infonce", "macl", "dcl", "cacr", "tsimclr")

PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {"train": dict(backbone="default", pooling="mean", limit=1024, max_length=32, batch_size=64, lr=3e-5, epochs=1,
                          eval_every=0), "seeds": [0, 1, 2], "losses": list(UNSUP_LOSSES), "transfer": "none"},
    "quick": {"train": dict(backbone="default", pooling="mean", limit=256, max_length=32, batch_size=64, lr=3e-5, epochs=1,
                            eval_every=0), "seeds": [0], "losses": ["infonce", "macl"], "transfer": "none"},
    "paper": {"train": dict(backbone="bert-base-uncased", pooling="cls", limit=0, max_length=32, batch_size=64, lr=3e-5,
                            epochs=1, eval_every=125), "seeds": [0, 1, 2], "losses": list(UNSUP_LOSSES), "transfer": "all"},
}


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _store() -> Path:
    return cache_dir("text", "bench")


def _load_result(key: str) -> dict[str, Any] | None:
    p = _store() / f"{key}.json"
    return json.loads(p.read_text()) if p.exists() else None


def _save_result(key: str, rec: dict[str, Any]) -> None:
    (_store() / f"{key}.json").write_text(json.dumps(rec, indent=1, default=str))


def _evaluate(model: str, label: str, seed: int, tasks: str, reg: Registry | None,
              transfer_tasks: list[str] | None = None, cache: bool = True) -> dict[str, float]:
    from text.eval.senteval import TRANSFER, EvalConfig, evaluate_model

    cfg = EvalConfig(model=model, tasks=tasks, label=label, seed=seed, transfer_tasks=list(transfer_tasks or TRANSFER),  # type: ignore[arg-type]
                     cache=cache)
    return evaluate_model(cfg, registry=reg, record=reg is not None)


def st_agreement(model: str = "default") -> dict[str, float]:
    """STS-B test Spearman from our evaluator and from sentence-transformers' EmbeddingSimilarityEvaluator."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from text.data import read_stsb
    from text.eval.encode import EncodeFn
    from text.eval.sts import STSEvaluator
    from text.models import load_encoder, resolve_backbone

    ours = STSEvaluator(["STSB"])(EncodeFn(load_encoder(model), batch_size=128, max_length=256))["stsb"]
    ps = read_stsb("test")
    st = SentenceTransformer(resolve_backbone(model), device="cpu")
    ev = EmbeddingSimilarityEvaluator(ps.a, ps.b, [s / 5.0 for s in ps.scores], batch_size=128, name="stsb-test",
                                      similarity_fn_names=["cosine"], write_csv=False)
    res = ev(st)
    theirs = float(next(v for k, v in res.items() if k.endswith("spearman_cosine")))
    return {"ours": ours, "sentence_transformers": theirs, "abs_diff": abs(ours - theirs)}


def run(profile: str = "cpu", losses: list[str] | None = None, seeds: list[int] | None = None, sup: bool = True,
        transfer: str | None = None, overrides: dict[str, Any] | None = None, out: Path = RESULTS, write_only: bool = False,
        registry: bool = True, transfer_tasks: list[str] | None = None, only: list[str] | None = None) -> str:
    from text.methods.simcse import SimCSEConfig, train_simcse

    prof = PROFILES[profile]
    train_kw = {**prof["train"], **(overrides or {})}
    losses = losses or prof["losses"]
    seeds = seeds if seeds is not None else prof["seeds"]
    transfer = transfer or prof["transfer"]
    reg = Registry() if registry else None
    # order: what the headline comparison needs first (first seed of every loss, backbone), then more seeds
    unsup = [(f"unsup-{loss}", loss, s, {"mode": "unsup", "loss": loss}) for s in seeds for loss in losses]
    first, rest = unsup[:len(losses)], unsup[len(losses):]
    jobs: list[tuple[str, str, int, dict[str, Any]]] = first[:2] + [("backbone", "none", 0, {})] + first[2:]
    if sup:
        jobs += [("sup-infonce", "infonce", s, {"mode": "sup", "loss": "infonce"}) for s in seeds[:1]]
    jobs += rest
    backbone = train_kw["backbone"]
    for label, loss, seed, spec in jobs:
        if only and label not in only:
            continue
        ident = {"label": label, "seed": seed, "train": train_kw if label != "backbone" else {"backbone": backbone}}
        key = _key({**ident, "tasks": "sts"})
        outdir = cache_dir("text", "bench_models", key)
        if _load_result(key) is None and not write_only:
            t0 = time.perf_counter()
            rec: dict[str, Any] = {"label": label, "loss": loss, "seed": seed, "profile": profile, "tasks": "sts", "key": key}
            if label == "backbone":
                rec["metrics"] = _evaluate(backbone, "backbone", 0, "sts", reg, cache=False)  # timed: no embedding cache
                rec["load_avg_1m"] = os.getloadavg()[0]
                try:
                    rec["st_agreement"] = st_agreement(backbone)
                except Exception as exc:  # noqa: BLE001 - recorded, not fatal
                    rec["st_agreement"] = {"error": f"{type(exc).__name__}: {exc}"}
            else:
                cfg = SimCSEConfig(**{**train_kw, **spec, "seed": seed, "out": str(outdir), "keep_checkpoint": False})
                summ = train_simcse(cfg, registry=reg)
                rec["train"] = {k: v for k, v in summ.items() if k != "history"}
                rec["train_cfg"] = train_kw
                rec["metrics"] = _evaluate(str(outdir), label, seed, "sts", reg)
            rec["wall_s"] = time.perf_counter() - t0
            _save_result(key, rec)
            print(f"[text-sts] {label} seed {seed}: avg {rec['metrics'].get('avg', float('nan')):.2f} ({rec['wall_s']:.0f} s)", flush=True)
        # transfer tasks: a separate record on the same model (the trained model is kept in outdir)
        wants = transfer == "all" or (transfer == "first" and seed == seeds[0]) or (transfer == "backbone" and label == "backbone")
        tkey = _key({**ident, "tasks": "transfer", "transfer_tasks": transfer_tasks or list(TR_COLS[:-1])})
        if wants and not write_only and _load_result(tkey) is None:
            t0 = time.perf_counter()
            model = backbone if label == "backbone" else str(outdir)
            trec = {"label": label, "loss": loss, "seed": seed, "profile": profile, "tasks": "transfer", "key": tkey,
                    "train_cfg": train_kw if label != "backbone" else None,
                    "metrics": _evaluate(model, label, seed, "transfer", reg, transfer_tasks)}
            trec["wall_s"] = time.perf_counter() - t0
            _save_result(tkey, trec)
            print(f"[text-sts] {label} seed {seed}: transfer avg {trec['metrics'].get('transfer_avg', float('nan')):.2f} "
                  f"({trec['wall_s']:.0f} s)", flush=True)
    text = write_table(profile, train_kw, losses, seeds, sup, transfer, out)
    return text


def _row_name(label: str, backbone: str) -> str:
    if label == "backbone":
        return f"{backbone} as shipped (no training)"
    mode, loss = label.split("-", 1)
    return f"{'unsupervised' if mode == 'unsup' else 'supervised'} SimCSE, {loss}"


def _avg_in(m: dict[str, float], agg: str) -> float:
    years = [m[f"sts{y}_{agg}"] for y in (12, 13, 14, 15, 16)]
    return statistics.mean(years + [m["stsb"], m["sickr"]])


def _fmt(vals: list[float]) -> str:
    return mean_std(vals, show_n=False, empty="—")


CLAIM = Claim("text/simcse", "macl", "infonce", "avg", "MACL not worse than SimCSE-InfoNCE on the STS average at equal "
              "settings (MACL Table B.4)")


def write_table(profile: str, train_kw: dict[str, Any], losses: list[str], seeds: list[int], sup: bool, transfer: str,
                out: Path) -> str:
    recs = [json.loads(p.read_text()) for p in sorted(_store().glob("*.json"))]
    recs = [r for r in recs if r.get("profile") == profile and "metrics" in r]
    trecs = [r for r in recs if r.get("tasks") == "transfer"]  # transfer evaluations: separate records, same models
    recs = [r for r in recs if r.get("tasks") != "transfer"]
    backbone = train_kw["backbone"]
    rows, tr_rows, done = [], [], {}
    tr_avg: dict[str, float] = {}  # label -> mean 7-task transfer average
    labels = ["backbone"] + [f"unsup-{l}" for l in losses] + (["sup-infonce"] if sup else [])
    for label in labels:
        rs = [r for r in recs if r["label"] == label and (label == "backbone" or r.get("train_cfg") == train_kw)]
        if label == "backbone":  # one row: the most complete evaluation (STS numbers are identical: cached embeddings)
            rs = sorted(rs, key=lambda r: len(r["metrics"]))[-1:]
        rs = [r for r in rs if label == "backbone" or r["seed"] in seeds]
        done[label] = sorted({r["seed"] for r in rs})
        name = _row_name(label, backbone)
        steps = sorted({int(r["train"]["steps"]) for r in rs if "train" in r})
        rows.append([name, ",".join(map(str, done[label])) or "not run", ",".join(map(str, steps)) or ("0" if label == "backbone" else "—")]
                    + [_fmt([r["metrics"][c] for r in rs if c in r["metrics"]]) for c in STS_COLS])
        trs = [r for r in trecs + rs if r["label"] == label and any(c in r["metrics"] for c in TR_COLS)
               and (label == "backbone" or (r.get("train_cfg") == train_kw and r["seed"] in seeds))]
        if trs:
            full = [r["metrics"]["transfer_avg"] for r in trs if all(c in r["metrics"] for c in TR_COLS)]
            if full:
                tr_avg[label] = statistics.mean(full)
            tr_rows.append([name, ",".join(str(r["seed"]) for r in trs)]
                           + [_fmt([r["metrics"][c] for r in trs if c in r["metrics"]]) for c in TR_COLS + ("MRPC_f1",)])
    agg_rows = []
    for label in labels:
        rs = [r for r in recs if r["label"] == label and (label == "backbone" or (r.get("train_cfg") == train_kw and r["seed"] in seeds))]
        rs = sorted(rs, key=lambda r: len(r["metrics"]))[-1:] if label == "backbone" else rs
        if rs:
            agg_rows.append([_row_name(label, train_kw["backbone"])] + [_fmt([_avg_in(r["metrics"], a) for r in rs]) for a in ("all", "mean", "wmean")])
    for name, vals in PUBLISHED:
        rows.append([name, "—", "—"] + [f"{v:.2f}" for v in vals])
    header = ["model", "seeds", "steps", "STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "avg"]
    bb = next((r for r in recs if r["label"] == "backbone"), None)

    def avgs(label: str) -> list[float]:
        return [r["metrics"]["avg"] for r in recs if r["label"] == label and r["seed"] in seeds and r.get("train_cfg") == train_kw]

    def avg_of(label: str) -> float | None:
        return statistics.mean(avgs(label)) if avgs(label) else None

    notes = []
    a_inf, a_macl, a_bb = avg_of("unsup-infonce"), avg_of("unsup-macl"), (bb["metrics"]["avg"] if bb else None)
    if a_inf is not None and a_macl is not None:
        res = CLAIM.judge(avgs("unsup-macl"), avgs("unsup-infonce"))
        notes.append(f"- Target *{CLAIM.text}*: **{res.verdict}** (macl {_fmt(avgs('unsup-macl'))} vs infonce "
                     f"{_fmt(avgs('unsup-infonce'))}, seeds {done['unsup-macl']} / {done['unsup-infonce']}; "
                     f"{res.evidence()}). {RULE_TEXT}")
    else:
        notes.append("- Target *MACL not worse than InfoNCE*: not measured yet (runs missing).")
    if a_bb is not None:
        trained = {l: avg_of(l) for l in labels[1:]}
        trained = {l: v for l, v in trained.items() if v is not None}
        if trained:
            notes.append(f"- Continued contrastive training of the already contrastively trained backbone: the backbone as shipped "
                         f"scores {a_bb:.2f}; trained rows (mean over seeds, change): "
                         + ", ".join(f"{l} {v:.2f} ({v - a_bb:+.2f}, n={len(avgs(l))})" for l, v in trained.items()) + "."
                         + " Caveats: all-MiniLM-L6-v2 was already trained contrastively on >1B sentence pairs and this profile "
                           "trains only a few steps, so whether longer training keeps helping is not measured; nor is this a test "
                           "of SimCSE/MACL on an MLM backbone (the papers' setting: `--profile paper`).")
    if bb is not None:
        m = bb["metrics"]
        if "sts_wall_s" in m:
            verdict = "met" if m["sts_wall_s"] < 120 else "**not met**"
            la = f", load average {bb['load_avg_1m']:.1f} when it ended" if "load_avg_1m" in bb else ""
            notes.append(f"- Target *7-task STS evaluation of the default backbone < 2 min on 2 cores*: {verdict}: wall "
                         f"{m['sts_wall_s']:.0f} s, process CPU time {m['sts_cpu_s']:.0f} s (model load excluded{la}). "
                         "Embeddings are cached per model + data hash, so a repeated evaluation takes seconds.")
        st = bb.get("st_agreement", {})
        if "abs_diff" in st:
            verdict = "met" if st["abs_diff"] < 1e-4 else "MISSED"
            notes.append(f"- Target *agreement with sentence-transformers' EmbeddingSimilarityEvaluator on STS-B test to 1e-4*: {verdict}: "
                         f"ours {st['ours']:.6f}, sentence-transformers {st['sentence_transformers']:.6f}, |diff| {st['abs_diff']:.1e}.")
        elif st:
            notes.append(f"- ST agreement check failed to run: {st.get('error')}")
        skipped = {k: int(v) for k, v in m.items() if k.endswith("_skipped") and v}
        if skipped:
            notes.append(f"- Pairs without a gold score skipped (as SentEval): {skipped}.")
    want = {l: set(seeds[:1] if l.startswith("sup") else seeds) for l in labels[1:]}
    missing = {l: sorted(want[l] - set(done.get(l, []))) for l in labels[1:]}
    missing = {l: v for l, v in missing.items() if v}
    if missing:
        notes.append("- **Not run yet** (time on 2 shared CPU cores): " + ", ".join(f"{l} seeds {v}" for l, v in missing.items())
                     + f". Command: `suite bench text-sts --profile {profile} --threads 1` (resumes; finished runs are reused).")
    proto = ("SentEval's protocol with scikit-learn logistic regression: MR, CR, SUBJ, MPQA 10 outer x 10 inner folds for "
             "C in 2^-2..2^3 (610 fits per task), SST-2 C on dev, TREC and MRPC C by 10-fold CV on train; seed 1111")
    if tr_rows:
        notes.append(f"- Transfer tasks ({proto}): run for the rows and seeds listed in the transfer table only (CPU time); "
                     f"more with `suite bench text-sts --profile {profile} --transfer first|all`.")
        if "backbone" in tr_avg and len(tr_avg) > 1:
            deltas = {l: v - tr_avg["backbone"] for l, v in tr_avg.items() if l != "backbone"}
            notes.append(f"- Transfer after continued training, 7-task average minus the backbone's {tr_avg['backbone']:.2f}: "
                         + ", ".join(f"{l} {d:+.2f}" for l, d in deltas.items())
                         + ". Reported, not judged: no claim is stated on the transfer tasks.")
    else:
        notes.append(f"- Transfer tasks ({proto}): not run yet; `suite bench text-sts --profile {profile} --transfer first|all`.")
    settings = (f"Profile `{profile}`: " + ", ".join(f"{k}={v}" for k, v in train_kw.items())
                + f"; dropout 0.1; MLP head in training only; loss presets: infonce/dcl tau 0.05, macl tau0 0.05 alpha 2 A0 0.8 "
                  f"no reweighting, cacr V=3 dropout views (t_pos 1, t_neg 2), tsimclr defaults (tau 5, dof 5); supervised: "
                  f"SimCSE objective with in-batch + hard negatives (weight 0) from SNLI dev+test and SICK train+trial triplets "
                  f"(SNLI train is not available locally), seed {seeds[:1]}. Unsupervised data: the first `limit` sentences of "
                  f"wiki1m_head11914.txt. Evaluation: SentEval protocol re-implemented, Spearman x 100 of cosine, STS12-16 in the "
                  f"\"all\" aggregation (mean/wmean are in the registry), STS-B and SICK-R test; max eval length 512, batch 128.")
    text = "\n".join([
        "# Text: SimCSE with the core's losses, SentEval STS", "",
        "Generated by `benchmarks/text_sts.py` from measured runs only (registry + stored JSON); CPU, 2 shared cores.", "",
        settings, "",
        markdown_table(header, rows), "",
        "STS average of the seven tasks with STS12-16 in each of SentEval's aggregations (\"all\": pairs of all sub-sets "
        "pooled, SimCSE's headline; \"mean\"; \"wmean\": weighted by pairs):", "",
        markdown_table(["model", "avg (all)", "avg (mean)", "avg (wmean)"], agg_rows), "",
        *([ "Transfer (accuracy %, SentEval protocol with scikit-learn logistic regression):", "",
            markdown_table(["model", "seeds"] + list(TR_COLS) + ["MRPC F1"], tr_rows),
            "", "(— = task not run; `transfer_avg` averages the tasks that were run.)", ""] if tr_rows else []),
        "Published rows are BERT-base trained on the full wiki1m on a GPU (MACL paper, Table B.4); ours use a different, "
        "already sentence-trained backbone and a tiny CPU budget, so they are not comparable number-for-number.", "",
        "## Targets and notes", "", *notes, "",
    ])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def register(sub: Any) -> None:
    p = sub.add_parser("text-sts", help="SimCSE with infonce/macl/dcl/cacr/tsimclr on the default backbone; STS table")
    p.add_argument("--profile", choices=sorted(PROFILES), default="cpu")
    p.add_argument("--losses", nargs="+", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--no-sup", action="store_true", help="skip supervised SimCSE")
    p.add_argument("--transfer", choices=("none", "backbone", "first", "all"), default=None,
                   help="rows evaluated on the transfer tasks: none, the backbone, backbone + first seed of every row, all")
    p.add_argument("--limit", type=int, default=None, help="training sentences / triplets (0 = all)")
    p.add_argument("--backbone", default=None)
    p.add_argument("--data", default=None, help="unsupervised training sentences (e.g. the full wiki1m)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--write-only", action="store_true", help="rebuild the table from stored runs; train nothing")
    p.add_argument("--no-registry", action="store_true")
    p.add_argument("--transfer-tasks", nargs="+", default=None, help="subset of MR CR SUBJ MPQA SST2 TREC MRPC")
    p.add_argument("--only", nargs="+", default=None, help="run only these rows (backbone, unsup-<loss>, sup-infonce)")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default); 1 is much faster "
                                                           "than 2 on an oversubscribed shared machine")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    ov = {k: v for k, v in (("limit", args.limit), ("backbone", args.backbone), ("data", args.data)) if v is not None}
    print(run(args.profile, args.losses, args.seeds, not args.no_sup, args.transfer, ov, args.out, args.write_only,
              not args.no_registry, args.transfer_tasks, args.only))
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers()
    register(sp)
    raise SystemExit(_main(ap.parse_args(["text-sts", *sys.argv[1:]])))
