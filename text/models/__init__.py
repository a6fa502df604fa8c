"""Backbones (any Hugging Face encoder), poolers, the SimCSE MLP head and saving."""
from text.models.backbone import DEFAULT_BACKBONE, default_backbone_path, load_backbone, resolve_backbone, st_pooling_mode
from text.models.encoder import SentenceEncoder, build_encoder
from text.models.pooling import POOLINGS, MLPHead, pool
from text.models.save import load_encoder, save_encoder

__all__ = [
    "DEFAULT_BACKBONE", "default_backbone_path", "load_backbone", "resolve_backbone", "st_pooling_mode",
    "SentenceEncoder", "build_encoder", "POOLINGS", "MLPHead", "pool", "load_encoder", "save_encoder",
]
