"""Bridges from the loss core to tools researchers already use.

Each submodule imports its tool on import and only then; ``import suite`` never needs them.

- :mod:`suite.integrations.sentence_transformers`: every core loss as a sentence-transformers loss
  (``SuiteLoss(model, "macl")``, ``MACLLoss``, ``CACRLoss``, ``XCLRLoss``, ``TSimCLRLoss``,
  ``CachedSuiteLoss``), usable with ``SentenceTransformerTrainer``.
"""
