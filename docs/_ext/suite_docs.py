"""Sphinx extension of this site: the references that cannot drift.

* ``reference/cli.rst`` is written from :func:`suite.cli.build_parser` at every build: one section per command of the
  whole tree with its ``--help`` text, so a new option or help text shows up without an edit here. It is committed
  (readable on the forge) and a test checks it against the parsers.
* ``reference/api/<package>.rst`` is written from the packages' modules (``pkgutil``): one ``automodule`` per public
  module with every member. After reading, every public class and function defined in those modules must have an
  entry; a missing one is a warning, hence an error under ``-W``.
* A docstring written as prose rather than reStructuredText (the code base's Markdown-style backticks, ``Shapes:``
  lines) is shown as a literal block instead of being mis-parsed: the warnings then only say what is wrong with the
  site, not with a docstring's typography.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import io
import os
import pkgutil
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.core import publish_doctree
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "vision", "graph", "text", "benchmarks")
SKIP = {"__main__"}


# ----------------------------------------------------------------------------- CLI reference

def cli_rst(root: argparse.ArgumentParser | None = None) -> str:
    """The page, from ``root`` (default: a new :func:`suite.cli.build_parser`). It is committed, so that it reads on
    the forge; ``tests/docs/test_cli_help.py`` fails when the committed page is not this text."""
    from suite.cli import build_parser, walk_commands

    os.environ["COLUMNS"] = "110"  # argparse wraps at $COLUMNS: a fixed width, the same page on every machine
    out = [".. This page is written by docs/_ext/suite_docs.py from suite.cli.build_parser(); do not edit.", "",
           "CLI reference", "=============", "",
           "Every command of ``suite``, with the help text its parser prints (``suite <command> --help``). The page is",
           "generated from the parsers at every build and committed; a test fails when it has drifted from them.", ""]
    for path, parser in walk_commands(root or build_parser()):
        title = " ".join(path)
        out += [title, "-" * len(title), "", ".. code-block:: text", ""]
        out += ["   " + line if line.strip() else "" for line in parser.format_help().rstrip().splitlines()]
        out += [""]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- API reference

def public_modules(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]) or parts[-1] in SKIP:
            continue
        names.append(info.name)
    return sorted(names)


def public_names(module: str) -> list[str]:
    """Classes and functions defined in ``module`` (not imported into it) whose names do not start with ``_`` (those of
    its ``__all__`` where it has one)."""
    mod = importlib.import_module(module)
    listed = getattr(mod, "__all__", None)  # a module's __all__ is its public interface (autodoc reads it too)
    out = []
    for name, obj in vars(mod).items():
        if name.startswith("_") or (listed is not None and name not in listed):
            continue
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if getattr(obj, "__module__", None) == module:
            out.append(name)
    return sorted(out)


def api_rst(package: str) -> str:
    title = f"``{package}``"
    out = [f".. Written by docs/_ext/suite_docs.py from the modules of {package}; do not edit.", "",
           title, "=" * len(title), ""]
    for module in public_modules(package):
        head = f"``{module}``"
        out += [head, "-" * len(head), "", f".. automodule:: {module}", "   :members:", "   :undoc-members:",
                "   :show-inheritance:", ""]
    return "\n".join(out) + "\n"


def _write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app: Sphinx) -> None:
    ref = Path(app.srcdir) / "reference"
    _write_if_changed(ref / "cli.rst", cli_rst())
    for package in PACKAGES:
        _write_if_changed(ref / "api" / f"{package}.rst", api_rst(package))


def check_complete(app: Sphinx, env: Any) -> None:
    """Every public class and function of every documented module has an entry in the API reference."""
    documented = set(env.get_domain("py").objects)
    for package in PACKAGES:
        for module in public_modules(package):
            for name in public_names(module):
                if f"{module}.{name}" not in documented:
                    logger.warning(f"API reference: {module}.{name} has no entry")


# ----------------------------------------------------------------------------- links between repository files

# The repository's Markdown files that are pages of this site (included whole or in part), by the page that holds
# them; a link to one of them becomes a link to that page. README.md's journeys are each a tutorial.
INCLUDED = {"README.md": "index", "graph/README.md": "frontends/graph", "text/README.md": "frontends/text",
            "vision/README.md": "frontends/vision",
            "examples/benchmark-your-own-loss.md": "tutorials/benchmark-your-own-loss"}
README_ANCHORS = {"use-a-loss-of-the-core-in-your-own-training-loop": "tutorials/own-loop",
                  "train-sentence-embeddings-with-macl-in-sentence-transformers": "tutorials/sentence-transformers",
                  "pretrain-a-gnn-with-macl-in-your-own-pytorch-geometric-loop-fine-tune-it-on-moleculenet":
                      "tutorials/pyg-molecules",
                  "on-a-gpu": "gpu"}


class RepositoryLinks(SphinxTransform):
    """A Markdown link between repository files, written for reading on the repository (``graph/README.md`` links
    ``../benchmarks/results/graph_tu.md``), resolved for the site: relative to the file that holds it (an included
    README, not the page that includes it); to the page that includes the target where there is one; otherwise to
    the file itself, copied into the site as a download. A link to a file that does not exist is left alone, and
    MyST warns about it (an error under ``-W``)."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst":
                continue
            if node.get("refdomain") == "doc":
                if node["reftarget"] in self.env.found_docs:
                    continue
                target = Path(node["reftarget"])
                target = target if target.is_absolute() else Path(self.env.srcdir) / target
                candidates = [target.with_name(target.name + ".md"), target]
                anchor = node.get("reftargetid")
            else:
                raw, _, anchor = node["reftarget"].partition("#")
                source = node.source or self.env.doc2path(self.env.docname)
                candidates = [Path(os.path.normpath(Path(source).parent / raw))]
            file = next((c for c in candidates if c.is_file() or c.is_dir()), None)
            if file is None:
                continue
            try:
                rel = file.resolve().relative_to(ROOT).as_posix()
            except ValueError:
                continue
            docname = INCLUDED.get(rel)
            if rel == "README.md" and anchor in README_ANCHORS:
                docname, anchor = README_ANCHORS[anchor], None
            if docname is None and rel.startswith("docs/") and rel.endswith(".md"):
                docname = rel[len("docs/"):-len(".md")]
            here = Path(self.env.doc2path(self.env.docname)).parent
            if docname is not None:
                new = addnodes.pending_xref("", *node.children, refdomain="doc", reftarget=docname,
                                            reftargetid=anchor or None, refdoc=self.env.docname, reftype="myst",
                                            refexplicit=node.get("refexplicit", True))
            elif file.is_dir():
                new = nodes.reference("", "", *node.children, refuri=os.path.relpath(file, here) + "/")
            else:
                new = addnodes.download_reference("", *node.children, refdomain=None,
                                                  reftarget=os.path.relpath(file, here), refdoc=self.env.docname,
                                                  reftype="myst", refexplicit=True)
            new.source, new.line = node.source, node.line
            node.replace_self(new)


# ----------------------------------------------------------------------------- docstrings

_ROLE = re.compile(r":[\w:+-]+:`")


def _clean_rst(text: str) -> bool:
    """Whether plain docutils parses ``text`` without a warning (Sphinx roles read as literals)."""
    stream = io.StringIO()
    try:  # a directive of Sphinx's own (it needs the build environment) counts as not plain reStructuredText
        doc = publish_doctree(_ROLE.sub("`", text), settings_overrides={
            "report_level": 2, "halt_level": 5, "warning_stream": stream, "file_insertion_enabled": False,
            "raw_enabled": False})
    except Exception:
        return False
    return not stream.getvalue() and not any(m["level"] >= 2 for m in doc.findall(nodes.system_message))


def docstring_as_text(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if lines and not _clean_rst("\n".join(lines)):
        lines[:] = ["::", ""] + ["   " + line if line.strip() else "" for line in lines] + [""]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_transform(RepositoryLinks)
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-docstring", docstring_as_text, priority=900)  # after napoleon (500)
    app.connect("env-check-consistency", check_complete)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
