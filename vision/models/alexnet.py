"""AlexNet-style encoder of Wang & Isola (2020, ``SmallAlexNet``), used for the CACR small-scale
tables: five conv blocks (96, 192, 384, 384, 192 channels; BN + ReLU; max-pool after blocks 1, 2
and 5), then fc6 and fc7 (4096 each, BN + ReLU). The backbone output is fc7 (the features CACR
evaluates); the loss sees it through the projection head.

``width`` scales every channel/unit count (1.0 = the paper's network).

Shapes: (N, 3, H, W) -> (N, round(4096 * width)).
Example: >>> SmallAlexNet(width=0.25, image_size=32)(torch.randn(2, 3, 32, 32)).shape  # (2, 1024)
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


def _conv(c_in: int, c_out: int, pool: bool) -> nn.Sequential:
    mods: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
    if pool:
        mods.append(nn.MaxPool2d(3, 2))
    return nn.Sequential(*mods)


class SmallAlexNet(nn.Module):
    def __init__(self, width: float = 1.0, image_size: int = 32, in_channels: int = 3) -> None:
        super().__init__()
        ch = [max(1, round(c * width)) for c in (96, 192, 384, 384, 192)]
        fc = max(1, round(4096 * width))
        self.features = nn.Sequential(
            _conv(in_channels, ch[0], True), _conv(ch[0], ch[1], True), _conv(ch[1], ch[2], False),
            _conv(ch[2], ch[3], False), _conv(ch[3], ch[4], True), nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.features(torch.zeros(1, in_channels, image_size, image_size)).shape[1]
        self.fc6 = nn.Sequential(nn.Linear(flat, fc, bias=False), nn.BatchNorm1d(fc), nn.ReLU(inplace=True))
        self.fc7 = nn.Sequential(nn.Linear(fc, fc, bias=False), nn.BatchNorm1d(fc), nn.ReLU(inplace=True))
        self.out_dim = fc

    def forward(self, x: Tensor) -> Tensor:
        return self.fc7(self.fc6(self.features(x)))  # (N, fc)
