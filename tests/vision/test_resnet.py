"""The ImageNet ResNets against torchvision's definition (layer names, shapes, parameter counts without the
classifier), the stems, and an encoder export that rebuilds the same network."""
from __future__ import annotations

import pytest
import torch

from vision.models import CifarResNet18, Encoder, build_backbone, build_encoder, resolve_stem
from vision.models.resnet import ResNet


def test_resnet50_is_torchvisions_without_its_classifier():
    """23,508,032 parameters (torchvision's 25,557,032 less fc's 2,049,000); 53 convolutions and 53 BatchNorms under
    torchvision's names, so a state dict of torchvision's weights less fc.* loads"""
    m = ResNet("resnet50")
    assert sum(p.numel() for p in m.parameters()) == 23_508_032
    sd = m.state_dict()
    assert len([k for k in sd if k.endswith("weight") and sd[k].dim() == 4]) == 53
    assert len([k for k in sd if k.endswith("running_mean")]) == 53 and len(sd) == 318
    shapes = {"conv1.weight": (64, 3, 7, 7), "layer1.0.conv1.weight": (64, 64, 1, 1),
              "layer1.0.downsample.0.weight": (256, 64, 1, 1), "layer2.0.conv2.weight": (128, 128, 3, 3),
              "layer3.5.conv3.weight": (1024, 256, 1, 1), "layer4.2.bn3.running_var": (2048,),
              "layer4.0.downsample.1.weight": (2048,)}
    assert {k: tuple(sd[k].shape) for k in shapes} == shapes
    assert not any(k.startswith("fc.") for k in sd)
    assert m(torch.randn(2, 3, 64, 64)).shape == (2, 2048)
    # the stride sits on the 3x3 convolution (torchvision's "v1.5"), the stem takes 224 to 56
    assert m.layer2[0].conv2.stride == (2, 2) and m.layer2[0].conv1.stride == (1, 1)
    x = m.maxpool(m.relu(m.bn1(m.conv1(torch.randn(1, 3, 224, 224)))))
    assert x.shape == (1, 64, 56, 56)


def test_resnet18_imagenet_stem_and_counts():
    assert sum(p.numel() for p in ResNet("resnet18").parameters()) == 11_176_512  # torchvision's 11,689,512 less fc
    cifar = ResNet("resnet50", stem="cifar")
    assert cifar.conv1.kernel_size == (3, 3) and isinstance(cifar.maxpool, torch.nn.Identity)
    with pytest.raises(ValueError, match="stem"):
        ResNet("resnet50", stem="tiny")


def test_stem_auto_by_crop_size_and_exports_rebuild_it(tmp_path):
    """auto: the ImageNet stem from 128-pixel crops (ImageNet's 224), the CIFAR stem below (CIFAR's 32, STL-10's 64:
    ResNet-18 stays the suite's CifarResNet18 there); an export records the stem and rebuilds the same network"""
    assert resolve_stem("resnet50", 224) == "imagenet" and resolve_stem("resnet50", 64) == "cifar"
    assert resolve_stem("convnet", 224) == ""
    assert isinstance(build_backbone("resnet18", 0, 32), CifarResNet18)
    assert isinstance(build_backbone("resnet18", 0, 224), ResNet)
    with pytest.raises(ValueError, match="applies to the ResNets"):
        resolve_stem("alexnet", 32, "imagenet")
    enc = build_encoder("resnet50", 8, 32, 16, stem="imagenet")
    assert enc.spec["stem"] == "imagenet"
    enc.save_pretrained(tmp_path / "e")
    again = Encoder.from_pretrained(tmp_path / "e")
    assert again.backbone.conv1.kernel_size == (7, 7)
    x = torch.randn(2, 3, 32, 32)
    enc.eval()
    torch.testing.assert_close(again.features(x), enc.features(x))
