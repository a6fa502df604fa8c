"""A suite's step curves in the report (issue 51, item 3): one figure per modality, a series per setting with the mean
over seeds and a min-max band, at most 8 series (the caption says how many were left out), nothing where no run
logged a curve."""
from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.report.figures import MAX_SERIES, suite_curves
from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry


def _suite(tmp_path: Path, losses: list[str], seeds: list[int]) -> str:
    path = tmp_path / f"curves{len(losses)}.yaml"
    path.write_text(yaml.safe_dump({"name": "curves", "jobs": [
        {"frontend": "vision", "command": "pretrain", "seeds": seeds, "grid": {"loss": losses}, "args": {"epochs": 2}},
        {"frontend": "graph", "command": "tu", "seeds": seeds, "grid": {"loss": losses[:1]}}]}))
    return str(path)


def _fill(reg: Registry, suite: str, curves: bool = True) -> None:
    """a finished run per job, its train-step loss at steps 3, 6, 9 (value: 1 / step, shifted by the seed and the
    loss's position) and its epoch values, as a front-end records them"""
    for job in load_suite(suite)[1]:
        loss = dict(job.args)["loss"]
        modality = "vision" if job.frontend == "vision" else "graph"
        with reg.run(modality=modality, task=job.command, dataset="digits", loss=loss, seed=job.seed,
                     cfg_hash=job.hash) as run:
            if curves:
                for step in (3, 6, 9):
                    run.log_many({"loss": 1.0 / step + 0.1 * job.seed + int(loss[1:]), "lr": 0.1},
                                 split="train-step", step=step)
            run.log("loss", 0.5, split="train", step=1)
            run.log("knn_acc", 0.9, split="test")


def test_two_settings_three_seeds_give_two_series_with_bands(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path / "r.sqlite"))
    suite = _suite(tmp_path, ["l0", "l1"], [0, 1, 2])
    _fill(reg, suite)
    caption, fig = suite_curves(reg, suite, "loss", "vision")
    ax = fig.axes[0]
    assert [l.get_label() for l in ax.lines] == ["loss=l0 (n=3)", "loss=l1 (n=3)"]
    assert len(ax.collections) == 2  # a band per series
    xs, ys = ax.lines[1].get_data()
    assert list(xs) == [3, 6, 9] and abs(ys[0] - (1 / 3 + 0.1 + 1)) < 1e-9  # the mean of seeds 0, 1, 2
    band = ax.collections[1].get_paths()[0].vertices
    assert abs(band[:, 1].min() - (1 / 9 + 1)) < 1e-9 and abs(band[:, 1].max() - (1 / 3 + 0.2 + 1)) < 1e-9  # min-max
    assert "min-max band" in caption and "2 of 2" in caption and "left out" not in caption
    graph = suite_curves(reg, suite, "loss", "graph")  # the other modality: its own figure, one setting
    assert graph is not None and len(graph[1].axes[0].lines) == 1


def test_more_than_eight_settings_are_cut_with_a_note(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path / "r.sqlite"))
    suite = _suite(tmp_path, [f"l{i}" for i in range(11)], [0])
    _fill(reg, suite)
    caption, fig = suite_curves(reg, suite, "loss", "vision")
    assert len(fig.axes[0].lines) == MAX_SERIES == 8
    assert f"8 of 11; 3 more settings left out" in caption


def test_no_step_metrics_no_figure(tmp_path: Path) -> None:
    """runs with epoch values only, or no runs at all -> no figure and no error"""
    reg = Registry(str(tmp_path / "r.sqlite"))
    suite = _suite(tmp_path, ["l0", "l1"], [0, 1, 2])
    assert suite_curves(reg, suite, "loss", "vision") is None
    _fill(reg, suite, curves=False)
    assert suite_curves(reg, suite, "loss", "vision") is None
    assert suite_curves(reg, suite, "loss", "text") is None


def test_the_report_draws_the_quick_suites_curves_where_they_were_logged(tmp_path: Path) -> None:
    """the quick suite's report entries: its images runs logged curves -> a figure in the images section of the page
    and its line in the Markdown twin; its graphs and sentences runs did not -> nothing there"""
    from benchmarks.report import build

    reg = Registry(str(tmp_path / "r.sqlite"))
    for job in load_suite("quick")[1]:
        if job.frontend == "vision":
            with reg.run(modality="vision", task="pretrain-simclr", dataset="digits", loss=dict(job.args)["loss"],
                         seed=job.seed, cfg_hash=job.hash) as run:
                run.log_many({"loss": 2.0}, split="train-step", step=5)
                run.log_many({"loss": 1.0}, split="train-step", step=10)
    md_path, html_path, _ = build(reg, tmp_path / "out")
    page, md = html_path.read_text(), md_path.read_text()
    assert page.count("The demo&#x27;s training loss (suite quick)") == 1 and md.count("suite `quick`, vision") == 1
    images = page[page.index("<h2>Images</h2>"):page.index("<h2>Sentences</h2>")]
    assert "suite `quick`, vision: the mean over seeds" in images and "<img" in images
