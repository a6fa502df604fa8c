"""The MLM tokenizer: a WordPiece vocabulary trained on the training sentences, checked against the model, and the
corpus tokenized once into a cache (keyed by corpus and vocabulary)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from suite.paths import cache_dir
from suite.safeio import load_arrays, save_arrays
from text.mlm.config import SPECIAL


def train_tokenizer(sentences: list[str], vocab_size: int, out: Path) -> Any:
    """A lower-cased WordPiece vocabulary trained on ``sentences``, saved in ``out`` as a ``BertTokenizerFast``."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True, clean_text=True, strip_accents=True)
    wp.train_from_iterator(sentences, vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL),
                           limit_alphabet=1000, wordpieces_prefix="##", show_progress=False)
    out.mkdir(parents=True, exist_ok=True)
    wp.save_model(str(out))
    tok = BertTokenizerFast(tokenizer_object=wp._tokenizer, do_lower_case=True, model_max_length=512,
                            **dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL)))
    tok.save_pretrained(str(out))
    return tok

def load_tokenizer(out: Path, vocab_size: int) -> Any:
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(str(out))
    check_vocab(tok, vocab_size, out)
    return tok

def check_vocab(tok: Any, vocab_size: int, where: Path | str) -> None:
    """The tokenizer's vocabulary must be the model's: same size, BERT's special tokens at 0..4."""
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL]
    if len(tok) > vocab_size or ids != list(range(len(SPECIAL))):
        raise ValueError(f"the tokenizer in {where} does not match the model: {len(tok)} tokens for a vocabulary of "
                         f"{vocab_size}, special tokens at {dict(zip(SPECIAL, ids))} (expected 0..4); "
                         f"remove the folder or choose another --out")

def tokenize_corpus(tok: Any, sentences: list[str], key: str) -> tuple[Tensor, Tensor]:
    """(flat token ids int32, offsets int64 (n + 1)) of every sentence without special tokens, cached by
    (corpus, vocabulary)."""
    path = cache_dir("mlm") / f"tokens-{key}.npz"
    if path.exists():
        try:
            arrays, meta = load_arrays(path, what="MLM token cache")
            if meta.get("n") == len(sentences):
                return arrays["tokens"], arrays["offsets"]
        except ValueError:
            pass  # unreadable cache: rebuilt below
    ids: list[list[int]] = []
    for i in range(0, len(sentences), 8192):
        ids += tok(sentences[i:i + 8192], add_special_tokens=False)["input_ids"]
    lengths = torch.tensor([len(x) for x in ids], dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    tokens = torch.tensor([t for x in ids for t in x], dtype=torch.int32)
    save_arrays(path, {"tokens": tokens, "offsets": offsets}, {"n": len(sentences)})
    return tokens, offsets
