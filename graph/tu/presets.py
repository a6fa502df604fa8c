"""Loss presets of the graph front-end, read from :mod:`suite.presets` (setting ``graph_tu``): a preset is a loss
name of the core, its hyper-parameters and the number of views it is trained on (:func:`suite.presets.views`);
GraphCL's view layout keeps the original graph as the first view. Any other ``suite.losses`` name is accepted
with its own defaults.

=========  ====================================================================  ================
preset     loss                                                                  views
=========  ====================================================================  ================
graphcl    dcl(temperature=0.2, negatives="cross", symmetric=False): GraphCL's    orig+aug
           released objective (positive out of the denominator, MACL App. B.5)
macl       macl(tau0=0.2, alpha=0.5, a0=0, negatives="cross", symmetric=False):  orig+aug
           MACL App. B.5 ("all augmentations and hyper-parameters except those
           about the loss are taken from GraphCL"), so GraphCL's arrangement of
           anchors and negatives is kept: anchors are the original graphs, the
           negatives the other augmented graphs of the batch. MACL keeps the
           positive in the denominator (its P_i and the 1/(1-P_i) reweighting
           are defined on InfoNCE's softmax).
infonce    infonce(temperature=0.2, negatives="cross", symmetric=False)          orig+aug
cacr       cacr(t_pos=1, t_neg=2) (CACR's defaults), V = 2                       orig+aug
cacr3      cacr, V = 3: the original graph and two augmented views               orig+aug+aug
tsimclr    tsimclr(temperature=5, t_df=5) (t-SimCLR defaults, Euclidean space)  orig+aug
xclr       not applicable: X-CLR needs a sample-similarity source (N, N); TU     -
           graphs have none (only the labels, which an unsupervised benchmark
           must not use)
=========  ====================================================================  ================
"""
from __future__ import annotations

from typing import Any

from suite import presets
from suite.losses import ContrastiveLoss

VIEW_MODES = ("orig+aug", "aug+aug", "orig+aug+aug", "aug+aug+aug")
SETTING = "graph_tu"


def resolve(name: str, overrides: dict[str, Any] | None = None, views: str | None = None) -> tuple[ContrastiveLoss, str, dict[str, Any]]:
    """``(loss, views, record)`` for a preset, a core loss name or a user's loss (:func:`suite.presets.make_loss`).

    ``overrides`` update the preset's hyper-parameters; ``views`` (one of :data:`VIEW_MODES`)
    overrides the preset's views. ``record`` describes the choice for the registry."""
    built = presets.make_loss(SETTING, name, overrides, aliases=False, provides=())
    loss = built.loss
    v = views or "orig" + "+aug" * (built.views - 1)
    if v not in VIEW_MODES:
        raise ValueError(f"views must be one of {VIEW_MODES}, got {v!r}")
    if len(v.split("+")) > 2 and not loss.multi_view:
        raise ValueError(f"loss {built.name!r} takes two views; views={v!r} needs a multi-view loss (cacr, uaur, cmc)")
    return loss, v, {"preset": built.preset, "loss": built.name, "views": v}
