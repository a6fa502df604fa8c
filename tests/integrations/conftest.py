"""Fixtures for the integration tests: the tiny offline BERT of the text tests, as a SentenceTransformer."""
from __future__ import annotations

from tests.text.conftest import WORDS, _one_thread, tiny_model_dir  # noqa: F401  (fixtures re-used)
