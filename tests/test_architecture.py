"""The house's shape, read from the source with ``ast`` (nothing is imported): no circle of files, arrows only
downward between the floors, no module over 600 lines unless it holds one named concern. An import inside a
function counts like one at the top: a lazy import hides a circle from Python, not from a reader."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("suite", "vision", "graph", "text", "benchmarks")
MAX_LINES = 600
# modules past MAX_LINES that hold one concern, and the concern (a module that grows a second one is split)
ONE_CONCERN = {
    "suite/losses/fused.py": "the fused Triton kernels of the InfoNCE family and their autograd functions",
    "suite/losses/tiling.py": "the tiled (row-block) exact losses and their hand-written backward",
}
# (importer prefix, imported prefix): arrows that point up a floor
UPWARD = [("suite", p) for p in PACKAGES if p != "suite"] + \
    [(f, "benchmarks") for f in ("vision", "graph", "text")] + \
    [(a, b) for a in ("vision", "graph", "text") for b in ("vision", "graph", "text") if a != b] + \
    [("benchmarks.measurements", "benchmarks.tables"), ("benchmarks.measurements", "benchmarks.report"),
     ("benchmarks.tables", "benchmarks.report"), ("benchmarks.stats", "benchmarks.tables")]


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of this project's modules (``from pkg import mod`` names the module ``pkg.mod``)."""
    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            out |= {t for t in map(owner, targets) if t and t != name}
        graph[name] = out
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_no_circle_of_files():
    assert circles(imports(modules())) == []


def test_the_circle_finder_finds_circles():
    """The checker itself: a two-file circle, a three-file circle and a chain."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(circles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_arrows_point_down():
    graph = imports(modules())
    up = [f"{a} -> {b}" for a, targets in graph.items() for b in sorted(targets)
          for low, high in UPWARD if _under(a, low) and _under(b, high)]
    assert up == []


def test_no_module_past_600_lines_mixes_concerns():
    long = {str(p.relative_to(ROOT)): n for p in modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert set(long) <= set(ONE_CONCERN), {k: v for k, v in long.items() if k not in ONE_CONCERN}
    assert all((ROOT / path).exists() for path in ONE_CONCERN)  # a stale entry is removed
