"""Masked-language-model pretraining of a small BERT from scratch: a start model for SimCSE that is
not already trained contrastively (no MLM-only BERT checkpoint can be obtained offline).

    suite text mlm --out models:bert-mini-english            # ~/.cache/suite/models/bert-mini-english
    suite text train --backbone models:bert-mini-english ...   # SimCSE from it

Corpus: the plain-English sentences of ``english/{wordnet,gcide}_sentences.txt.gz`` plus the local wiki
sentences (``SUITE_DATA``); one sentence a line, gzip or plain UTF-8. Empty lines and lines that are not
UTF-8 are skipped and counted (recorded with the run), a truncated gzip file is a clear error naming it.
A fixed set of ``heldout`` sentences (chosen with a fixed seed, the same for every run seed) measures the
validation MLM loss and masked-token accuracy.

Tokenizer: a WordPiece vocabulary (``vocab_size``, lower-cased, BERT's special tokens) trained with
``tokenizers`` on the training sentences, kept in ``<out>/tokenizer`` while the run trains and exported beside the
model as a ``BertTokenizerFast``.

Model: transformers' ``BertForMaskedLM`` (BERT-mini shape by default: 4 layers x 256, 4 heads, 1024 FFN,
tied input/output embeddings). BERT's masking (15 % of the non-special tokens; of those 80 % [MASK],
10 % a random token, 10 % kept), with the output layer evaluated at the masked positions only (the loss
is the same as with logits everywhere, at a fraction of the cost). No next-sentence objective (one
sentence per example, as RoBERTa's FULL-SENTENCES drops NSP). Sentences are batched with length bucketing
(a shuffled epoch is cut into blocks of 64 batches, each block sorted by length), so padding is small.

The package, by concern: :mod:`text.mlm.config` (the setting), :mod:`text.mlm.corpus` (the sentence files,
the held-out split), :mod:`text.mlm.tokenizer` (the WordPiece vocabulary and the token cache), :mod:`text.mlm.batches`
(length-bucketed batches, BERT's masking), :mod:`text.mlm.model` (the model and its loss), :mod:`text.mlm.task` (the
run) and :mod:`text.mlm.card` (the export's model card).

Training goes through the run owner (:func:`suite.train.run.run`, :class:`MLMTask`): AdamW, linear warm-up then
linear decay, counted in steps; the owner seeds it (the masks are its generator ``mask``), checkpoints it every
``checkpoint_every`` steps in ``<out>/checkpoints/step-<N>.pt`` (a folder of the layout before is resumed too:
:attr:`MLMTask.earlier`), resumes it only with the same experiment config (``device``, ``checkpoint_every``, ``eval_every``,
``resume`` and ``out`` are run options), records the registry row (task ``mlm``, the loss curve, train and held-out)
and exports the model to ``<out>/export``: a transformers model (``AutoModel.from_pretrained`` and
``AutoTokenizer``) with its card and ``run.json``. ``suite text train --backbone <out>`` (or ``models:NAME``) takes
the folder (its ``export/``; a model built before the run owner sits in the folder itself). ``mlm.json`` in the
folder records the experiment config, the registry run and the code version and marks it complete: running the
same command again reports it as built and trains nothing, another config pointed at the same folder is refused.
"""
from text.mlm.batches import bucketed_batches, collate, mask_tokens
from text.mlm.config import CORPUS, DONE, SPECIAL, MLMConfig, output_dir
from text.mlm.corpus import Corpus, read_corpus, read_corpus_file, split_heldout
from text.mlm.model import MLMObjective, build_model, mlm_loss
from text.mlm.task import MLMTask, built_model, pretrain_mlm
from text.mlm.tokenizer import check_vocab, load_tokenizer, tokenize_corpus, train_tokenizer

__all__ = ["CORPUS", "DONE", "SPECIAL", "Corpus", "MLMConfig", "MLMObjective", "MLMTask", "bucketed_batches",
           "build_model", "built_model", "check_vocab", "collate", "load_tokenizer", "mask_tokens", "mlm_loss",
           "output_dir", "pretrain_mlm", "read_corpus", "read_corpus_file", "split_heldout", "tokenize_corpus",
           "train_tokenizer"]
