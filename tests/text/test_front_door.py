"""The text front-end's front door (issue 80): your own file of pairs trains (in-batch negatives), the run says
what data it trains on and how to load what it saved, evaluation shows what it reads and a bar, a run's first
checkpoint comes within minutes of work rather than at step 125, an interrupted run says truly whether it resumes,
and a resumed run says so."""
from __future__ import annotations

import pytest

from suite.cli import main as suite_main
from text.data import read_supervised_csv
from text.methods.simcse import SimCSEConfig, train_simcse


def _cfg(tmp_path, model_dir, **kw):
    base = dict(backbone=str(model_dir), pooling="cls", max_length=12, batch_size=8, lr=2e-3, max_steps=3, eval_every=0,
                eval_batch_size=32, out=str(tmp_path / "out"), seed=0, dev_eval=False)
    base.update(kw)
    return SimCSEConfig(**base)


def test_pairs_and_triplets_files(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("anchor,positive\na man plays,a person plays\n\"a dog, small\",a puppy\n")
    assert read_supervised_csv(f) == [("a man plays", "a person plays"), ("a dog, small", "a puppy")]
    f.write_text("a man plays,a person plays\na dog,a puppy,a cat\n")  # a triplet in a file of pairs: named
    with pytest.raises(ValueError, match=r"line 2: 3 columns.*line 1 is a pair"):
        read_supervised_csv(f)


def test_own_pairs_train_and_the_run_says_what_and_how_to_load(tiny_model_dir, data_env, tmp_path, capsys):
    pairs = tmp_path / "mine.csv"
    pairs.write_text("anchor,positive\n" + "".join(f"a man is playing {i},a person plays {i}\n" for i in range(20)))
    out = tmp_path / "cli"
    rc = suite_main(["text", "train", "--mode", "sup", "--data", str(pairs), "--backbone", str(tiny_model_dir),
                     "--max-steps", "2", "--batch-size", "8", "--no-dev-eval", "--out", str(out), "--pooling", "cls"])
    printed = capsys.readouterr().out
    assert rc == 0 and (out / "export" / "modules.json").exists()
    assert f"training on 20 pairs (anchor, positive; in-batch negatives) from {pairs}" in printed
    assert f"load it with: SentenceTransformer('{out / 'export'}')" in printed
    from suite.registry import Registry

    (row,) = [r for r in Registry().runs(task="simcse-sup") if str(out) in r["run_options"]]
    data = {m["name"]: m["value"] for m in Registry().metrics(row["id"]) if m["split"] == "data"}
    assert data["compiled_loss"] == 0.0 and data["compiled_model"] == 0.0  # what was compiled, recorded (the CPU: none)
    # a file of pairs has no hard negatives to weight: refused in one line
    with pytest.raises(ValueError, match="needs triplets"):
        train_simcse(_cfg(tmp_path / "w", tiny_model_dir, mode="sup", data=str(pairs), hard_negative_weight=0.5))


def test_first_checkpoint_by_time_and_true_resume_lines(tiny_model_dir, data_env, tmp_path, monkeypatch, capsys):
    import suite.train.run as run_mod
    import text.methods.simcse as simcse

    # a run whose steps take longer than the save interval checkpoints at its first step's end, though its step
    # rule (checkpoint_every 125 steps) would wait
    monkeypatch.setattr(run_mod, "SAVE_EVERY_S", 1e-9)
    cfg = _cfg(tmp_path, tiny_model_dir, max_steps=3, checkpoint_every=125)
    real, calls = simcse.simcse_step, []

    def interrupted(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(simcse, "simcse_step", interrupted)
    with pytest.raises(KeyboardInterrupt) as exc:
        train_simcse(cfg)
    assert exc.value.run_checkpoint.name == "step-000000001.pt"  # saved by time at step 1
    monkeypatch.setattr(simcse, "simcse_step", real)
    s = train_simcse(cfg)
    assert s.steps == 3 and "from its checkpoint step-000000001.pt (epoch 0, step 1)" in capsys.readouterr().out


def test_an_interrupt_before_any_checkpoint_says_it_starts_over(tiny_model_dir, data_env, tmp_path, monkeypatch,
                                                                capsys):
    import text.methods.simcse as simcse

    def at_once(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(simcse, "simcse_step", at_once)
    out = tmp_path / "gone"
    rc = suite_main(["text", "train", "--backbone", str(tiny_model_dir), "--max-steps", "3", "--batch-size", "8",
                     "--no-dev-eval", "--out", str(out), "--pooling", "cls", "--final-eval", "none"])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "Loading weights" not in line]
    assert rc == 130 and len(err) == 1  # (transformers' own bar for the backbone's weights aside)
    assert f"no checkpoint of the run in {out} was written yet, so the same command starts it over" in err[0]
