"""SentEval's STS and transfer protocols, re-implemented; batched, cached encoding."""
from text.eval.encode import EncodeFn, encode_texts
from text.eval.sts import STS_TASKS, STSEvaluator, spearman
from text.eval.transfer import TransferEvaluator

__all__ = ["EncodeFn", "encode_texts", "STS_TASKS", "STSEvaluator", "spearman", "TransferEvaluator"]
