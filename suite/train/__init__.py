"""Shared training: the engine (device, precision, optimiser step, checkpoints, resume, logging),
seeding, checkpoints with RNG state, progress, DDP wrapping."""
from suite.train.checkpoint import (ConfigMismatchError, check_resume_config, config_diff, latest_checkpoint,
                                   load_checkpoint, load_for_resume, rng_state, save_checkpoint, set_rng_state)
from suite.train.engine import (CachedStep, Engine, NonFiniteLossError, autocast, epoch_batches, eval_batches,
                                resolve_device, resumable)
from suite.train.loop import LossLogger, Throughput, derive_seed, progress, seed_everything, seeded_generator, wrap_ddp

__all__ = [
    "ConfigMismatchError", "check_resume_config", "config_diff", "latest_checkpoint", "load_checkpoint",
    "load_for_resume", "rng_state", "save_checkpoint", "set_rng_state",
    "CachedStep", "Engine", "NonFiniteLossError", "autocast", "epoch_batches", "eval_batches",
    "resolve_device", "resumable",
    "LossLogger", "Throughput", "derive_seed", "progress", "seed_everything", "seeded_generator", "wrap_ddp",
]
