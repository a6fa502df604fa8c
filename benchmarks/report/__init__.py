"""``suite bench report``: every file of ``benchmarks/results`` built from the results registry alone.

- :mod:`benchmarks.report.cells`: each task's headline metric grouped into cells of runs that differ only in seed.
- :mod:`benchmarks.report.figures`: the figures (at most 8 series each, a caption that is also the alt text).
- :mod:`benchmarks.report.page`: ``README.md`` and ``report.html`` (findings first, then one section per
  modality with the tables the suite files declare), ``--check``.
"""
# the names other modules and the tests use, re-exported (documented in their own modules)
from benchmarks.report.cells import Cell, Table, collect, published, row_keys
from benchmarks.report.page import (RESULTS, SECTIONS, SNAPSHOT, TABLES, build, check, declared, differ, excerpt,
                                    md_tables_to_html, register)

