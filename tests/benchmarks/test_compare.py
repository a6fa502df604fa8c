"""``suite bench compare``: the plan (the suite's own jobs reused as baselines, the user's loss on the same seeds,
fine-tuning following the encoder each loss pretrained) and the page (verdicts of the claims rule, read back from
the registry)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from benchmarks.report.compare import page
from benchmarks.runner.compare import SUITES, all_jobs, plan, slug
from benchmarks.runner.suitefile import load_suite
from suite.registry import Registry
from tests.suite.test_user_losses import LOSSES


@pytest.fixture()
def loss_file(tmp_path: Path) -> str:
    p = tmp_path / "my_losses.py"
    p.write_text(LOSSES)
    return f"{p}:CosMargin"


def test_plan_reuses_the_suites_jobs_and_gives_the_loss_the_same_seeds(loss_file: str) -> None:
    name, tasks, notes = plan(SUITES / "quick.yaml", loss_file)
    _, suite_jobs = load_suite(SUITES / "quick.yaml")
    suite_hashes = {j.hash for j in suite_jobs}
    assert name == "quick" and [t.frontend for t in tasks] == ["graph", "vision", "text"] and notes == []
    for t in tasks:
        base = [j for label, js in t.arms.items() if label != loss_file for j in js]
        assert base and all(j.hash in suite_hashes for j in base)  # finished baselines are found, never re-run
        mine = t.arms[loss_file]
        assert sorted(j.seed for j in mine) == [0, 1, 2] and not {j.hash for j in mine} & suite_hashes
        assert all(dict(j.args)["loss"] == loss_file for j in mine)
    assert list(tasks[0].arms) == ["graphcl", "macl", loss_file]
    _, tasks2, notes2 = plan(SUITES / "quick.yaml", loss_file, against=["infonce", "cacr3", "nosuch"], loss_hparams="margin=0.3")
    assert list(tasks2[0].arms) == ["infonce", "cacr3", loss_file]
    assert list(tasks2[1].arms) == ["infonce", loss_file]  # cacr3 is a graph preset, nosuch nothing: said in notes
    assert any("'cacr3' left out" in n for n in notes2) and sum("'nosuch' left out" in n for n in notes2) == 3
    assert dict(tasks2[0].arms[loss_file][0].args)["loss-hparams"] == "margin=0.3"
    assert len(all_jobs(tasks2)) == 3 * 3 + 2 * 3 + 2 * 3


def test_fine_tuning_follows_the_encoder_of_each_loss(loss_file: str, tmp_path: Path) -> None:
    suite = tmp_path / "two.yaml"
    suite.write_text(yaml.safe_dump({"name": "two", "jobs": [
        {"frontend": "graph", "command": "pretrain-mol", "seeds": [0], "stage": 0, "grid": {"loss": ["graphcl", "macl"]},
         "args": {"epochs": 1, "out": "runs/x/mol/{loss}"}},
        {"frontend": "graph", "command": "finetune-mol", "seeds": [0, 1, 2], "stage": 1,
         "grid": {"dataset": ["bbbp"], "init": ["none", "runs/x/mol/graphcl", "runs/x/mol/macl"]}, "args": {"epochs": 2}}]}))
    _, tasks, notes = plan(suite, loss_file)
    pre, fine = tasks
    assert not pre.judged and fine.judged and notes == []
    assert list(fine.arms) == ["no pretraining", "graphcl", "macl", loss_file]
    out = dict(pre.arms[loss_file][0].values())["out"]
    assert out == f"runs/x/mol/{slug(loss_file)}"
    assert {dict(j.args)["init"] for j in fine.arms[loss_file]} == {out}
    assert max(j.stage for j in all_jobs(tasks)) == 1 and all_jobs(tasks)[0].stage == 0


def _mutag(tasks: list, values: dict, tmp_path: Path) -> Registry:
    """A registry holding the first task's (MUTAG) arms: per arm, its seeds' accuracies ``values[label]``."""
    reg = Registry(str(tmp_path / "r.sqlite"))
    for label, jobs in tasks[0].arms.items():
        for job, v in zip(jobs, values[label]):
            with reg.run(modality="graph", task="tu-graphcl", dataset="MUTAG", loss=label, seed=job.seed,
                         cfg_hash=job.hash) as run:
                run.set_primary("acc", "test")
                run.log("acc", v, split="test")
    return reg


def test_page_judges_the_loss_against_each_baseline(loss_file: str, tmp_path: Path) -> None:
    _, tasks, _ = plan(SUITES / "quick.yaml", loss_file)
    reg = _mutag(tasks, {"graphcl": [0.80, 0.81, 0.82], "macl": [0.86, 0.87, 0.88], loss_file: [0.86, 0.865, 0.87]}, tmp_path)
    md, doc = page(reg, "quick", tasks, loss_file, {"sha256": "ab" * 32, "import": loss_file}, {}, None, [])
    # the loss by its class name; its file and the source's sha once, in the header
    assert md.startswith("# CosMargin beside the suite's losses") and md.count(loss_file) == 1 and "abababababab" in md
    assert "| CosMargin beats graphcl | confirmed" in md
    assert "| CosMargin beats macl | not confirmed" in md
    assert "| CosMargin | 3 | 86.50 ± 0.50 |" in md and "| GraphCL (You et al. 2020) (published) | - | 86.80 ± 1.34 |" in md
    assert "| infonce | 0 | not run |" in md  # images and sentences have no runs here: said, not hidden
    assert "| CosMargin beats infonce | not measured | no finished run of CosMargin and infonce |" in md
    # the findings first: one line per modality, the gap with its 95 % interval, its p named by its hypothesis and
    # the verdict after Holm's correction
    findings = md[md.index("## Findings"):md.index("## Verdicts")]
    assert md.index("## Findings") < md.index("Loss `CosMargin`")
    assert re.search(r"- \*\*graphs\*\*: MUTAG: vs graphcl: \+5\.50 \[\+\d\.\d\d, \+\d\.\d\d\] "
                     r"p\(gap > \+0\.5\) = [\d.e-]+ \*\*confirmed\*\*", findings)
    assert doc.startswith("<!DOCTYPE html>") and "<h2>Findings</h2>" in doc and "<h2>Verdicts</h2>" in doc
    assert doc.index("<h2>Findings</h2>") < doc.index("<h2>Verdicts</h2>") and "data:image/png;base64," in doc


def test_a_profile_that_cannot_separate_losses_is_said(loss_file: str, tmp_path: Path) -> None:
    """baselines within the minimum effect of each other (86.90-86.99, as 8 SimCSE steps from a contrastive start
    give) -> no verdicts for the task, one row saying the profile cannot separate losses and which can"""
    _, tasks, _ = plan(SUITES / "quick.yaml", loss_file)
    reg = _mutag(tasks, {"graphcl": [0.869, 0.870, 0.871], "macl": [0.8695, 0.8699, 0.8690], loss_file: [0.80, 0.81, 0.82]}, tmp_path)
    md, _ = page(reg, "quick", tasks, loss_file, {"sha256": "ab" * 32, "import": loss_file}, {}, None, [])
    assert "| CosMargin against the baselines | cannot separate losses at this profile |" in md
    assert "--suite cpu" in md and "CosMargin beats graphcl" not in md


def test_the_page_shows_every_run_the_runner_counts_done(tmp_path: Path) -> None:
    """the quick suite's MUTAG baselines imported from the committed snapshot (MACL's three runs come from code that
    recorded no headline) -> every job the runner counts finished has its value on the page: MACL shows 3 runs"""
    from benchmarks.report.compare import arm_values
    from benchmarks.runner.compare import import_baselines

    _, tasks, _ = plan(SUITES / "quick.yaml", "dcl")
    reg = Registry(str(tmp_path / "r.sqlite"))
    assert import_baselines(reg, all_jobs(tasks)) > 0
    mutag = tasks[0]
    for label, jobs in mutag.arms.items():
        vals, _, blank = arm_values(reg, jobs)
        done = sum(reg.job_status(j.hash) == "finished" for j in jobs)
        assert len(vals) + blank == done and blank == 0, label
    assert len(arm_values(reg, mutag.arms["macl"])[0]) == 3


def test_axis_labels_never_overlap(tmp_path: Path) -> None:
    """a long class name beside the baselines -> the figure's x labels, as drawn, do not overlap"""
    import matplotlib.pyplot as plt

    from benchmarks.report.compare import Row, figure

    _, tasks, _ = plan(SUITES / "quick.yaml", "dcl")
    loss = "/some/where/deep/in/a/folder/my_losses.py:ACosineMarginLossWithAVeryLongName"
    rows = [Row("graphcl", [80.0, 81.0, 82.0]), Row("macl", [86.0, 87.0, 88.0]), Row(loss, [85.0, 86.0, 87.0]),
            Row("tsimclr", [84.0, 85.0, 86.0])]
    fig = figure(tasks[0], rows, [], loss, "acc (test)", "ACosineMarginLossWithAVeryLongName")
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in fig.axes[0].get_xticklabels()]
    assert len(boxes) == 4
    for a, b in zip(boxes, boxes[1:]):
        assert not a.overlaps(b), (a, b)
    plt.close(fig)
