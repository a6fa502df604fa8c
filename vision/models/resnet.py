"""CIFAR ResNet-18 (He et al. 2016 as adapted by SimCLR for 32x32 inputs): 3x3 stride-1 stem,
no max-pool, four stages of two BasicBlocks, global average pooling.

``width`` scales the channel counts (64 = the standard network, 11.2M parameters; 16 or 32 give
slim variants for CPU runs). Output features have ``8 * width`` dimensions.

Shapes: (N, 3, H, W) -> (N, 8 * width).
Example: >>> CifarResNet18(width=16)(torch.randn(2, 3, 32, 32)).shape  # (2, 128)
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class CifarResNet18(nn.Module):
    def __init__(self, width: int = 64, in_channels: int = 3) -> None:
        super().__init__()
        w = int(width)
        self.stem = nn.Sequential(nn.Conv2d(in_channels, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True))
        layers: list[nn.Module] = []
        c_in = w
        for i, c in enumerate((w, 2 * w, 4 * w, 8 * w)):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(c_in, c, stride), BasicBlock(c, c, 1)]
            c_in = c
        self.layers = nn.Sequential(*layers)
        self.out_dim = 8 * w

    def forward(self, x: Tensor) -> Tensor:
        h = self.layers(self.stem(x))  # (N, 8w, H/8, W/8)
        return h.mean(dim=(2, 3))  # (N, 8w)
