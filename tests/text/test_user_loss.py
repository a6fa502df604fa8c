"""``suite text train --loss file.py:Class``: a user's loss trains SimCSE and is recorded by its origin; a broken one
or one needing labels is refused in one line (exit 2) before the model is loaded, nothing recorded."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.cli import main
from suite.registry import Registry
from tests.suite.test_user_losses import LOSSES


def test_text_train_takes_a_file_loss(tiny_model_dir: Path, data_env: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    losses = tmp_path / "my_losses.py"
    losses.write_text(LOSSES)
    reg = Registry(str(tmp_path / "reg.sqlite"))
    monkeypatch.setenv("SUITE_REGISTRY", reg.url)
    base = ["text", "train", "--backbone", str(tiny_model_dir), "--max-steps", "2", "--batch-size", "8",
            "--eval-every", "0", "--pooling", "cls"]
    for cls, needle in (("NaN", "returned a non-finite value"), ("NeedsLabels", "requires ['labels']")):
        rc = main([*base, "--loss", f"{losses}:{cls}", "--out", str(tmp_path / cls)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and needle in err[0] and cls in err[0], err
    assert reg.runs() == []
    rc = main([*base, "--loss", f"{losses}:CosMargin", "--loss-hparams", "scale=2", "--out", str(tmp_path / "ok")])
    assert rc == 0, capsys.readouterr().err
    (row,) = [r for r in reg.runs() if r["task"].startswith("simcse")]
    assert row["loss"] == f"{losses}:CosMargin" and json.loads(row["loss_hparams"]) == {"margin": 0.2, "scale": 2}
    assert json.loads(row["config"])["loss_origin"]["import"] == f"{losses}:CosMargin"
    assert (tmp_path / "ok" / "export" / "modules.json").exists()
