"""Measurements a benchmark takes itself and records as registry rows (:mod:`~benchmarks.measurements.measured`),
each with a table rendered from those rows: loss timings and memory (``suite bench losses``), gradient caching
(``suite bench grad-cache``), the run owner's overhead, X-CLR's time per step, and the bad-input probes
(``suite bench reliability``)."""
