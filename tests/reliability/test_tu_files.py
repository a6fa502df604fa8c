"""Malformed TU raw folders fail with the file and the line, never train on part of the data."""
from __future__ import annotations

from pathlib import Path

import pytest

from graph.tu.data import TUFormatError, load_tu
from tests.graph.synthetic import write_synthetic_tu

NAME = "SYN"


def _raw(tmp_path: Path, n_graphs: int = 6) -> Path:
    write_synthetic_tu(tmp_path, NAME, n_graphs=n_graphs)
    return tmp_path / NAME / "raw"


def _lines(raw: Path, kind: str) -> list[str]:
    return (raw / f"{NAME}_{kind}.txt").read_text().splitlines()


def _write(raw: Path, kind: str, lines: list[str], end: str = "\n") -> None:
    (raw / f"{NAME}_{kind}.txt").write_text("\n".join(lines) + end)


def test_valid_folder_loads(tmp_path: Path) -> None:
    """a well-formed synthetic TU folder -> loads every graph (the probes below start from it)"""
    _raw(tmp_path)
    assert len(load_tu(NAME, tmp_path)) == 6


def test_a_truncated_mid_line(tmp_path: Path) -> None:
    """_A.txt cut in the middle of a line ("7,") -> TUFormatError naming _A.txt and the last line"""
    raw = _raw(tmp_path)
    a = _lines(raw, "A")
    n = len(a) // 2
    _write(raw, "A", a[:n] + [a[n].split(",")[0] + ","], end="")
    with pytest.raises(TUFormatError, match=rf"{NAME}_A\.txt: line {n + 1}:"):
        load_tu(NAME, tmp_path)


def test_a_truncated_at_line_boundary(tmp_path: Path) -> None:
    """_A.txt cut at a line boundary (last graphs lose every edge, no edge-label file) -> error: graphs built != labels"""
    raw = _raw(tmp_path)
    gi = [int(v) for v in _lines(raw, "graph_indicator")]
    first_of_5 = gi.index(5) + 1  # 1-based node id of graph 5's first node
    a = [ln for ln in _lines(raw, "A") if int(ln.split(",")[0]) < first_of_5]
    _write(raw, "A", a)
    with pytest.raises(ValueError, match=r"built 4 graphs .* 6 labels"):
        load_tu(NAME, tmp_path)


def test_indicator_unsorted(tmp_path: Path) -> None:
    """graph_indicator with a node of graph 1 after graph 2's nodes -> TUFormatError naming the file and line"""
    raw = _raw(tmp_path)
    gi = _lines(raw, "graph_indicator")
    k = gi.index("3") - 1  # the last node of graph 2
    gi[k] = "1"
    _write(raw, "graph_indicator", gi)
    with pytest.raises(TUFormatError, match=rf"graph_indicator\.txt: line {k + 1}: graph id 1 after 2: .*sorted"):
        load_tu(NAME, tmp_path)


def test_indicator_gap(tmp_path: Path) -> None:
    """graph_indicator skipping id 3 (ids 1 2 4 5 6 7, labels for 7 graphs) -> TUFormatError naming the line of the gap"""
    raw = _raw(tmp_path)
    gi = [int(v) for v in _lines(raw, "graph_indicator")]
    k = gi.index(3)
    _write(raw, "graph_indicator", [str(v + 1 if v >= 3 else v) for v in gi])
    _write(raw, "graph_labels", _lines(raw, "graph_labels") + ["0"])
    with pytest.raises(TUFormatError, match=rf"graph_indicator\.txt: line {k + 1}: graph id 4 after 2: .*contiguous"):
        load_tu(NAME, tmp_path)


def test_edge_between_two_graphs(tmp_path: Path) -> None:
    """an _A.txt line joining a node of graph 1 to one of graph 2 -> TUFormatError naming the line and both graphs"""
    raw = _raw(tmp_path)
    gi = [int(v) for v in _lines(raw, "graph_indicator")]
    a = _lines(raw, "A")
    a[2] = f"1, {gi.index(2) + 1}"
    _write(raw, "A", a)
    with pytest.raises(TUFormatError, match=r"_A\.txt: line 3: edge 1, \d+ joins graph 1 and graph 2"):
        load_tu(NAME, tmp_path)


def test_edge_node_out_of_range(tmp_path: Path) -> None:
    """an _A.txt line naming node 10**6 -> TUFormatError naming the line and the valid range"""
    raw = _raw(tmp_path)
    a = _lines(raw, "A")
    a[-1] = "1, 1000000"
    _write(raw, "A", a)
    with pytest.raises(TUFormatError, match=rf"_A\.txt: line {len(a)}: node id out of range"):
        load_tu(NAME, tmp_path)


def test_labels_fewer_than_graphs(tmp_path: Path) -> None:
    """graph_labels one line short -> ValueError naming graph_labels.txt and both counts"""
    raw = _raw(tmp_path)
    _write(raw, "graph_labels", _lines(raw, "graph_labels")[:-1])
    with pytest.raises(ValueError, match=r"graph_labels\.txt has 5 .* 6 graphs"):
        load_tu(NAME, tmp_path)


def test_non_integer_indicator_line(tmp_path: Path) -> None:
    """graph_indicator line "x" -> TUFormatError naming the file and the line"""
    raw = _raw(tmp_path)
    gi = _lines(raw, "graph_indicator")
    gi[4] = "x"
    _write(raw, "graph_indicator", gi)
    with pytest.raises(TUFormatError, match=r"graph_indicator\.txt: line 5:"):
        load_tu(NAME, tmp_path)
