"""Encoders (backbone + projection head) for the vision front-end.

``build_encoder("resnet18" | "alexnet" | "convnet", width, image_size)`` returns a backbone with
``out_dim``; :class:`Encoder` pairs it with a :class:`ProjectionHead`: ``forward(x) -> z`` for the
loss, ``features(x) -> h`` (backbone output) for evaluation.
"""
from __future__ import annotations

from torch import Tensor, nn

from vision.models.alexnet import SmallAlexNet
from vision.models.convnet import SmallConvNet
from vision.models.head import ProjectionHead
from vision.models.resnet import CifarResNet18

ENCODERS = ("resnet18", "alexnet", "convnet")


def build_backbone(name: str, width: float = 0, image_size: int = 32) -> nn.Module:
    """Backbone by name; ``width`` 0 means the default (resnet18: 64, alexnet: 1.0, convnet: 32)."""
    if name == "resnet18":
        return CifarResNet18(width=int(width or 64))
    if name == "alexnet":
        return SmallAlexNet(width=float(width or 1.0), image_size=image_size)
    if name == "convnet":
        return SmallConvNet(width=int(width or 32))
    raise ValueError(f"unknown encoder {name!r}; choose from {ENCODERS}")


class Encoder(nn.Module):
    """Backbone f and projection head g: z = g(f(x)).

    Shapes: x (N, 3, S, S) -> features (N, out_dim of f), forward (N, proj_dim)."""

    def __init__(self, backbone: nn.Module, proj_dim: int = 128, proj_hidden: int = 0) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = ProjectionHead(int(backbone.out_dim), proj_hidden, proj_dim)

    def features(self, x: Tensor) -> Tensor:
        return self.backbone(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))


def build_encoder(name: str, width: float = 0, image_size: int = 32, proj_dim: int = 128, proj_hidden: int = 0) -> Encoder:
    return Encoder(build_backbone(name, width, image_size), proj_dim, proj_hidden)


__all__ = ["ENCODERS", "CifarResNet18", "Encoder", "ProjectionHead", "SmallAlexNet", "SmallConvNet", "build_backbone",
           "build_encoder"]
