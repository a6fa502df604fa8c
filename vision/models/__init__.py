"""Encoders (backbone + projection head) for the vision front-end.

``build_encoder("resnet18" | "resnet50" | "alexnet" | "convnet", width, image_size)`` returns a backbone with
``out_dim``; the ResNets take the ImageNet stem (7x7 convolution, max-pool; torchvision's definition) for crops of
:data:`IMAGENET_STEM_FROM` pixels and more and the CIFAR stem (3x3, no max-pool) below (``stem`` "auto").
:class:`Encoder` pairs it with a :class:`ProjectionHead`: ``forward(x) -> z`` for the loss, ``features(x) -> h``
(backbone output) for evaluation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from suite.pretrained import POSITIVE_INT, load_pretrained, load_state, save_pretrained

from vision.models.alexnet import SmallAlexNet
from vision.models.convnet import SmallConvNet
from vision.models.head import HEADS, ProjectionHead
from vision.models.resnet import STEMS, CifarResNet18, ResNet

ENCODERS = ("resnet18", "resnet50", "alexnet", "convnet")
IMAGENET_STEM_FROM = 128  # crop size from which stem "auto" is the ImageNet stem (ImageNet's 224; STL-10's 64 not)


def resolve_stem(name: str, image_size: int, stem: str = "auto") -> str:
    """The ResNet stem ``stem`` "auto" means for ``image_size`` (the other encoders have none: "")."""
    if not name.startswith("resnet"):
        if stem not in ("auto", ""):
            raise ValueError(f"stem {stem!r} applies to the ResNets, not to encoder {name!r}")
        return ""
    if stem in ("auto", ""):
        return "imagenet" if image_size >= IMAGENET_STEM_FROM else "cifar"
    if stem not in STEMS:
        raise ValueError(f"stem must be auto or one of {STEMS}, got {stem!r}")
    return stem
MODEL_TYPE = "vision_encoder"


def build_backbone(name: str, width: float = 0, image_size: int = 32, stem: str = "auto") -> nn.Module:
    """Backbone by name; ``width`` 0 means the default (resnets: 64, alexnet: 1.0, convnet: 32). ResNet-18 with the
    CIFAR stem is :class:`CifarResNet18` (the suite's layer names since its first version); the others are
    torchvision's layer for layer (:class:`vision.models.resnet.ResNet`)."""
    stem = resolve_stem(name, image_size, stem)
    if name == "resnet18" and stem == "cifar":
        return CifarResNet18(width=int(width or 64))
    if name in ("resnet18", "resnet50"):
        return ResNet(name, width=int(width or 64), stem=stem)
    if name == "alexnet":
        return SmallAlexNet(width=float(width or 1.0), image_size=image_size)
    if name == "convnet":
        return SmallConvNet(width=int(width or 32))
    raise ValueError(f"unknown encoder {name!r}; choose from {ENCODERS}")


class Encoder(nn.Module):
    """Backbone f and projection head g: z = g(f(x)).

    Shapes: x (N, 3, S, S) -> features (N, out_dim of f), forward (N, proj_dim)."""

    def __init__(self, backbone: nn.Module, proj_dim: int = 128, proj_hidden: int = 0, proj_head: str = "simclr") -> None:
        super().__init__()
        self.backbone = backbone
        self.head = ProjectionHead(int(backbone.out_dim), proj_hidden, proj_dim, proj_head)

    def features(self, x: Tensor) -> Tensor:
        return self.backbone(x.contiguous(memory_format=self.memory_format))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    memory_format = torch.contiguous_format  # torch.channels_last on a GPU: :meth:`channels_last`

    def channels_last(self) -> "Encoder":
        """Convolutions in NHWC (``channels_last``): weights and inputs, the layout cuDNN's fastest kernels take on a
        GPU (issue 47: 1.9x for a CIFAR ResNet-18 in bf16 on an H100). The values are the same; checkpoints and
        exports hold the same tensors."""
        self.memory_format = torch.channels_last
        return self.to(memory_format=torch.channels_last)  # type: ignore[call-arg]

    spec: dict[str, Any] | None = None  # what rebuilds it (set by :func:`build_encoder`)

    def save_pretrained(self, path: str | Path) -> Path:
        """``path/model.safetensors`` + ``path/config.json`` (encoder name, width, image size, projection); see
        :meth:`from_pretrained`. Only an encoder made by :func:`build_encoder` knows what rebuilds it."""
        if self.spec is None:
            raise ValueError("save_pretrained needs an Encoder made by build_encoder (its spec rebuilds it)")
        return save_pretrained(self, path, MODEL_TYPE, self.spec)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> "Encoder":
        """The encoder saved by :meth:`save_pretrained` (eval mode): ``features(x)`` for evaluation, ``forward(x)``
        for the projection. A folder that is not one is a ``ValueError`` naming the path and what is wrong."""
        cfg, state = load_pretrained(path, MODEL_TYPE, {"encoder": ("one of " + ", ".join(ENCODERS),
                                                                    lambda v: v in ENCODERS),
                                                        "proj_dim": POSITIVE_INT, "image_size": POSITIVE_INT})
        enc = build_encoder(cfg["encoder"], float(cfg.get("width", 0)), cfg["image_size"], cfg["proj_dim"],
                            int(cfg.get("proj_hidden", 0)), _export_value(cfg, "stem"), _export_value(cfg, "proj_head"))
        load_state(enc, state, path)
        return enc.eval()


def init_folder(path: str | Path) -> Path:
    """The encoder export that ``--init path`` names: a run folder's ``export/`` or an export folder itself; a
    ``ValueError`` naming the path when it is neither (checked before any data is read)."""
    from suite.pretrained import CONFIG, WEIGHTS

    p = Path(path)
    for cand in (p / "export", p):
        if (cand / WEIGHTS).is_file() and (cand / CONFIG).is_file():
            return cand
    raise ValueError(f"--init {path}: neither a finished run folder (with export/{WEIGHTS}) nor an encoder export "
                     f"({WEIGHTS} + {CONFIG})")


def load_init(encoder: Encoder, path: str | Path) -> Encoder:
    """Load the weights of the export ``--init path`` names (:func:`init_folder`) into ``encoder``, through the safe
    loaders (safetensors, JSON config). The export's encoder settings (name, width, image size, projection) must be
    ``encoder``'s: a difference is a ``ValueError`` naming the setting and both values."""
    folder = init_folder(path)
    cfg, state = load_pretrained(folder, MODEL_TYPE)
    spec = encoder.spec or {}
    if spec:  # the head's kind is checked even where this run's spec leaves it out (the first head, "simclr")
        spec = {**spec, "proj_head": spec.get("proj_head", "simclr")}
    for k, v in spec.items():
        have = _export_value(cfg, k)
        if have is None or (float(have) if isinstance(v, float) else have) != v:
            raise ValueError(f"--init {path}: the export's {k} is {have!r}, this run's is {v!r}; the encoder settings "
                             f"must match to start from it")
    load_state(encoder, state, folder)
    return encoder


def build_encoder(name: str, width: float = 0, image_size: int = 32, proj_dim: int = 128, proj_hidden: int = 0,
                  stem: str = "auto", proj_head: str = "simclr") -> Encoder:
    """Backbone and projection head; ``proj_head`` "simclr" (Linear-BN-ReLU-Linear) or "mocov2" (Linear-ReLU-Linear,
    :mod:`vision.models.head`)."""
    stem = resolve_stem(name, image_size, stem)
    enc = Encoder(build_backbone(name, width, image_size, stem), proj_dim, proj_hidden, proj_head)
    enc.spec = {"encoder": name, "width": float(width), "image_size": int(image_size), "proj_dim": int(proj_dim),
                "proj_hidden": int(proj_hidden)}
    if stem:  # the ResNets' (an export before the stems has none: "auto")
        enc.spec["stem"] = stem
    if proj_head != "simclr":  # exports of the first head have none ("simclr")
        enc.spec["proj_head"] = proj_head
    return enc


def _export_value(cfg: dict[str, Any], key: str) -> Any:
    """A setting of an export's config; exports before the ResNet stems have none: "auto" for their image size."""
    if key == "stem" and key not in cfg:
        return resolve_stem(str(cfg.get("encoder", "")), int(cfg.get("image_size", 0)))
    if key == "proj_head" and key not in cfg:
        return "simclr"
    return cfg.get(key, 0 if key == "proj_hidden" else None)


__all__ = ["ENCODERS", "HEADS", "MODEL_TYPE", "CifarResNet18", "ResNet", "resolve_stem", "Encoder", "ProjectionHead", "SmallAlexNet", "SmallConvNet", "build_backbone",
           "build_encoder", "init_folder", "load_init"]
