"""SentEval's STS protocol (unsupervised setting: cosine similarity, no training), as used by
SimCSE and MACL: Spearman correlation between cosine similarities and gold scores.

STS12-16 are reported in three aggregations over their sub-sets:

- ``all``: Spearman over the pooled pairs of all sub-sets (SimCSE's headline setting);
- ``mean``: the plain mean of the per-sub-set correlations;
- ``wmean``: the mean weighted by the number of pairs (SentEval's default).

STS-B and SICK-R use their test split. Pairs without a gold score are skipped and counted
(``<task>_skipped``). ``avg`` averages the seven tasks in the chosen ``aggregation``.

    metrics = STSEvaluator()(encode_fn)  # {"sts12": 0.68, ..., "stsb": 0.80, "sickr": 0.72, "avg": ...}
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from text.data import STS_YEARS, PairSet, read_sick, read_sts_year, read_stsb

STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR")
AGGREGATIONS = ("all", "mean", "wmean")


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), 1-based, as scipy.stats.rankdata."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    first = np.r_[True, xs[1:] != xs[:-1]]
    grp = np.cumsum(first) - 1  # tie group of each sorted element
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(x)]
    avg = (starts + ends + 1) / 2.0  # mean of 1-based ranks starts+1..ends
    r = np.empty(len(x))
    r[order] = avg[grp]
    return r


def spearman(x: np.ndarray | Tensor | list[float], y: np.ndarray | Tensor | list[float]) -> float:
    """Spearman's rho = Pearson correlation of average ranks. (N,), (N,) -> float."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError(f"spearman needs two equal-length vectors of >= 2 values; got {a.shape} and {b.shape}")
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def aggregate(parts: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """parts: sub-set -> (predicted, gold). Returns per-sub-set Spearman and all/mean/wmean."""
    per = {k: spearman(p, g) for k, (p, g) in parts.items()}
    n = np.array([len(g) for _, g in parts.values()], dtype=np.float64)
    vals = np.array(list(per.values()))
    pred = np.concatenate([p for p, _ in parts.values()])
    gold = np.concatenate([g for _, g in parts.values()])
    return {**per, "all": spearman(pred, gold), "mean": float(vals.mean()), "wmean": float((vals * n).sum() / n.sum())}


def load_sts_task(task: str, root: Path | None = None) -> dict[str, PairSet]:
    if task in STS_YEARS:
        return read_sts_year(task, root)
    if task == "STSB":
        return {"test": read_stsb("test", root)}
    if task == "SICKR":
        return {"test": read_sick("test", root)}
    if task == "STSB-dev":
        return {"dev": read_stsb("dev", root)}
    raise ValueError(f"unknown STS task {task!r}; valid: {list(STS_TASKS) + ['STSB-dev']}")


class STSEvaluator:
    """Callable ``encode_fn -> metrics``. ``encode_fn(list[str]) -> (N, d)``; every unique sentence of
    the requested tasks is encoded once, in one length-bucketed call. ``primary_metric`` (the headline
    recorded in the registry) is ``avg`` over several tasks, else the one task's key (``stsb_dev``)."""

    def __init__(self, tasks: tuple[str, ...] | list[str] = STS_TASKS, aggregation: str = "all",
                 root: Path | None = None, subsets: bool = False) -> None:
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.tasks = list(tasks)
        self.aggregation = aggregation
        self.subsets = subsets
        self.data = {t: load_sts_task(t, root) for t in self.tasks}
        self.primary_metric = "avg" if len(self.tasks) > 1 else self.tasks[0].lower().replace("-", "_")

    def __call__(self, encode_fn: Callable[[list[str]], Tensor]) -> dict[str, float]:
        texts = list(dict.fromkeys(s for sets in self.data.values() for ps in sets.values() for s in ps.a + ps.b))
        emb = F.normalize(encode_fn(texts).float(), dim=-1)  # (U, d)
        index = {t: i for i, t in enumerate(texts)}
        out: dict[str, float] = {}
        headline = []
        for task, sets in self.data.items():
            parts = {}
            for name, ps in sets.items():
                ia = torch.tensor([index[s] for s in ps.a])
                ib = torch.tensor([index[s] for s in ps.b])
                cos = (emb[ia] * emb[ib]).sum(-1).numpy()  # (P,)
                parts[name] = (cos, np.asarray(ps.scores))
            key = task.lower().replace("-", "_")
            if len(parts) == 1:  # STS-B / SICK-R: one test split
                (p, g), = parts.values()
                out[key] = spearman(p, g)
            else:
                agg = aggregate(parts)
                out[key] = agg[self.aggregation]
                for a in AGGREGATIONS:
                    out[f"{key}_{a}"] = agg[a]
                if self.subsets:
                    out.update({f"{key}/{k}": agg[k] for k in parts})
            out[f"{key}_pairs"] = float(sum(len(ps) for ps in sets.values()))
            out[f"{key}_skipped"] = float(sum(ps.skipped for ps in sets.values()))
            headline.append(out[key])
        if len(headline) > 1:
            out["avg"] = float(np.mean(headline))
        return out
