"""MLM pretraining (text/mlm/; its bad inputs: tests/reliability/test_mlm_corpus.py): BERT's masking, batching, the
masked-position loss against transformers' full-logit loss, resume, the built-model marker, and that
SimCSE takes the result as its backbone."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from text.mlm import SPECIAL, MLMConfig, bucketed_batches, collate, mask_tokens, mlm_loss, output_dir, pretrain_mlm

WORDS = "the a cat dog sat ran on under mat house red blue big small quickly slowly and or".split()


def _corpus(path: Path, n: int = 400, seed: int = 0) -> Path:
    rng = random.Random(seed)
    path.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)) + "\n")
    return path


def _cfg(corpus: Path, **kw) -> MLMConfig:
    base = dict(corpus=[str(corpus)], vocab_size=120, heldout=20, layers=1, hidden=32, heads=2, intermediate=64,
                batch_size=16, steps=12, eval_every=6, checkpoint_every=4, bf16=False, out="models:tiny")
    return MLMConfig(**{**base, **kw})


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="hidden"):
        MLMConfig(hidden=30, heads=4)
    with pytest.raises(ValueError, match="mask_prob"):
        MLMConfig(mask_prob=1.5)


def test_masking_follows_bert():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(len(SPECIAL), 1000, (400, 50))
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    ids[:, 40:49] = 0  # padding (attention 0)
    ids[0, 5] = 1  # an [UNK] may be predicted like any word
    attn = (ids != 0).long()
    inputs, labels = mask_tokens(ids, attn, 0.15, 1000, g, mask_id=4)
    sel = labels >= 0
    cand = attn.bool() & (ids != 2) & (ids != 3)
    assert not (sel & ~cand).any()  # never [CLS], [SEP] or padding
    assert (labels[sel] == ids[sel]).all()
    assert (inputs[~sel] == ids[~sel]).all()
    frac = sel.sum() / cand.sum()
    assert 0.14 < float(frac) < 0.16
    masked = (inputs[sel] == 4).float().mean()
    kept = (inputs[sel] == ids[sel]).float().mean()
    assert 0.77 < float(masked) < 0.83 and 0.08 < float(kept) < 0.12
    assert int(inputs[sel & (inputs != 4) & (inputs != ids)].min()) >= len(SPECIAL)  # random tokens are words


def test_masking_predicts_at_least_one_token():
    ids = torch.tensor([[2, 7, 3]])
    _, labels = mask_tokens(ids, torch.ones_like(ids), 1e-9, 10, torch.Generator().manual_seed(0), mask_id=4)
    assert labels.tolist() == [[-100, 7, -100]]


def test_collate_and_bucketed_batches():
    lengths = torch.tensor([3, 1, 5, 2])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    tokens = torch.arange(10, 10 + int(lengths.sum()), dtype=torch.int32)
    ids, attn = collate(torch.tensor([0, 2, 1]), tokens, offsets, max_length=6, cls_id=2, sep_id=3)
    assert ids.tolist() == [[2, 10, 11, 12, 3, 0], [2, 14, 15, 16, 17, 3], [2, 13, 3, 0, 0, 0]]  # 5 cut to 4
    assert attn.tolist() == [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]
    lens = torch.randint(1, 40, (1000,))
    index = torch.arange(1000)
    a = bucketed_batches(index, lens, 16, seed=3, epoch=1, block=8)
    assert all(torch.equal(x, y) for x, y in zip(a, bucketed_batches(index, lens, 16, seed=3, epoch=1, block=8)))
    assert not all(torch.equal(x, y) for x, y in zip(a, bucketed_batches(index, lens, 16, seed=3, epoch=2, block=8)))
    assert sorted(torch.cat(a).tolist()) == list(range(1000))  # every sentence once
    spread = torch.stack([lens[b].max() - lens[b].min() for b in a]).float().mean()
    assert float(spread) < 10  # bucketing: a random batch of 16 spans ~35


def test_masked_position_loss_equals_the_full_logit_loss():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32)).eval()
    ids = torch.randint(5, 50, (4, 9))
    attn = torch.ones_like(ids)
    attn[2, 6:] = 0
    inputs, labels = mask_tokens(ids, attn, 0.3, 50, torch.Generator().manual_seed(1), mask_id=4)
    ours, correct = mlm_loss(model, inputs, attn, labels)
    full = model(input_ids=inputs, attention_mask=attn, labels=labels)
    assert float(ours) == pytest.approx(float(full.loss), rel=1e-5)
    sel = labels >= 0
    assert int(correct) == int((full.logits[sel].argmax(-1) == labels[sel]).sum())


def _interrupt_at(monkeypatch, n: int) -> None:
    """The ``n``-th training batch raises an interruption (``eval_every=0``: no held-out masks are drawn)."""
    import text.mlm.task as mlm  # the task's step draws the masks

    calls, real = {"n": 0}, mlm.mask_tokens

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mlm, "mask_tokens", interrupted)


def _interrupted(monkeypatch, corpus: Path, reg, out: str) -> Path:
    """A build to ``out`` interrupted at its 9th training batch (its checkpoint at step 8); returns its folder."""
    _interrupt_at(monkeypatch, 9)
    with pytest.raises(KeyboardInterrupt):
        pretrain_mlm(_cfg(corpus, out=out, eval_every=0), reg)
    monkeypatch.undo()
    return output_dir(_cfg(corpus, out=out))


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "export" / "model.safetensors")


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """The same weights: bit for bit on one thread; with two intra-op threads the resumed steps may round
    differently (seen: at most 1.2e-7 on LayerNorm weights, ~1e-9 elsewhere), while another mask or batch order moves
    them by ~1e-3."""
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=0, atol=1e-6) for k in a)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One uninterrupted 12-step build (models:full) and the registry that recorded it."""
    from suite.registry import Registry

    d = tmp_path_factory.mktemp("mlm")
    corpus = _corpus(d / "c.txt")
    reg = Registry(str(d / "reg.sqlite"))
    return corpus, reg, pretrain_mlm(_cfg(corpus, out="models:full"), reg)


def test_build_export_marker_and_backbone(built):
    """a finished build: the run owner's export (transformers model + tokenizer + card + run.json) in <out>/export,
    no checkpoint left, mlm.json marking it built (the same command trains nothing, another config is refused), and
    `--backbone models:NAME` loads it (SimCSE records which build it used)"""
    import json

    from suite.config import experiment_config
    from text.methods.simcse import SimCSEConfig, SimCSETask
    from text.models.encoder import build_encoder

    corpus, reg, full = built
    assert full.steps == 12 and 0 < full.metrics["mlm_acc"] <= 1
    out = output_dir(_cfg(corpus, out="models:full"))
    assert full.folder == out and full.export == out / "export"
    for name in ("model.safetensors", "config.json", "README.md", "vocab.txt", "tokenizer.json", "run.json"):
        assert (out / "export" / name).exists(), name
    assert not list(out.rglob("*.pt"))  # checkpoints removed once built
    record = json.loads((out / "export" / "run.json").read_text())
    assert (record["task"], record["run_id"], record["loss_hparams"]) == ("mlm", full.run_id, {"mask_prob": 0.15})
    assert record["config"] == experiment_config(_cfg(corpus)) == json.loads((out / "mlm.json").read_text())["config"]
    row = reg.runs()[0]
    assert [row[k] for k in ("task", "primary_metric", "primary_split")] == ["mlm", "mlm_loss", "val"]
    assert row["status"] == "finished"
    assert reg.final_metrics(row["id"])[("mlm_loss", "val")] == pytest.approx(full.metrics["mlm_loss"])

    again = pretrain_mlm(_cfg(corpus, out="models:full"), reg)
    assert again.reused == full.run_id and again.metrics == full.metrics and len(reg.runs()) == 1
    with pytest.raises(ValueError, match=r"another configuration \(differs in \['steps'\]\)"):
        pretrain_mlm(_cfg(corpus, out="models:full", steps=13), reg)

    enc = build_encoder("models:full", pooling="mean", mlp_head=False)
    z = enc(**enc.tokenize(["the cat sat", "a dog ran on the mat"], 16))
    assert z.shape == (2, 32) and torch.isfinite(z).all()
    ids = enc.tokenize(["the cat"], 8)["input_ids"][0].tolist()
    assert enc.tokenizer.convert_ids_to_tokens(ids)[1:3] == ["the", "cat"]
    info = SimCSETask(SimCSEConfig()).run_info(SimCSEConfig(backbone="models:full"))
    assert info["backbone_run"] == full.run_id and info["backbone_code_version"]


def test_interrupted_build_resumes_bit_identical(built, monkeypatch):
    """a build interrupted at step 9 (checkpoint at step 8), continued with another device spelling and checkpoint
    interval (run options) -> the same folder and registry row, the same weights and held-out metrics as the
    uninterrupted build; a changed experiment field on that folder is refused naming it"""
    from suite.train import ConfigMismatchError

    corpus, reg, full = built
    out = _interrupted(monkeypatch, corpus, reg, "models:resumed")
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-000000008.pt"]
    with pytest.raises(ConfigMismatchError, match="lr"):
        pretrain_mlm(_cfg(corpus, out="models:resumed", eval_every=0, lr=1e-3), reg)
    res = pretrain_mlm(_cfg(corpus, out="models:resumed", eval_every=0, checkpoint_every=5, device="cpu"), reg)
    a, b = _weights(output_dir(_cfg(corpus, out="models:full"))), _weights(out)
    assert _same(a, b)  # the uninterrupted run's weights
    assert res.metrics == pytest.approx(full.metrics, rel=1e-5) and res.steps == 12
    rows = [r for r in reg.runs() if str(out) in (r["run_options"] or "")]
    assert [r["status"] for r in rows] == ["finished"] and rows[0]["id"] == res.run_id  # one row, continued
    assert rows[0]["config_hash"] == {r["id"]: r for r in reg.runs()}[full.run_id]["config_hash"]  # one setting


def test_a_build_of_the_older_layout_resumes(built, monkeypatch):
    """a folder left by the MLM code before the run owner (its checkpoint at <out>/checkpoint.pt, its vocabulary at
    the top of the folder) -> resumed from that checkpoint with that tokenizer: the same weights as an uninterrupted
    build; the old checkpoint is removed once the model is built"""
    corpus, reg, _ = built
    out = _interrupted(monkeypatch, corpus, reg, "models:legacy")
    (out / "checkpoints" / "step-000000008.pt").rename(out / "checkpoint.pt")  # the older layout
    for f in (out / "tokenizer").iterdir():
        f.rename(out / f.name)
    (out / "tokenizer").rmdir()
    pretrain_mlm(_cfg(corpus, out="models:legacy", eval_every=0), reg)
    a, b = _weights(output_dir(_cfg(corpus, out="models:full"))), _weights(out)
    assert _same(a, b)
    assert not (out / "checkpoint.pt").exists() and not (out / "tokenizer").exists()
