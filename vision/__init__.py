"""vision front-end (see README)."""
