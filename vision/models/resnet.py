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


# ----------------------------------------------------------------------------- torchvision's ImageNet ResNets

STEMS = ("imagenet", "cifar")


def _conv_init(module: nn.Module) -> None:
    """torchvision's initialisation: convolutions Kaiming-normal (fan_out, ReLU), BatchNorm weight 1 and bias 0."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class TVBasicBlock(nn.Module):
    """torchvision's ``BasicBlock`` (ResNet-18/34), the same layer names: conv1 (3x3, stride), bn1, conv2, bn2,
    downsample (1x1 conv + BN where the shape changes)."""

    expansion = 1

    def __init__(self, c_in: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != planes:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class TVBottleneck(nn.Module):
    """torchvision's ``Bottleneck`` (ResNet-50, "v1.5": the stride on the 3x3 convolution), the same layer names:
    conv1 (1x1), bn1, conv2 (3x3, stride), bn2, conv3 (1x1, 4x the planes), bn3, downsample."""

    expansion = 4

    def __init__(self, c_in: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(c_in, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    """torchvision's ``ResNet`` without its classifier (``fc``), layer for layer and name for name, so its state dict
    takes torchvision's weights (less ``fc.*``): ``ResNet("resnet50")`` has 23,508,032 parameters, ``resnet18``
    11,176,512.

    ``stem="imagenet"``: 7x7 stride-2 convolution and a 3x3 stride-2 max-pool (ImageNet-sized images);
    ``"cifar"``: a 3x3 stride-1 convolution and no max-pool (SimCLR's CIFAR variant, for small images). ``width``
    scales the channels (64 = the standard network). Shapes: (N, 3, H, W) -> (N, 8 * width * expansion)."""

    ARCH = {"resnet18": (TVBasicBlock, (2, 2, 2, 2)), "resnet50": (TVBottleneck, (3, 4, 6, 3))}

    def __init__(self, arch: str = "resnet50", width: int = 64, stem: str = "imagenet") -> None:
        super().__init__()
        if arch not in self.ARCH:
            raise ValueError(f"unknown ResNet {arch!r}; choose from {sorted(self.ARCH)}")
        if stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {stem!r}")
        block, depths = self.ARCH[arch]
        w = int(width)
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
            self.maxpool: nn.Module = nn.MaxPool2d(3, 2, 1)
        else:
            self.conv1 = nn.Conv2d(3, w, 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        c_in = w
        for i, depth in enumerate(depths):
            planes = w * 2 ** i
            blocks = []
            for j in range(depth):
                blocks.append(block(c_in, planes, 2 if (i > 0 and j == 0) else 1))
                c_in = planes * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.out_dim = c_in
        _conv_init(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)
