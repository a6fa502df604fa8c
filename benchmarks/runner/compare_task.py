"""What ``suite bench compare`` plans and its page shows (issue 66): a :class:`Task` (the suite's jobs that differ only
in the loss), a loss's file-name form (:func:`slug`) and the embedding width of the timings (:data:`D`). The runner
(:mod:`benchmarks.runner.compare`) and the report (:mod:`benchmarks.report.compare`) both import it, and neither the
other."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from benchmarks.runner.suitefile import Job

D = 128  # the embedding width of the loss timings (2N x D random embeddings)


@dataclass
class Task:
    """One task of the comparison: the suite's jobs that differ only in the loss (``arms``: label -> jobs)."""
    frontend: str
    command: str
    args: tuple[tuple[str, Any], ...]  # the fixed args (loss or the loss-dependent arg left out)
    by: str  # the arg that carries the loss: "loss", or e.g. "init" for fine-tuning from each loss's encoder
    arms: dict[str, list[Job]] = field(default_factory=dict)
    judged: bool = True  # False: a pretraining whose own metric (its training loss) says nothing across losses

    @property
    def title(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.args if k != "out" and "{" not in str(v))
        return f"{self.frontend} {self.command} ({shown})" if shown else f"{self.frontend} {self.command}"


def slug(loss: str) -> str:
    """A file-name form of a loss name (``examples/x.py:My`` -> ``x.py-My``)."""
    tail = loss.strip().replace("\\", "/").split("/")[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-") or "loss"


__all__ = ["D", "Task", "slug"]
