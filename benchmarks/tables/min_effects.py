"""The minimum effect of each metric a claim is judged on, declared before the runs with its reason (issue 77): a
small effect in Cohen's sense of the baseline's published between-seed spread, or a named convention of the field.
:class:`benchmarks.tables.claims.Claim` takes its own from here; :mod:`benchmarks.tables.catalogue` re-exports it."""
from __future__ import annotations

import importlib
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class MinEffect:
    """The minimum effect ``m`` of one metric (a claim's ``task`` and ``metric``, as :class:`~benchmarks.tables.claims.
    Claim` names them), declared before the runs with its reason. The rule, scale-free: **a small effect in Cohen's
    sense, 0.2 published between-seed standard deviations of the baseline** (:data:`FRACTION`; ``published_sd``:
    "module:function" giving the per-set SDs the paper prints for the comparison's baseline, averaged over the sets),
    so that the margin is in the unit of the noise a user meets when they reseed, and is fixed by the paper, before
    our runs; where the paper prints no spread, the field's convention named in ``reason`` (``value``)."""
    task: str
    metric: str
    value: float | None  # None: FRACTION x the published seed SD
    reason: str
    published_sd: str = ""

    def resolve(self) -> float:
        if self.value is not None:
            return self.value
        mod, fn = self.published_sd.split(":")
        sds = getattr(importlib.import_module(mod), fn)()
        return round(FRACTION * statistics.fmean(sds), 2)


FRACTION = 0.2  # of the published between-seed SD: Cohen's (1988) "small" standardised effect


def molnet_none_sds() -> list[float]:
    """Hu et al. 2020 Table 1: no pretraining's standard deviation over 10 seeds, per set (graph_molnet.py's data)."""
    from benchmarks.tables.published import PUBLISHED_STD_NONE

    return list(PUBLISHED_STD_NONE.values())


def tu_graphcl_sds() -> list[float]:
    """GraphCL's published standard deviation over seeds, per TU set (graph_tu.py's data)."""
    from benchmarks.tables.published import PUBLISHED_TU

    return [graphcl[1] for graphcl, _ in PUBLISHED_TU.values()]
_HALF_POINT = ("half a point: the field's convention for accuracies and correlations in percent (papers print one "
               "decimal and read gaps under 0.5 as ties); the paper prints no seed spread for this metric")
MIN_EFFECTS: tuple[MinEffect, ...] = (
    MinEffect("graph/molnet-finetune", "rocauc_last avg", None, "0.2 published between-seed SDs (Cohen's small effect) of no pretraining "
              "(Hu et al. 2020 Table 1, 10 seeds; mean over the eight sets)",
              "benchmarks.tables.min_effects:molnet_none_sds"),
    MinEffect("graph/tu-graphcl", "acc", None, "0.2 published between-seed SDs (Cohen's small effect) of GraphCL (You et al. 2020, as "
              "MACL's Table 4 reprints it; mean over the six sets)", "benchmarks.tables.min_effects:tu_graphcl_sds"),
    MinEffect("text/simcse", "avg", 0.5, _HALF_POINT),
    MinEffect("vision-cifar", "accuracy (%)", 0.5, _HALF_POINT),
    MinEffect("vision", "*", 0.5, _HALF_POINT),
    MinEffect("xclr", "linear accuracy (%)", 0.5, _HALF_POINT),
    MinEffect("xclr", "kNN accuracy (%)", 0.5, _HALF_POINT),
    MinEffect("xclr", "percentage points of SimCLR's step", 0.0, "the claim is its own margin: X-CLR's overhead "
              "below 5 % of SimCLR's step (the paper's 'almost no time'), so any positive contrast holds"),
    MinEffect("xclr", "correlation", 0.05, "a twentieth of the correlation's range: differences of r below 0.05 are "
              "read as ties in the representation-similarity literature (two decimals printed)"),
    MinEffect("xclr", "intra-class connectivity", 0.05, "the X-CLR paper prints connectivity to 0.001 with gaps of "
              "0.1-0.2 between methods; 0.05 (a quarter of its smallest) is taken as the least it would call a gap"),
    MinEffect("gmm-2d", "ood_acc", 0.5, _HALF_POINT),
    MinEffect("gmm-1d-order", "ordered", 0.5, "half a point of the ordering rate (percent), as for accuracies"),
)


def min_effect_of(task: str, metric: str) -> float | None:
    """The declared minimum effect of a claim's ``task`` and ``metric`` (:data:`MIN_EFFECTS`; ``"*"`` any metric of
    the task); None where none is declared (the rule's default applies)."""
    for m in MIN_EFFECTS:
        if m.task == task and m.metric in (metric, "*"):
            return m.resolve()
    return None


def min_effect_reason(task: str, metric: str) -> str:
    return next((m.reason for m in MIN_EFFECTS if m.task == task and m.metric in (metric, "*")), "")
