"""The MLM start model's inputs on a bad day (issue 26): the plain-English corpus with empty lines, bytes that are
not UTF-8, a gzip file cut short or holding nothing; a tokenizer that does not match the model; a built model folder
asked to hold another configuration; a backbone that was never built. Each is counted or refused with the file
named; nothing trains on it."""
from __future__ import annotations

import gzip

import pytest

from text.mlm import MLMConfig, output_dir, pretrain_mlm, read_corpus_file

WORDS = "the a cat dog sat ran on under mat house red blue big small".split()


def _cfg(corpus, **kw) -> MLMConfig:
    base = dict(corpus=[str(corpus)], vocab_size=120, heldout=10, layers=1, hidden=32, heads=2, intermediate=64,
                batch_size=16, steps=4, eval_every=0, checkpoint_every=0, bf16=False, out="models:probe")
    return MLMConfig(**{**base, **kw})


def test_corpus_empty_and_non_utf8_lines_are_counted(tmp_path):
    """a corpus file with blank lines and a line of Latin-1 bytes, plain and gzipped -> the sentences kept, the blank
    and undecodable lines skipped and counted (recorded with the run), never silently dropped"""
    raw = b"first sentence here\n\n   \nsecond one\n\xe9t\xe9 broken\nthird\n"
    (tmp_path / "c.txt").write_bytes(raw)
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(raw))
    for name in ("c.txt", "c.txt.gz"):
        kept, counts = read_corpus_file(tmp_path / name)
        assert kept == ["first sentence here", "second one", "third"]
        assert counts == {"kept": 3, "empty": 2, "not_utf8": 1}


def test_corpus_gzip_cut_short(tmp_path):
    """a .txt.gz corpus cut in the middle (a copy that stopped) -> ValueError naming the file 'not a complete gzip
    file'"""
    good = gzip.compress(b"a sentence of the corpus\n" * 2000)
    (tmp_path / "cut.txt.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"cut\.txt\.gz is not a complete gzip file"):
        read_corpus_file(tmp_path / "cut.txt.gz")


def test_corpus_with_no_sentences(tmp_path):
    """a corpus file of blank lines only, or missing -> ValueError naming the file and what it held"""
    (tmp_path / "blank.txt").write_text("\n \n\n")
    with pytest.raises(ValueError, match=r"blank\.txt holds no sentences \(3 empty lines, 0 lines not UTF-8\)"):
        read_corpus_file(tmp_path / "blank.txt")
    with pytest.raises(ValueError, match=r"corpus file not found: .*gone\.txt"):
        read_corpus_file(tmp_path / "gone.txt")


def test_tokenizer_that_does_not_match_the_model(tmp_path):
    """an output folder whose vocab.txt puts [UNK] before [PAD] (another tokenizer) -> refused before training,
    naming the folder and where the special tokens are"""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) * 10)
    out = output_dir(_cfg(corpus, out="models:probe-vocab"))
    out.mkdir(parents=True)
    (out / "vocab.txt").write_text("\n".join(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    BertTokenizerFast(tokenizer_object=BertWordPieceTokenizer(str(out / "vocab.txt"))._tokenizer).save_pretrained(str(out))
    with pytest.raises(ValueError, match=r"does not match the model.*'\[PAD\]': 1"):
        pretrain_mlm(_cfg(corpus, out="models:probe-vocab"))
    assert not (out / "model.safetensors").exists()


def test_built_model_folder_asked_for_another_config(tmp_path):
    """`suite text mlm` pointed at a folder that holds a model built with other settings -> refused naming the
    differing keys; the model there is left as it is"""
    import json

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) * 10)
    from suite.config import experiment_config

    out = output_dir(_cfg(corpus, out="models:probe-built"))
    out.mkdir(parents=True)
    recorded = {"config": experiment_config(_cfg(corpus, steps=99))}
    (out / "mlm.json").write_text(json.dumps(recorded))
    with pytest.raises(ValueError, match=r"another configuration \(differs in \['steps'\]\)"):
        pretrain_mlm(_cfg(corpus, out="models:probe-built"))
    assert json.loads((out / "mlm.json").read_text()) == recorded


def test_mlm_command_line_bad_settings_and_unbuilt_backbone(tmp_path, monkeypatch, capsys):
    """`suite text mlm --hidden 30 --heads 4` and `suite text train --backbone models:never-built` -> exit 2 with one
    line naming the setting / telling how to build the model, no traceback (the CLI in this process: a
    `python -m suite` process of its own is test_cli_bad_inputs' real-process case)"""
    from suite.cli import main

    monkeypatch.chdir(tmp_path)
    for argv, pattern in ((["text", "mlm", "--hidden", "30", "--heads", "4"], "hidden"),
                          (["text", "train", "--backbone", "models:never-built", "--max-steps", "1"], "suite text mlm")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and pattern in err and len(err.strip().splitlines()) == 1, err
        assert not any(tmp_path.iterdir())  # nothing written
