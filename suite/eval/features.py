"""Feature extraction in inference mode over a data loader."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import Tensor


@torch.inference_mode()
def extract_features(encode: Callable[[Any], Tensor], batches: Iterable[Any]) -> Tensor:
    """Concatenate ``encode(batch)`` over ``batches`` (model should be in eval mode)."""
    feats = [encode(b).float().cpu() for b in batches]
    if not feats:
        raise ValueError("no batches to extract features from")
    return torch.cat(feats)
