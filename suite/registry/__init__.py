"""The common results registry of every front-end (see :mod:`suite.registry.store` for what a run records).

One package, a file per concern:

- :mod:`~suite.registry.schema`: the tables, the check of a run row, config hash / code version / package versions;
- :mod:`~suite.registry.store`: :class:`Registry` (opening, writing runs and metrics, reading them back), :class:`Run`;
- :mod:`~suite.registry.queries`: a finished run by hash, final metrics, comparisons, Markdown tables;
- :mod:`~suite.registry.jobs`: the benchmark runner's jobs and the reaping of dead runs;
- :mod:`~suite.registry.snapshot`: export, checked import and merging of JSONL snapshots.
"""
from suite.registry.queries import CURVE_SPLIT, markdown_table, step_curve
from suite.registry.schema import (STATUSES, RegistryError, check_run_row, code_version, config_hash, jobs_t, metrics_t,
                                   package_versions, runs_t)
from suite.registry.snapshot import check_snapshot, merge_into_snapshot
from suite.registry.store import Registry, Run, default_registry, open_registry

__all__ = ["CURVE_SPLIT", "Registry", "RegistryError", "Run", "STATUSES", "check_run_row", "check_snapshot",
           "code_version", "config_hash", "default_registry", "jobs_t", "markdown_table", "merge_into_snapshot",
           "metrics_t", "open_registry", "package_versions", "runs_t", "step_curve"]
