"""What a run can fail with at run time, as opposed to a bad input (torch-free, so that ``suite``'s command line can
catch it without importing torch): one line, exit 1 (:func:`suite.cli.main`)."""
from __future__ import annotations


class RunFault(Exception):
    """A run failed while it ran (the GPU's memory, a GPU that failed): the message names the step or the stage and
    what to do; the last checkpoint is kept."""


__all__ = ["RunFault"]
