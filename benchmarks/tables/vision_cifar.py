"""CIFAR-10 benchmark of the vision front-end: the losses in SimCLR, kNN and linear accuracy on balanced and
CACR-imbalanced (linear / exponential) training sets.

The headline grid is ``benchmarks/suites/vision-cifar.yaml`` (the ``cpu`` profile: small ConvNet of width 16, a
seeded balanced subset of 500 training images per class, 6 epochs, Adam; kNN bank and linear probe on the same 500
per class, the full test set): the rows the claims compare, 5 seeds each. ``vision-cifar-optional.yaml`` has every
loss at batch 64 and 256 and both imbalances (no claim needs it). It ranks losses at small scale; it does not
reproduce the papers' accuracies (ResNet-18 / AlexNet, 200 epochs, 50,000 images).

Rows: infonce, dcl, macl, cacr (V = 2 and V = 5), cmc (V = 5), align_uniform, hard_negative, tsimclr and
infonce at d = 128, 8 and 2, supcon and xclr (labelled references), and the randomly initialised encoder
(0 epochs), each where its suite has it. ``suite bench vision-cifar`` runs the suite through the runner and
writes ``benchmarks/results/vision_cifar.md`` from the registry alone.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.tables.claims import RULE_TEXT, Claim, Judged, Seeded, Verdict, mean_std, of_parts, scaled
from benchmarks.tables.findings import line
from benchmarks.paths import RESULTS
from benchmarks.tables import JobRuns, identity, md, progress_line, suite_runs, register_table, table_cli
from suite.registry import Registry

SUITE = "vision-cifar"
OUT = RESULTS / "vision_cifar.md"
IMBALANCES = ("none", "linear", "exponential")


@dataclass(frozen=True)
class Row:
    name: str
    loss: str
    views: int = 2
    proj_dim: int = 128
    epochs0: bool = False  # the randomly initialised reference

    def matches(self, jr: JobRuns) -> bool:
        return (jr.arg("loss") == self.loss and int(jr.arg("views", 2)) == self.views
                and int(jr.arg("proj_dim", 128)) == self.proj_dim and (int(jr.arg("epochs", 1)) == 0) == self.epochs0)


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
    Row("tsimclr d=2", "tsimclr", proj_dim=2),  # App. C.7's picture (batch 256 only)
    Row("infonce d=2", "infonce", proj_dim=2),
    Row("supcon (labels)", "supcon"),
    Row("xclr (labels + captions)", "xclr"),
]

# Published numbers beside ours (CIFAR-10, %). Keys: (row name, paper).
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
NOTES = """## Notes

- Imbalanced rows pretrain on the class-imbalanced version of the same training subset for the same number
  of epochs (fewer steps, as in CACR) and are evaluated on the balanced bank and test split. The
  exponential rule keeps 0.1^((10-l)/9) of class l.
- K = 4 rows (V = 5) use the same batch size in images as the V = 2 rows, so each step encodes 5 B views.
- supcon and xclr use labels (xclr's soft graph: cosine similarities of "a photo of a {class}" captions
  under the packaged all-MiniLM-L6-v2): reference points, not self-supervised.
- Losses use their core defaults; the suite file lists every fixed setting.
"""


Cells = dict[tuple[str, int, str], dict[str, list[float]]]
Key = tuple[str, int, str, str]  # (row, batch size, imbalance, "lin" | "knn")


def _fmt(vals: list[float]) -> str:
    return mean_std(vals, digits=1, scale=100, show_n=False, empty="not run")


def collect(jrs: list[JobRuns]) -> Cells:
    """{(row name, batch size, imbalance): {"knn": [...], "lin": [...], "seeds": [...], "wall": [...]}}."""
    out: Cells = {}
    for jr in jrs:
        row = next((r for r in ROWS if r.matches(jr)), None)
        if row is None or not jr.runs:
            continue
        d = out.setdefault((row.name, int(jr.arg("batch_size", 256)), jr.arg("imbalance", "none")),
                           {"knn": Seeded(), "lin": Seeded(), "seeds": [], "wall": []})
        for k, name in (("knn", "knn_acc"), ("lin", "linear_acc")):
            run = jr.run_with(name, "test")
            if run is not None:
                d[k] = d[k].plus(identity(run.row), run.metric(name, "test"))  # type: ignore[attr-defined]
        d["seeds"].append(jr.seed)
        d["wall"].append(float(jr.runs[-1].row["wall_time"] or float("nan")))
    return out


def _mean(d: dict[str, list[float]] | None, k: str) -> float | None:
    return statistics.mean(d[k]) if d and d.get(k) else None


def table(registry: Registry, suite: str = SUITE) -> str:
    jrs = suite_runs(registry, suite)
    res = collect(jrs)
    batch_sizes = tuple(sorted({int(jr.arg("batch_size", 256)) for jr in jrs}))
    planned = {(row.name, int(jr.arg("batch_size", 256)), jr.arg("imbalance", "none")) for jr in jrs for row in ROWS
               if row.matches(jr)}
    rows = []
    for row in ROWS:
        if not any(row.matches(jr) for jr in jrs):
            continue
        for bs in sorted({int(jr.arg("batch_size", 256)) for jr in jrs if row.matches(jr)}):
            bal = res.get((row.name, bs, "none"))
            cells: list[Any] = [row.name, bs]
            for imb in IMBALANCES:
                d = res.get((row.name, bs, imb))
                for k in ("knn", "lin"):
                    c = (_fmt(d[k]) if d else "n/a (not trained)" if row.epochs0 and imb != "none" else
                         "not run" if (row.name, bs, imb) in planned else "–")
                    if imb != "none" and d and bal and _mean(bal, k) is not None and _mean(d, k) is not None:
                        c += f" ({100 * (_mean(d, k) - _mean(bal, k)):+.1f})"  # type: ignore[operator]
                    cells.append(c)
            seeds = sorted({s for imb in IMBALANCES for s in res.get((row.name, bs, imb), {}).get("seeds", [])})
            walls = [w for imb in IMBALANCES for w in res.get((row.name, bs, imb), {}).get("wall", []) if w == w]
            cells += [",".join(map(str, seeds)) or "-", f"{sum(walls):.0f}" if walls else "-",
                      "; ".join(v for (n, _), v in PUBLISHED.items() if n == row.name) if bs == batch_sizes[0] else ""]
            rows.append(cells)
    fixed = {k: v for k, v in jrs[0].job.args if "{" not in str(v) and k not in ("loss", "batch-size", "imbalance")}
    lines = ["# Vision CIFAR-10 benchmark", "",
             f"Generated by `suite bench vision-cifar` from the registry (runs of `benchmarks/suites/{suite}.yaml`; "
             f"fixed settings: {', '.join(f'{k}={v}' for k, v in fixed.items())}).", "",
             "Accuracies in %, mean ± sample std over seeds; kNN: weighted k = 200, T = 0.1 on backbone features; "
             "linear: logistic regression on standardised frozen backbone features. Changes (points, negative = drop) "
             "are from the balanced run of the same row and batch size; – = not in this suite (vision-cifar-optional.yaml "
             "has every loss, batch size and imbalance).", "",
             md(["row", "batch", "kNN bal", "linear bal", "kNN lin-imb (change)", "linear lin-imb (change)",
                 "kNN exp-imb (change)", "linear exp-imb (change)", "seeds", "run s (summed over its runs)",
                 "published (CIFAR-10, full scale)"], rows), "",
             "## Claims at this scale", ""]
    lines += ([f"- {line(c, registry)}" for c in CLAIM_IDS] if suite == SUITE
              else [f"- judged on the headline suite's runs (`{SUITE}`): vision_cifar.md"])
    lines += ["", "Each claim is a set of margins (contrasts of cell means, linear probe unless stated) that must all be "
              "positive; each margin is judged on the per-seed values of its cells, paired by seed where the cells' "
              "runs share their seeds (partially paired where two cells share some, else Welch's test), and the "
              "claim is confirmed when every margin is. "
              + RULE_TEXT, "", progress_line(jrs, suite), "", NOTES]
    return "\n".join(lines)




Margins = list[list[tuple[float, Key]]]


def _judged(res: Cells, detail: str, margins: Margins | None, missing: str) -> Judged:
    """A claim whose ``margins`` (each a contrast: [(coefficient, cell)]) must all be positive; the summary gap is
    the first margin's. ``margins`` None: not measured (``missing`` says what is missing)."""
    if margins is None:
        return Judged(Verdict.NOT_MEASURED, None, f"needs {missing}")
    claim = Claim("vision-cifar", "", "", "accuracy (%)")

    def vals(row: str, bs: int, imb: str, k: str) -> list[float]:
        return scaled(res.get((row, bs, imb), {}).get(k, []), 100)

    results = [claim.judge_contrast([(c, vals(*key)) for c, key in m]) for m in margins]
    return of_parts(results, f"{detail}; " + "; ".join(f"margin {i + 1}: {r.evidence(1)}"
                                                       for i, r in enumerate(results)))


NCE, CACR4, CMC4 = "infonce (SimCLR)", "cacr K=4 (V=5)", "cmc K=4 (V=5)"


def _acc(res: Cells, row: str, bs: int, imb: str = "none", k: str = "lin") -> float | None:
    return _mean(res.get((row, bs, imb)), k)


def _macl(res: Cells, small: int, large: int) -> Judged:
    """MACL beats NT-Xent most at small batch (MACL Table 9): the gain at the small batch, and that gain minus the
    gain at the large one."""
    m_s, n_s, m_l, n_l = (_acc(res, "macl", small), _acc(res, NCE, small), _acc(res, "macl", large), _acc(res, NCE, large))
    if None in (m_s, n_s, m_l, n_l):
        return _judged(res, "", None, f"macl and infonce at batch {small} and {large}")
    gain_small = [(1.0, ("macl", small, "none", "lin")), (-1.0, (NCE, small, "none", "lin"))]
    gain_large = [(1.0, ("macl", large, "none", "lin")), (-1.0, (NCE, large, "none", "lin"))]
    return _judged(res, f"gain {100 * (m_s - n_s):+.1f} at {small}, {100 * (m_l - n_l):+.1f} at {large} (linear)",  # type: ignore[operator]
                   [gain_small, gain_small + [(-c, k) for c, k in gain_large]], "")


def _cacr_cmc(res: Cells, small: int, large: int) -> Judged:
    """CACR K=4 beats CMC K=4 (CACR Table 2), linear probe at the small batch."""
    c, m = _acc(res, CACR4, small), _acc(res, CMC4, small)
    if None in (c, m):
        return _judged(res, "", None, f"cacr and cmc with 5 views at batch {small}")
    return _judged(res, f"{100 * c:.1f} vs {100 * m:.1f} (linear, batch {small})",  # type: ignore[operator]
                   [[(1.0, (CACR4, small, "none", "lin")), (-1.0, (CMC4, small, "none", "lin"))]], "")


def _cacr_imbalance(res: Cells, small: int, large: int) -> Judged:
    """CACR loses least under imbalance (CACR Tables 2, 8): its drop is smaller than SimCLR's and CMC's, at both
    imbalances."""
    rows3 = (NCE, CACR4, CMC4)
    drops = {(r, i): _acc(res, r, small) - _acc(res, r, small, i)  # type: ignore[operator]
             for r in rows3 for i in ("linear", "exponential")
             if _acc(res, r, small) is not None and _acc(res, r, small, i) is not None}
    if len(drops) != 6:
        return _judged(res, "", None, "the imbalanced runs of infonce, cacr and cmc")
    parts, margins = [], []
    for imb in ("linear", "exponential"):
        for r in (NCE, CMC4):  # CACR's drop must be smaller than each other row's: drop(r) - drop(cacr) > 0
            margins.append([(1.0, (r, small, "none", "lin")), (-1.0, (r, small, imb, "lin")),
                            (-1.0, (CACR4, small, "none", "lin")), (1.0, (CACR4, small, imb, "lin"))])
        parts.append(f"{imb}: " + ", ".join(f"{r} {100 * drops[(r, imb)]:.1f}" for r in rows3))
    return _judged(res, f"linear-probe drops {'; '.join(parts)}", margins, "")


def _tsimclr_d8(res: Cells, small: int, large: int) -> Judged:
    """t-SimCLR keeps its kNN accuracy at d = 8 better than SimCLR (t-SimCLR Fig. 2b)."""
    t8, t128, s8, s128 = (_acc(res, "tsimclr d=8", small, k="knn"), _acc(res, "tsimclr d=128", small, k="knn"),
                          _acc(res, "infonce d=8", small, k="knn"), _acc(res, NCE, small, k="knn"))
    if None in (t8, t128, s8, s128):
        return _judged(res, "", None, "tsimclr and infonce at d = 128 and 8")
    # SimCLR's drop minus t-SimCLR's drop > 0, and t-SimCLR d=8 above SimCLR d=8
    smaller_drop = [(1.0, (NCE, small, "none", "knn")), (-1.0, ("infonce d=8", small, "none", "knn")),
                    (-1.0, ("tsimclr d=128", small, "none", "knn")), (1.0, ("tsimclr d=8", small, "none", "knn"))]
    above_at_8 = [(1.0, ("tsimclr d=8", small, "none", "knn")), (-1.0, ("infonce d=8", small, "none", "knn"))]
    return _judged(res, f"kNN drop 128 -> 8 t-SimCLR {100 * (t128 - t8):+.1f}, SimCLR {100 * (s128 - s8):+.1f}; "  # type: ignore[operator]
                        f"t-SimCLR d=8 {100 * t8:.1f} vs SimCLR d=8 {100 * s8:.1f}", [smaller_drop, above_at_8], "")  # type: ignore[operator]


JUDGES = {"img-macl": _macl, "img-cacr-cmc": _cacr_cmc, "img-cacr-imbalance": _cacr_imbalance,
          "img-tsimclr-d8": _tsimclr_d8}
CLAIM_IDS = tuple(JUDGES)


def judge_cells(claim_id: str, res: Cells, batch_sizes: tuple[int, ...] = (64, 256)) -> Judged:
    """The claim ``claim_id`` on the cells ``res`` (:func:`collect`) at the smallest and largest batch size."""
    return JUDGES[claim_id](res, min(batch_sizes), max(batch_sizes))


def judge(registry: Registry, claim_id: str) -> Judged:
    """The catalogue's judgement of ``claim_id`` on the headline suite's runs."""
    jrs = suite_runs(registry, SUITE)
    return judge_cells(claim_id, collect(jrs), tuple(sorted({int(jr.arg("batch_size", 256)) for jr in jrs})) or (64, 256))


def figures(registry: Registry, suite: str = SUITE) -> list[tuple[str, Any]]:
    """The 2-D projections of CIFAR-10 test images (d_z = 2, seed 0): SimCLR (on the circle its loss sees) beside
    t-SimCLR (t-SimCLR paper, App. C.7), as (title, figure)."""
    import matplotlib.pyplot as plt

    from suite.eval.points import read_points

    runs = [(jr.arg("loss"), jr.runs[-1]) for jr in suite_runs(registry, suite)
            if jr.arg("points") and int(jr.arg("proj_dim", 128)) == 2 and jr.runs]
    if not runs:
        return []
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 4.2), squeeze=False)
    for ax, (loss, run) in zip(axes[0], runs):
        xy, lab = read_points(registry, run.row["id"], "test-2d")
        sc = ax.scatter(xy[:, 0], xy[:, 1], c=lab, cmap="tab10", vmin=0, vmax=9, s=4)
        knn = run.metric("knn_acc", "test")
        ax.set_title(f"{loss}, d_z = 2 (seed 0): kNN {100 * (knn or float('nan')):.1f} %", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
    fig.colorbar(sc, ax=axes[0].tolist(), ticks=range(10), label="CIFAR-10 class")
    return [("CIFAR-10 test images in 2-D projection space: SimCLR vs t-SimCLR (cpu profile)", fig)]


def register(sub: Any) -> None:
    register_table(sub, "vision-cifar", "CIFAR-10 SimCLR benchmark of every loss", SUITE, OUT, table)


def main(argv: list[str] | None = None) -> int:
    return table_cli("python -m benchmarks.tables.vision_cifar", SUITE, OUT, table, argv)


if __name__ == "__main__":
    raise SystemExit(main())
