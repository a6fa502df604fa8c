"""Shared training-loop pieces: seeding, checkpoints with RNG state, progress, DDP wrapping."""
from suite.train.checkpoint import (ConfigMismatchError, check_resume_config, config_diff, latest_checkpoint,
                                   load_checkpoint, load_for_resume, rng_state, save_checkpoint, set_rng_state)
from suite.train.loop import LossLogger, Throughput, progress, seed_everything, wrap_ddp

__all__ = [
    "ConfigMismatchError", "check_resume_config", "config_diff", "latest_checkpoint", "load_checkpoint",
    "load_for_resume", "rng_state", "save_checkpoint", "set_rng_state",
    "LossLogger", "Throughput", "progress", "seed_everything", "wrap_ddp",
]
