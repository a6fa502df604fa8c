"""Tiny offline fixtures: a random BertConfig model with a locally built tokenizer, and a fake
SentEval ``downstream`` tree (STS12-16 layouts incl. empty gold lines, STS-B, SICK, transfer, SNLI)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

WORDS = ("a man woman dog cat is are the playing running eating guitar piano ball park street "
         "red blue big small child children group of on in with and yes no good bad movie film").split()


def _sent(rng: random.Random, n: int | None = None) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n or rng.randint(3, 9)))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."] + sorted(set(WORDS))
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(d / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1)
    BertModel(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def fake_senteval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Data root with senteval/downstream/... and wiki/wiki1m_head11914.txt in SentEval's layout."""
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("data")
    ds = root / "senteval" / "downstream"
    from text.data import STS_YEARS

    for year, subsets in STS_YEARS.items():
        d = ds / "STS" / f"{year}-en-test"
        d.mkdir(parents=True)
        for s in subsets:
            pairs = [(_sent(rng), _sent(rng)) for _ in range(12)]
            gold = [f"{rng.uniform(0, 5):.3f}" for _ in pairs]
            if year in ("STS15", "STS16"):
                gold[::3] = [""] * len(gold[::3])  # pairs without a gold score
            (d / f"STS.input.{s}.txt").write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
            (d / f"STS.gs.{s}.txt").write_text("".join(f"{g}\n" for g in gold))
    stsb = ds / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    for split, n in (("train", 30), ("dev", 24), ("test", 20)):
        (stsb / f"sts-{split}.csv").write_text("".join(
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{_sent(rng)}\t{_sent(rng)}\n" for i in range(n)))
    sick = ds / "SICK"
    sick.mkdir(parents=True)
    head = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    labs = ("ENTAILMENT", "CONTRADICTION", "NEUTRAL")
    for name, n in (("SICK_train.txt", 30), ("SICK_trial.txt", 9), ("SICK_test_annotated.txt", 20)):
        prem = [_sent(rng) for _ in range((n + 2) // 3)]
        rows = [f"{i}\t{prem[i // 3]}\t{_sent(rng)}\t{rng.uniform(1, 5):.1f}\t{labs[i % 3]}\n" for i in range(n)]
        (sick / name).write_text(head + "".join(rows))
    for task, files in (("MR", ("rt-polarity.pos", "rt-polarity.neg")), ("CR", ("custrev.pos", "custrev.neg")),
                        ("SUBJ", ("subj.subjective", "subj.objective")), ("MPQA", ("mpqa.pos", "mpqa.neg"))):
        (ds / task).mkdir()
        for f in files:
            (ds / task / f).write_text("".join(_sent(rng) + "\n" for _ in range(20)))
    sst = ds / "SST" / "binary"
    sst.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (sst / f"sentiment-{split}").write_text("".join(f"{_sent(rng)} \t{i % 2}\n" for i in range(20)))
    (ds / "TREC").mkdir()
    for f, n in (("train_5500.label", 60), ("TREC_10.label", 12)):
        cls = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
        (ds / "TREC" / f).write_text("".join(f"{cls[i % 6]}:x {_sent(rng)} ?\n" for i in range(n)))
    (ds / "MRPC").mkdir()
    for split in ("train", "test"):
        (ds / "MRPC" / f"msr_paraphrase_{split}.txt").write_text("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
            f"{i % 2}\t{i}\t{i + 1}\t{_sent(rng)}\t{_sent(rng)}\n" for i in range(20)))
    snli = ds / "SNLI"
    snli.mkdir()
    for split in ("dev", "test"):
        prem = [_sent(rng) for _ in range(8)]
        s1 = [p for p in prem for _ in range(3)]
        s2 = [_sent(rng) for _ in s1]
        lab = ["neutral", "entailment", "contradiction"] * len(prem)
        for k, v in (("s1", s1), ("s2", s2), ("labels", lab)):
            (snli / f"{k}.{split}").write_text("".join(x + "\n" for x in v))
    (root / "wiki").mkdir()
    (root / "wiki" / "wiki1m_head11914.txt").write_text("".join(_sent(rng) + "\n" for _ in range(200)))
    return root


@pytest.fixture()
def data_env(fake_senteval: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUITE_DATA", str(fake_senteval))
    return fake_senteval


@pytest.fixture(autouse=True)
def _one_thread():
    """The tiny models here run ~50x faster on one intra-op thread than on two when the shared
    cores are oversubscribed (spinning worker threads); restored after each test."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
