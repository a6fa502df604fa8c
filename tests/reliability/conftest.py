"""Fixtures shared with the front-end tests (tiny offline BERT, fake SentEval data root)."""
from tests.text.conftest import data_env, fake_senteval, tiny_model_dir  # noqa: F401
