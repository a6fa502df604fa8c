"""MLM pretraining (text/mlm.py; its bad inputs: tests/reliability/test_mlm_corpus.py): BERT's masking, batching, the
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


def test_pretrain_resume_marker_and_backbone(tmp_path, monkeypatch):
    import text.mlm as mlm
    from safetensors.torch import load_file
    from suite.registry import Registry

    corpus = _corpus(tmp_path / "c.txt")
    reg = Registry(str(tmp_path / "reg.sqlite"))
    full = pretrain_mlm(_cfg(corpus, out="models:full"), reg)
    assert full["steps"] == 12 and 0 < full["val"]["mlm_acc"] <= 1
    out = output_dir(_cfg(corpus, out="models:full"))
    assert (out / "model.safetensors").exists() and (out / "README.md").exists() and not (out / "checkpoint.pt").exists()

    calls = {"n": 0}
    real = mlm.mask_tokens

    def interrupted(*a, **k):  # the 9th training batch is interrupted (checkpoint at step 8)
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(mlm, "mask_tokens", interrupted)
    cfg = _cfg(corpus, out="models:resumed", eval_every=0)
    with pytest.raises(KeyboardInterrupt):
        pretrain_mlm(cfg, reg)
    monkeypatch.setattr(mlm, "mask_tokens", real)
    # resumed with another checkpoint interval (a run option): the same run continues
    pretrain_mlm(_cfg(corpus, out="models:resumed", eval_every=0, checkpoint_every=5), reg)
    a, b = load_file(out / "model.safetensors"), load_file(output_dir(cfg) / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)  # bit-identical to the uninterrupted run
    rows = [r for r in reg.runs() if r["run_options"] and "resumed" in r["run_options"]]
    assert [r["status"] for r in rows] == ["finished"]  # one row, continued

    again = pretrain_mlm(_cfg(corpus, out="models:full"), reg)
    assert again["skipped"] and len(reg.runs()) == 2
    with pytest.raises(ValueError, match=r"another configuration \(differs in \['steps'\]\)"):
        pretrain_mlm(_cfg(corpus, out="models:full", steps=13), reg)

    from text.models.encoder import build_encoder

    enc = build_encoder("models:full", pooling="mean", mlp_head=False)
    z = enc(**enc.tokenize(["the cat sat", "a dog ran on the mat"], 16))
    assert z.shape == (2, 32) and torch.isfinite(z).all()
    assert enc.tokenizer.convert_ids_to_tokens(enc.tokenize(["the cat"], 8)["input_ids"][0].tolist())[1:3] == ["the", "cat"]
