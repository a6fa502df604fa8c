"""Pretraining frameworks: SimCLR (in-batch negatives) and MoCo-v2 (momentum encoder + queue)."""
from vision.methods.common import check_views_for_loss, loss_extras
from vision.methods.moco import KeyQueue, MoCo, momentum_update
from vision.methods.simclr import SimCLR

FRAMEWORKS = ("simclr", "moco")

__all__ = ["FRAMEWORKS", "KeyQueue", "MoCo", "SimCLR", "check_views_for_loss", "loss_extras",
           "momentum_update"]
