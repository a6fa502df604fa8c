"""text front-end (see README)."""
