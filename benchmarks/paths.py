"""Where the committed results live: the tables' folder and the registry snapshot they are built from."""
from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SNAPSHOT = RESULTS / "registry.jsonl"
