"""suite.model_card: the card rendered from a dict, its place beside a model, the registry's metrics in it."""
from __future__ import annotations

from pathlib import Path

from suite.model_card import append_to_card, card_info, card_path, render, write_card
from suite.registry import Registry


def _info(run=None) -> dict:
    return card_info(title="T", modality="graph", loss="macl", loss_hparams={"tau0": 0.2}, data="MUTAG", n_train=188,
                     steps=30, seed=1, load="Model.from_pretrained(path)", what="A GIN.", run=run,
                     extra={"epochs": 20})


def test_card_has_every_field(tmp_path: Path) -> None:
    """A run with two logged metrics -> the card names loss, hparams, data, size, steps, seed, code version, run id,
    both metrics (last value, split/name) and the load snippet."""
    reg = Registry(str(tmp_path / "r.sqlite"))
    with reg.run(modality="graph", task="t", dataset="MUTAG", loss="macl", seed=1) as run:
        run.log("acc", 0.5, split="test", step=1)
        run.log("acc", 0.8, split="test", step=2)
        run.log("loss", 1.25, split="train", step=2)
    text = render(_info(run))
    for part in ("# T", "A GIN.", "| loss | `macl` |", '`{"tau0": 0.2}`', "| data | MUTAG |", "| training examples | 188 |",
                 "| steps | 30 |", "| seed | 1 |", "| code version | `", f"| registry run | {run.id} |", "| epochs | 20 |",
                 "| test/acc | 0.8 |", "| train/loss | 1.25 |", "Model.from_pretrained(path)", 'tags: ["contrastive-learning", "graph", "macl"]'):
        assert part in text, part


def test_no_run_says_so_and_paths(tmp_path: Path) -> None:
    """No registry run -> 'No metrics recorded'; a folder gets README.md, a checkpoint file <stem>.md beside it;
    append_to_card adds the sections without a second title."""
    assert "No metrics recorded" in render(_info())
    (tmp_path / "m").mkdir()
    assert card_path(tmp_path / "m") == tmp_path / "m" / "README.md"
    assert card_path(tmp_path / "x_seed0.pt") == tmp_path / "x_seed0.md"
    p = write_card(tmp_path / "x_seed0.pt", _info())
    assert p.read_text().startswith("---")
    (tmp_path / "m" / "README.md").write_text("# other card\n")
    text = append_to_card(tmp_path / "m", _info()).read_text()
    assert text.startswith("# other card") and "\n# T\n" not in text and "## How to load" in text
