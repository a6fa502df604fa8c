"""Examples are tests: every ```python block of the READMEs and of the documentation's pages runs here, as written,
in a scratch folder with a tiny data root (``tests/docs/conftest.py``). A block that only makes sense after the one
before it in its file says so by starting with ``# continued``; it then runs in the same namespace."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "graph" / "README.md", ROOT / "vision" / "README.md", ROOT / "text" / "README.md",
         ROOT / "examples" / "benchmark-your-own-loss.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path) -> list[str]:
    return FENCE.findall(path.read_text(encoding="utf-8"))


def _groups() -> list[tuple[str, list[str]]]:
    """(id, blocks run in one namespace) per file and group; a block already run elsewhere (the same text) once."""
    seen: set[str] = set()
    out = []
    for page in PAGES:
        if not page.exists() or "_build" in page.parts:
            continue
        rel = page.relative_to(ROOT).as_posix()
        for i, block in enumerate(python_blocks(page), 1):
            if block in seen:
                continue
            seen.add(block)
            if block.lstrip().startswith("# continued") and out and out[-1][0].startswith(rel):
                out[-1][1].append(block)
            else:
                out.append((f"{rel}#{i}", [block]))
    return out


GROUPS = _groups()


def test_the_readmes_hold_their_examples() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150  # the front page's bound
    ids = [g[0] for g in GROUPS]
    assert sum(i.startswith("README.md#") for i in ids) == 3  # the three journeys
    for page in ("graph/README.md", "vision/README.md"):
        assert any(i.startswith(page) for i in ids), page


@pytest.mark.example
@pytest.mark.parametrize("blocks", [g[1] for g in GROUPS], ids=[g[0] for g in GROUPS])
def test_example_runs_as_written(blocks: list[str], example_env: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__main__"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"<example {k}>", "exec"), namespace)  # noqa: S102 - the documentation's own code
