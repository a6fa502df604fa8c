"""Contrastive representation learning suite: shared loss core, results registry, CLI.

Front-ends (``vision``, ``graph``, ``text``) depend on this package; it never imports them.
"""
__version__ = "0.1.0"
