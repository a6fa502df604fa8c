"""Small ConvNet for CPU runs: three conv stages (width, 2*width, 4*width channels; two 3x3 convs
with BN + ReLU each, 2x2 max-pool between stages), global average pooling.

Shapes: (N, 3, H, W) -> (N, 4 * width).
Example: >>> SmallConvNet(width=32)(torch.randn(2, 3, 32, 32)).shape  # (2, 128)
"""
from __future__ import annotations

from torch import Tensor, nn


def _block(c_in: int, c_out: int) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


class SmallConvNet(nn.Module):
    def __init__(self, width: int = 32, in_channels: int = 3) -> None:
        super().__init__()
        w = int(width)
        self.net = nn.Sequential(
            *_block(in_channels, w), *_block(w, w), nn.MaxPool2d(2),
            *_block(w, 2 * w), *_block(2 * w, 2 * w), nn.MaxPool2d(2),
            *_block(2 * w, 4 * w), *_block(4 * w, 4 * w),
        )
        self.out_dim = 4 * w

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).mean(dim=(2, 3))  # (N, 4w)
