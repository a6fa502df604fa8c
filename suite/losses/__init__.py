"""The loss core: one module per loss, a name registry, shared validation and masks.

>>> import suite.losses as L
>>> L.available()
>>> loss = L.build("macl", tau0=0.2)
"""
from suite.losses.base import ContrastiveLoss
from suite.losses.registry import (aliases, available, build, canonical_name, defaults, loss_class, plugins,
                                   register_loss)
from suite.losses.align_uniform import AlignUniform
from suite.losses.cacr import CACR
from suite.losses.cmc import CMC
from suite.losses.dcl import DCL
from suite.losses.hard_negative import HardNegative
from suite.losses.infonce import InfoNCE
from suite.losses.macl import MACL
from suite.losses.pair import PairLoss
from suite.losses.simclr_l2 import SimCLRL2
from suite.losses.supcon import SupCon
from suite.losses.tsimclr import TSimCLR, iou_weights
from suite.losses.xclr import XCLR

__all__ = [
    "ContrastiveLoss", "PairLoss", "available", "aliases", "build", "canonical_name", "defaults", "loss_class", "plugins",
    "register_loss",
    "AlignUniform", "CACR", "CMC", "DCL", "HardNegative", "InfoNCE", "MACL", "SimCLRL2", "SupCon", "TSimCLR", "XCLR",
    "iou_weights", "apply_loss",
]


def apply_loss(loss: ContrastiveLoss, views, **extra):  # type: ignore[no-untyped-def]
    """Call ``loss`` on stacked views ``(V, N, d)``: multi-view losses get all V views, two-view
    losses need V == 2 and get ``(views[0], views[1])``. ``extra`` (labels, similarity, queue, weights)
    is passed through."""
    if loss.multi_view:
        return loss(views, **extra)
    if views.shape[0] != 2:
        raise ValueError(f"loss {loss.name!r} takes two views; got V = {views.shape[0]} (multi-view losses: cacr, uaur, cmc)")
    return loss(views[0], views[1], **extra)
