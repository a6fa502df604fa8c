"""A feature bank filled as batches arrive: memory is the features alone.

The rows are preallocated for the ``n`` samples an index already counts, stored unit-normalised (fp16 by default:
2 bytes a dimension, 4 kB an image at 2,048-d) with their norms beside them (4 bytes a row), so cosine kNN reads the
rows as they are (:func:`suite.eval.knn.knn_predict` with ``unit=True``) and a probe on the raw features gets them
back chunk by chunk (:meth:`FeatureBank.raw`): no list of batches, no concatenation, no normalised copy.

Shapes: ``add(h (B, d), y (B,))`` until ``n`` rows; ``x`` (n, d) unit rows, ``norm`` (n,), ``y`` (n,).
Example: >>> b = FeatureBank(4); b.add(torch.randn(4, 8), torch.arange(4)); b.raw(0, 2).shape
torch.Size([2, 8])
"""
from __future__ import annotations

import torch
from torch import Tensor

from suite.train.meters import bar  # noqa: F401 (the evaluation's bars: the training loop's rule)


class FeatureBank:
    """``n`` feature rows, unit-normalised in place as :meth:`add` writes them (``dtype``: fp16 by default), their norms
    (float32) and labels (int64). The width is taken from the first batch."""

    def __init__(self, n: int, dtype: torch.dtype = torch.float16) -> None:
        if n < 0:
            raise ValueError(f"a feature bank of {n} rows")
        self.n, self.dtype, self.filled = int(n), dtype, 0
        self.x = torch.empty(0, 0, dtype=dtype)  # (n, d) once the width is known
        self.norm = torch.empty(self.n, dtype=torch.float32)  # (n,)
        self.y = torch.empty(self.n, dtype=torch.int64)  # (n,)

    @classmethod
    def of(cls, x: Tensor, y: Tensor, dtype: torch.dtype = torch.float32) -> "FeatureBank":
        """A bank holding the features ``x`` (n, d) and labels ``y`` (n,) (float32: exact up to the normalisation)."""
        bank = cls(x.shape[0], dtype)
        bank.add(x, y)
        return bank

    def __len__(self) -> int:
        return self.filled

    @property
    def dim(self) -> int:
        return int(self.x.shape[1])

    @torch.no_grad()
    def add(self, h: Tensor, y: Tensor) -> None:
        """Write the next rows: ``h`` (B, d) features (any device), ``y`` (B,) labels."""
        b = h.shape[0]
        if y.shape[0] != b:
            raise ValueError(f"{b} feature rows and {y.shape[0]} labels")
        if self.filled + b > self.n:
            raise ValueError(f"{self.filled + b} rows for a bank of {self.n}")
        if self.x.numel() == 0 and self.n:
            self.x = torch.empty(self.n, h.shape[1], dtype=self.dtype)  # allocated once, at the width seen
        elif h.shape[1] != self.x.shape[1]:
            raise ValueError(f"features of width {h.shape[1]} for a bank of width {self.x.shape[1]}")
        h = h.float()
        norm = h.norm(dim=1)  # (B,)
        s, e = self.filled, self.filled + b
        self.x[s:e] = (h / norm.clamp_min(1e-12)[:, None]).cpu()  # F.normalize's eps
        self.norm[s:e] = norm.cpu()
        self.y[s:e] = y.to(torch.int64).cpu()
        self.filled = e

    def trim(self) -> "FeatureBank":
        """The rows written so far, as the whole bank (views: a source that yielded fewer samples than it counted)."""
        if self.filled < self.n:
            self.x, self.norm, self.y = self.x[: self.filled], self.norm[: self.filled], self.y[: self.filled]
            self.n = self.filled
        return self

    def unit(self, start: int, end: int, device: torch.device | str | None = None) -> Tensor:
        """Rows ``start:end`` unit-normalised, float32 (B, d) on ``device``."""
        return self.x[start:end].to(device or "cpu", non_blocking=True).float()

    def raw(self, start: int, end: int, device: torch.device | str | None = None) -> Tensor:
        """Rows ``start:end`` as extracted (unit row times its norm), float32 (B, d) on ``device``."""
        return self.unit(start, end, device) * self.norm[start:end].to(device or "cpu")[:, None]

    @property
    def nbytes(self) -> int:
        return self.x.numel() * self.x.element_size() + self.norm.numel() * 4 + self.y.numel() * 8
