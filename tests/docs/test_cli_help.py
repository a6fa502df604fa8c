"""Help texts are written once: every option of every ``suite`` command states its default at most once.

The generic ``(default: X)`` comes from :func:`suite.config.option_help`; a field whose help states its default in
its own words gets nothing appended. This walks the whole command tree of :func:`suite.cli.build_parser`.
"""
from __future__ import annotations

import argparse
import re

import importlib.util
import os
from pathlib import Path

import pytest

from suite.cli import build_parser, walk_commands
from suite.config import DEFAULT_STATEMENT, option_help

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def root() -> argparse.ArgumentParser:
    os.environ["COLUMNS"] = "110"  # the width the page is written at (suite_docs.cli_rst)
    return build_parser()


def test_the_committed_cli_reference_is_the_parsers_page(root: argparse.ArgumentParser) -> None:
    """docs/reference/cli.rst is committed so that it reads on the forge; it must be the page the parsers give
    (after a new option: `make docs`, or `python -c "..."` as the assertion says)."""
    spec = importlib.util.spec_from_file_location("suite_docs", DOCS / "_ext" / "suite_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    assert (DOCS / "reference" / "cli.rst").read_text(encoding="utf-8") == mod.cli_rst(root), \
        "docs/reference/cli.rst is stale: rebuild it with `make docs` and commit it"


def test_no_help_states_its_default_twice(root: argparse.ArgumentParser) -> None:
    seen, bad = 0, []
    commands = list(walk_commands(root))
    assert {path[1] for path, _ in commands if len(path) > 1} >= {"losses", "results", "bench", "graph", "text", "vision"}
    for path, parser in commands:
        for action in parser._actions:
            text = action.help
            if not text or text == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            seen += 1
            where = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}: {text}"
            if len(DEFAULT_STATEMENT.findall(text)) > 1:
                bad.append("states its default twice: " + where)
            if re.search(r"\(default: (None)?\)", text):
                bad.append("an empty default: " + where)
    assert seen > 200, seen  # the tree was walked, not one parser
    assert not bad, "\n".join(bad)


def test_a_help_that_states_its_default_gets_none_appended() -> None:
    import dataclasses

    @dataclasses.dataclass
    class C:
        a: str | None = dataclasses.field(default=None, metadata={"help": "views (default: the preset's)"})
        b: int = dataclasses.field(default=3, metadata={"help": "epochs"})
        c: str = ""

    fa, fb, fc = dataclasses.fields(C)
    assert option_help(fa, None) == "views (default: the preset's)"
    assert option_help(fb, 3) == "epochs (default: 3)"
    assert option_help(fc, "") == "(default: '')"
