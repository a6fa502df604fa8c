"""Shared training: the engine (optimiser step, checkpoints, resume, logging), device and precision
(:mod:`suite.train.device`), the data order and prefetch (:mod:`suite.train.batches`), seeding and every random
generator (:mod:`suite.train.seeding`), checkpoints with RNG state, progress and meters (:mod:`suite.train.meters`),
DDP wrapping."""
from suite.train.checkpoint import (ConfigMismatchError, check_resume_config, config_diff, latest_checkpoint,
                                   load_checkpoint, load_for_resume, rng_state, save_checkpoint, set_rng_state)
from suite.train.batches import epoch_batches, eval_batches
from suite.train.device import autocast, data_workers, optimizer_options, resolve_device, to_device
from suite.train.engine import CachedStep, Engine, NonFiniteLossError, resumable
from suite.distributed import wrap_ddp
from suite.train.meters import LossLogger, Throughput, progress
from suite.train.seeding import (derive_seed, fixed_generator, fixed_numpy_rng, fixed_random_state, forked_rng,
                                 seed_everything, seeded_generator)

__all__ = [
    "ConfigMismatchError", "check_resume_config", "config_diff", "latest_checkpoint", "load_checkpoint",
    "load_for_resume", "rng_state", "save_checkpoint", "set_rng_state",
    "CachedStep", "Engine", "NonFiniteLossError", "autocast", "epoch_batches", "eval_batches",
    "data_workers", "optimizer_options", "resolve_device", "resumable", "to_device",
    "LossLogger", "Throughput", "progress", "wrap_ddp",
    "derive_seed", "fixed_generator", "fixed_numpy_rng", "fixed_random_state", "forked_rng", "seed_everything",
    "seeded_generator",
]
