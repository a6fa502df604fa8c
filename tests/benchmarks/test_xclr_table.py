"""The X-CLR table renders from a registry alone: a tmp SQLite holding fake runs that carry the xclr suite's job
hashes; every claim judged by the claims rule, the learned-vs-target numbers and the timing ratio from the rows."""
from __future__ import annotations

import pytest

from benchmarks.tables import xclr
from benchmarks.tables.claims import Claim
from benchmarks.runner.suitefile import Job, load_suite
from suite.registry import Registry

EYE = {f"sim_{i}_{j}": float(i == j) for i in range(10) for j in range(i, 10)}


def _caption_graph() -> dict[str, float]:  # two groups of classes, as the caption graph's animals and vehicles
    return {f"sim_{i}_{j}": 1.0 if i == j else (0.7 if (i < 5) == (j < 5) else 0.3 + 0.01 * (i + j) / 18)
            for i in range(10) for j in range(i, 10)}


def _learned(follow: float, within: float) -> dict[str, float]:
    """Learned similarities: ``within`` on the diagonal, off-diagonal ``follow`` x the caption graph's + a floor."""
    g = _caption_graph()
    return {k: within if k.split("_")[1] == k.split("_")[2] else 0.2 + follow * (g[k] - 0.3) for k in g}


def _unrelated(within: float) -> dict[str, float]:
    """Learned similarities with no relation to the caption graph's two groups."""
    return {f"sim_{i}_{j}": within if i == j else 0.2 + 0.02 * ((i * 7 + j * 3) % 5) for i in range(10)
            for j in range(i, 10)}


def _jobs(**want) -> list[Job]:
    _, jobs = load_suite("xclr")
    out = []
    for j in jobs:
        args = {k.replace("-", "_"): v for k, v in j.args}
        if all((getattr(j, k) if k in ("frontend", "seed") else args.get(k)) == v for k, v in want.items()):
            out.append(j)
    return out


def _record(reg: Registry, job: Job, task: str, metrics: dict, loss: str = "l") -> None:
    by_split: dict = {}
    for (name, split), v in metrics.items():
        by_split.setdefault(split, {})[name] = v
    with reg.run(modality="vision", task=task, dataset="cifar10", loss=loss, seed=job.seed, cfg_hash=job.hash) as run:
        for split, values in by_split.items():  # one write per split (a class-similarity matrix is 55 metrics)
            run.log_many(values, split=split)


@pytest.fixture()
def reg(tmp_path, monkeypatch):
    monkeypatch.setenv("SUITE_CACHE", str(tmp_path / "cache"))
    return Registry(str(tmp_path / "r.sqlite"))


def _vision(reg: Registry, rows: dict[str, tuple[float, dict | None, dict | None]], **want) -> None:
    for job in _jobs(frontend="vision", **want):
        args = {k.replace("-", "_"): v for k, v in job.args}
        key = args.get("text_model", args["loss"]) if args["loss"] == "xclr" else args["loss"]
        if key not in rows:
            continue
        acc, sim, graph = rows[key]
        m = {("linear_acc", "test"): acc + 0.002 * (job.seed or 0), ("knn_acc", "test"): acc - 0.05}
        m.update({(k, "class-sim"): v for k, v in (sim or {}).items()})
        m.update({(k, "class-graph"): v for k, v in (graph or {}).items()})
        _record(reg, job, "pretrain-simclr", m, args["loss"])


def test_table_renders_claims_figure_numbers_and_timing(reg, tmp_path):
    g = _caption_graph()
    _vision(reg, {"infonce": (0.40, _learned(0.0, 0.5), None), "supcon": (0.50, _unrelated(0.6), None),
                  "": (0.55, _learned(1.0, 1.2), g), "labels": (0.50, None, EYE), "random": (0.45, None, None)},
            train_per_class=500, init=None, val_per_class=None)
    for tpc, base in ((50, 0.25), (100, 0.30)):
        _vision(reg, {"infonce": (base, None, None), "supcon": (base + 0.05, None, None), "": (base + 0.04, None, None)},
                train_per_class=tpc)
    (timing,) = _jobs(frontend="bench")
    with reg.run(modality="core", task=xclr.TIMING_TASK, dataset="cifar10", loss="xclr", seed=0,
                 cfg_hash=timing.hash) as run:
        rounds = {f"simclr_round_{i}": 1.00 + 0.01 * i for i in range(5)}
        rounds.update({f"xclr_round_{i}": 1.01 + 0.01 * i for i in range(5)})
        for k, v in {**rounds, "simclr_s_per_step": 1.02, "xclr_s_per_step": 1.03, "ratio": 1.03 / 1.02}.items():
            run.log(k, v, split="bench")
    # a run of another setting (no job hash of the suite) never enters
    with reg.run(modality="vision", task="pretrain-simclr", dataset="cifar10", loss="xclr", seed=0) as run:
        run.log("linear_acc", 0.99, split="test")

    text = xclr.table(reg)
    assert "99.0" not in text and "Reduced protocol, not the paper's" in text
    row = next(l for l in text.splitlines() if l.startswith("| X-CLR (captions) |"))
    assert "56.0 ± 0.7 (n=11)" in row and "75.56 ± 0.09" in row  # seeds 0-10: 55 + 0.2 x seed
    said = lambda start: next(l for l in text.splitlines() if l.startswith("- " + start))  # noqa: E731
    assert "**confirmed**" in said("X-CLR beats SimCLR on linear")
    assert "**confirmed**" in said("X-CLR beats SupCon on linear")
    assert "**inconclusive**" in said("X-CLR stays above SimCLR")  # 500 has 5 seeds, 50/100 have 3
    assert "**confirmed**" in said("The sentence-transformer caption graph beats")
    assert "**inconclusive**" in said("Fine-tuning a SimCLR encoder")  # not run: n = 0
    assert "**confirmed**" in said("X-CLR adds almost no time")  # 1 % slower, inside the 5 % margin
    assert "**confirmed**" in said("The learned class similarities follow")
    assert "**confirmed**" in said("X-CLR has the highest intra-class")
    assert "| 1.020 | 1.030 | 1.010 |" in text
    # Table 9 numbers from the learned matrix: X-CLR's diagonal 0.8 over its mean off-diagonal similarity
    le, conn = xclr.connectivity(_learned(1.0, 0.8))
    assert conn == pytest.approx(0.8 / le)
    assert xclr.graph_correlation(_learned(1.0, 0.8), g) == pytest.approx(1.0)
    assert xclr.graph_correlation(_learned(1.0, 0.8), EYE) is None  # the label graph: constant off-diagonal
    (fig,) = xclr.figures(reg)
    assert "Figure 4" in fig[0]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))


def test_time_claim_is_contradicted_when_xclr_is_clearly_slower():
    """per round: the 5 % margin minus X-CLR's overhead over SimCLR's step; 20 % slower every round -> contradicted"""
    c = xclr.CLAIMS["time"]
    over = [20.0, 20.5, 19.5, 20.2, 19.8]
    assert c.judge_contrast([(1, [100 * xclr.TIME_MARGIN - o for o in over])]).verdict.value == "contradicted"
    assert isinstance(c, Claim)


def test_every_claim_is_declared_once_in_the_catalogue():
    from benchmarks.tables.catalogue import BY_ID

    assert len(xclr.CLAIM_IDS) == len(xclr.CLAIMS) >= 4
    entries = [BY_ID[i] for i in xclr.CLAIM_IDS]
    assert all(e.paper.startswith("X-CLR (Sobal et al. 2024)") and e.claim and e.judge.startswith(
        "benchmarks.tables.xclr:judge:") for e in entries)
    assert len({e.claim for e in entries}) == len(entries)


def test_timing_measures_both_methods_in_one_process():
    from benchmarks.measurements.xclr_timing import measure

    m = measure(steps=1, repeats=3, batch_size=8, width=4, text_model="labels")
    assert m["ratio"] == pytest.approx(m["xclr_s_per_step"] / m["simclr_s_per_step"])
    assert sorted(k for k in m if "_round_" in k) == [f"{k}_round_{i}" for k in ("simclr", "xclr") for i in range(3)]


def test_baselines_tuned_alike_are_judged_at_their_validation_best():
    """issue 77: SimCLR and SupCon on X-CLR's grid; a baseline whose best tau is not the core's 0.1 is compared
    through its rerun arm at that tau (empty until it runs), never through its untuned core row"""
    def cell(*vals: float) -> xclr.Cell:
        return xclr.Cell(dict(enumerate(vals)), dict(enumerate(vals)), {}, {})

    assert xclr.arms({}) == {xclr.SIMCLR: xclr.SIMCLR, xclr.SUPCON: xclr.SUPCON}  # not tuned: the core's rows
    res = {("select", f"{m}: temperature={t}", 500): cell(v) for m, t, v in (
        ("SimCLR", 0.05, 0.30), ("SimCLR", 0.1, 0.41), ("SimCLR", 0.2, 0.40), ("SimCLR", 0.5, 0.35),
        ("SupCon", 0.05, 0.30), ("SupCon", 0.1, 0.40), ("SupCon", 0.2, 0.50), ("SupCon", 0.5, 0.45),
        ("X-CLR", 0.5, 0.55))}
    rows, best = xclr.selection(res)
    assert best == {"SimCLR": "temperature=0.1", "SupCon": "temperature=0.2", "X-CLR": "temperature=0.5"}
    assert [r[:2] for r in rows[:2]] == [["SimCLR", "temperature=0.05"], ["SimCLR", "temperature=0.1"]]
    assert xclr.arms(res) == {xclr.SIMCLR: xclr.SIMCLR, xclr.SUPCON: "SupCon (temperature=0.2)"}
    res.update({("main", xclr.XCLR, 500): cell(.55, .56, .55, .57, .56),
                ("main", xclr.SIMCLR, 500): cell(.4, .41, .4, .4, .42),
                ("main", xclr.SUPCON, 500): cell(.4, .41, .4, .4, .42)})
    margins = xclr._margins(res, None)
    assert margins["linear-supcon"][1][0][1][1] == []  # SupCon's arm at 0.2 has not run: nothing to judge
    assert len(margins["linear-simclr"][1][0][1][1]) == 5  # SimCLR's best is the core's tau: its core row
    res[("main", "SupCon (temperature=0.2)", 500)] = cell(.5, .5, .51, .5, .5)
    assert len(margins := xclr._margins(res, None)["linear-supcon"][1][0][1][1]) == 5 and min(margins) >= 50
    assert "the claims' row SupCon (temperature=0.2)" in xclr._tuning_text(res)
    # a tie in validation linear accuracy goes to the better validation kNN (SimCLR's 0.05 and 0.5 at 43.7 %)
    tie = {("select", "SimCLR: temperature=0.05", 500): xclr.Cell({0: .437}, {0: .387}, {}, {}),
           ("select", "SimCLR: temperature=0.5", 500): xclr.Cell({0: .437}, {0: .362}, {}, {})}
    assert xclr.selection(tie)[1] == {"SimCLR": "temperature=0.05"}
    tie[("select", "SimCLR: temperature=0.5", 500)].knn[0] = .39
    assert xclr.selection(tie)[1] == {"SimCLR": "temperature=0.5"}
    # the value that tied and lost the tie-break is kept for the sensitivity reading
    assert xclr.ties(tie) == {xclr.SIMCLR: ["temperature=0.05"]}
    assert xclr._sensitivity(tie) == ["X-CLR against SimCLR at `temperature=0.05`: not run"]
