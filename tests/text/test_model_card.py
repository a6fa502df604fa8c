"""The model card of a SimCSE run: sentence-transformers' README carries the suite's training facts."""
from __future__ import annotations

from sentence_transformers import SentenceTransformer

from suite.registry import Registry
from text.methods.simcse import train_simcse

from .test_models_train import _cfg


def test_simcse_saved_model_card(tiny_model_dir, data_env, tmp_path):
    """train_simcse (macl, 2 steps) -> README.md with the loss, its text preset, data size, steps, seed, code version,
    registry run and metrics, and how to load; the folder still loads as a SentenceTransformer."""
    s = train_simcse(_cfg(tmp_path, tiny_model_dir, loss="macl", max_steps=2, eval_every=0, seed=3))
    card = (tmp_path / "out" / "export" / "README.md").read_text()
    assert "SimCSE (unsup) with the macl loss" in card  # ST's title from our model-card data
    assert "suite.losses.macl" in card and '"tau0": 0.05' in card and '"alpha": 2.0' in card
    assert f"{s.info['n_train']:,} training samples" in card  # ST's dataset section: size
    assert "- `steps`: 2" in card and "- `seed`: 3" in card and "- `code_version`:" in card
    assert f"| registry run | {s.run_id} |" in card and "dev/best_stsb_dev" in card  # the headline, logged before export
    assert "train/stsb_dev" in card and "SentenceTransformer(" in card and "huang2023macl" in card
    assert Registry().get(s.run_id)["status"] == "finished"
    SentenceTransformer(str(s.export), device="cpu")
