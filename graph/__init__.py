"""graph front-end (see README)."""
