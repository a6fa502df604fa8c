"""TU graph-classification datasets (Morris et al. 2020) through ``torch_geometric.datasets.TUDataset``.

The raw files live read-only under ``$SUITE_DATA/TU/<NAME>/raw`` (TU raw layout); PyG's processed
cache is written under ``suite.paths.cache_dir("TU")`` (a ``raw`` link to the data root), never
inside the data root. Before PyG touches a local copy the raw folder is checked: a missing or
inconsistent file raises ``ValueError`` naming it, and nothing is downloaded over it. Before PyG
parses the raw files (no processed cache yet) their structure is validated (:func:`validate_tu_raw`:
sorted, gap-free graph ids, every edge inside one graph, one label per graph; errors name the file
and line), and after loading the number of graphs must equal the number of labels. Only a
dataset absent from the data root is downloaded by PyG (into the cache), and only with
``download=True``.

Node features (GraphCL's TU setting): the one-hot node labels where the dataset has them
(continuous node attributes, e.g. PROTEINS', are not used); a constant 1 where it has none
(IMDB-BINARY, REDDIT-BINARY).

Example:
    >>> ds = load_tu("MUTAG")
    >>> ds.graphs[0].x.shape, ds.num_features, ds.num_classes   # (17, 7), 7, 2
"""
from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from suite.paths import cache_dir, data_path, file_lock, missing_root_note

REQUIRED = ("A", "graph_indicator", "graph_labels")
NODE_LEVEL = ("node_labels", "node_attributes")
EDGE_LEVEL = ("edge_labels", "edge_attributes")


@dataclass
class TUData:
    """A loaded TU dataset: graphs with ``x`` (n, F) float and ``y`` (1,) long in 0..C-1."""

    name: str
    graphs: list[Data]
    num_features: int
    num_classes: int
    source: str  # folder the raw files were read from

    @property
    def labels(self) -> Tensor:
        return torch.cat([g.y.view(-1) for g in self.graphs])  # (G,)

    def __len__(self) -> int:
        return len(self.graphs)


def _count_lines(path: Path) -> int:
    n = 0
    last = b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (1 if last != b"\n" else 0)  # a last line without newline counts


def _last_int(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 256))
        tail = f.read().split()
    if not tail:
        raise ValueError(f"TU file {path} is empty")
    return int(tail[-1].split(b",")[-1])


def check_tu_raw(raw_dir: Path, name: str) -> dict[str, int]:
    """Check the raw TU files of ``name`` in ``raw_dir``; return their line counts.

    Raises ``ValueError`` naming the missing file or the inconsistency (node-level files whose
    line count differs from ``graph_indicator``, graph labels not one per graph, edge-level files
    not one per line of ``A``, empty files)."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise ValueError(f"TU dataset {name!r}: raw folder {raw_dir} not found")
    counts: dict[str, int] = {}
    for kind in REQUIRED:
        p = raw_dir / f"{name}_{kind}.txt"
        if not p.is_file():
            raise ValueError(f"TU dataset {name!r} is incomplete: missing {p}")
        counts[kind] = _count_lines(p)
        if counts[kind] == 0:
            raise ValueError(f"TU dataset {name!r}: {p} is empty")
    n_nodes = counts["graph_indicator"]
    n_graphs = _last_int(raw_dir / f"{name}_graph_indicator.txt")  # graph ids are sorted 1..G
    if counts["graph_labels"] != n_graphs:
        raise ValueError(f"TU dataset {name!r}: {name}_graph_labels.txt has {counts['graph_labels']} lines but "
                         f"{name}_graph_indicator.txt names {n_graphs} graphs")
    for kind in NODE_LEVEL:
        p = raw_dir / f"{name}_{kind}.txt"
        if p.is_file():
            counts[kind] = _count_lines(p)
            if counts[kind] != n_nodes:
                raise ValueError(f"TU dataset {name!r}: {p.name} has {counts[kind]} lines but "
                                 f"{name}_graph_indicator.txt has {n_nodes} nodes")
    for kind in EDGE_LEVEL:
        p = raw_dir / f"{name}_{kind}.txt"
        if p.is_file():
            counts[kind] = _count_lines(p)
            if counts[kind] != counts["A"]:
                raise ValueError(f"TU dataset {name!r}: {p.name} has {counts[kind]} lines but {name}_A.txt has "
                                 f"{counts['A']} edges")
    return counts


class TUFormatError(ValueError):
    """A raw TU file that is malformed or inconsistent (the message names the file and line)."""


def _line_of(path: Path, row: int) -> int:
    """1-based line number of the ``row``-th (0-based) non-blank line of ``path`` (error path only)."""
    seen = -1
    with open(path, "rb") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    return i
    return i + 1 if seen >= 0 else 1


def _first_bad_line(path: Path, columns: int) -> tuple[int, str] | None:
    """(line number, text) of the first non-blank line that is not ``columns`` integers (error path only)."""
    with open(path, "rb") as f:
        for i, raw in enumerate(f, start=1):
            text = raw.decode("utf-8", "replace").strip()
            if not text:
                continue
            parts = [p.strip() for p in text.split(",")] if columns > 1 else text.split()
            if len(parts) != columns or not all(p.lstrip("-").isdigit() for p in parts):
                return i, text
    return None


def _read_ints(path: Path, name: str, columns: int) -> np.ndarray:
    """Integers of a TU text file, (rows,) or (rows, columns); a malformed line raises naming file and line."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "empty input file": handled below
            a = np.loadtxt(path, delimiter="," if columns > 1 else None, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        bad = _first_bad_line(path, columns)
        if bad is None:
            raise TUFormatError(f"TU dataset {name!r}: {path} is unreadable: {exc}") from exc
        raise TUFormatError(f"TU dataset {name!r}: {path}: line {bad[0]}: {bad[1][:60]!r} is not {columns} "
                            f"integer(s){' separated by commas' if columns > 1 else ''}") from exc
    if a.size == 0:
        raise TUFormatError(f"TU dataset {name!r}: {path} is empty")
    if a.shape[1] != columns:
        raise TUFormatError(f"TU dataset {name!r}: {path}: line {_line_of(path, 0)}: {a.shape[1]} values per line, "
                            f"expected {columns}")
    return a if columns > 1 else a[:, 0]


def validate_tu_raw(raw_dir: Path, name: str) -> int:
    """Parse and check the structure of a TU dataset's raw files; returns the number of graphs.

    ``graph_indicator``: graph ids start at 1, are sorted and have no gaps (every graph has a node);
    ``A``: two node ids per line, each in 1..nodes, both ends in the same graph; ``graph_labels``:
    one integer per graph. Each failure raises :class:`TUFormatError` (a ``ValueError``) naming the file and the line."""
    raw_dir = Path(raw_dir)
    ind_path = raw_dir / f"{name}_graph_indicator.txt"
    gi = _read_ints(ind_path, name, 1)  # (N,) graph id of each node
    if gi[0] != 1:
        raise TUFormatError(f"TU dataset {name!r}: {ind_path}: line {_line_of(ind_path, 0)}: first graph id is {gi[0]}, "
                         f"expected 1")
    step = np.diff(gi)
    bad = np.flatnonzero((step < 0) | (step > 1))
    if bad.size:
        r = int(bad[0]) + 1
        what = "ids must be sorted" if step[r - 1] < 0 else f"ids must be contiguous (no node of graph {gi[r - 1] + 1})"
        raise TUFormatError(f"TU dataset {name!r}: {ind_path}: line {_line_of(ind_path, r)}: graph id {gi[r]} after "
                         f"{gi[r - 1]}: {what}")
    n_nodes, n_graphs = int(gi.size), int(gi[-1])
    a_path = raw_dir / f"{name}_A.txt"
    edges = _read_ints(a_path, name, 2)  # (E, 2) 1-based node ids
    out = np.flatnonzero(((edges < 1) | (edges > n_nodes)).any(axis=1))
    if out.size:
        r = int(out[0])
        raise TUFormatError(f"TU dataset {name!r}: {a_path}: line {_line_of(a_path, r)}: node id out of range "
                         f"1..{n_nodes} in edge {edges[r, 0]}, {edges[r, 1]}")
    g = gi[edges - 1]  # (E, 2) graph of each end
    cross = np.flatnonzero(g[:, 0] != g[:, 1])
    if cross.size:
        r = int(cross[0])
        raise TUFormatError(f"TU dataset {name!r}: {a_path}: line {_line_of(a_path, r)}: edge {edges[r, 0]}, "
                         f"{edges[r, 1]} joins graph {g[r, 0]} and graph {g[r, 1]}")
    lab_path = raw_dir / f"{name}_graph_labels.txt"
    labels = _read_ints(lab_path, name, 1)
    if labels.size != n_graphs:
        raise TUFormatError(f"TU dataset {name!r}: {lab_path} has {labels.size} labels but {ind_path.name} names "
                         f"{n_graphs} graphs")
    return n_graphs


def _fingerprint(raw_dir: Path) -> str:
    h = hashlib.sha1(str(raw_dir.resolve()).encode())
    for p in sorted(raw_dir.glob("*.txt")):
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:12]


def _prepare_root(name: str, raw_dir: Path) -> Path:
    """A cache root whose ``<name>/raw`` links to ``raw_dir`` (processed files go next to it)."""
    root = cache_dir("TU", f"{name}-{_fingerprint(raw_dir)}")
    link = root / name / "raw"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and Path(os.readlink(link)) != raw_dir.resolve():
        link.unlink()
    if not link.exists():
        try:
            link.symlink_to(raw_dir.resolve(), target_is_directory=True)
        except FileExistsError:  # another process (e.g. the other rank) made it first
            if Path(os.readlink(link)) != raw_dir.resolve():
                raise
    return root


def _check_processed(processed: Path) -> None:
    """PyG falls back to ``torch.load(weights_only=False)`` on a processed file it cannot read as data,
    which would run code planted in the cache: every processed file is read here first as data only
    (``weights_only=True``, PyG's own classes allow-listed); an unreadable or unsafe one is reported and
    the processed cache removed, so PyG rebuilds it from the raw files."""
    import shutil

    from suite.safeio import cache_unreadable, load_tensors

    if not processed.is_dir():
        return
    for p in sorted(processed.glob("*.pt")):
        try:
            load_tensors(p, what="PyG processed cache")
        except ValueError as exc:
            cache_unreadable(p, exc)
            shutil.rmtree(processed, ignore_errors=True)
            return


def tu_folder(name: str, root: str | Path | None = None) -> Path:
    """The folder of TU dataset ``name`` under ``root`` (default ``$SUITE_DATA/TU``); its raw files are in ``raw``."""
    return (Path(root) if root is not None else data_path("TU")) / name


def load_tu(name: str, root: str | Path | None = None, *, download: bool = False) -> TUData:
    """Load TU dataset ``name`` from ``root`` (default ``$SUITE_DATA/TU``) with GraphCL's features."""
    from torch_geometric.datasets import TUDataset

    folder = tu_folder(name, root)
    base = folder.parent
    if folder.exists():
        raw = folder / "raw"
        check_tu_raw(raw, name)
        cache_root = _prepare_root(name, raw)
        source = str(raw)
    elif download:
        cache_root = cache_dir("TU", "downloaded")
        source = "download"
    else:
        note = missing_root_note() if root is None else ""
        raise ValueError(f"TU dataset {name!r} not found under {base} (expected {folder}/raw/{name}_A.txt, ...); "
                         + (f"{note}: point it at the data root" if note else
                            "set SUITE_DATA or pass download=True to let PyG download it into the cache"))
    try:
        # PyG builds the processed cache on first use; DDP ranks and parallel workers take turns, so
        # none reads a half-written file (the first builds, the others load it)
        with file_lock(Path(cache_root) / f"{name}.lock"):
            processed = Path(cache_root) / name / "processed"
            _check_processed(processed)
            if source != "download" and not (processed / "data.pt").exists():  # PyG parses the raw files now
                validate_tu_raw(Path(source), name)
            ds = TUDataset(str(cache_root), name, use_node_attr=False)
    except TUFormatError:
        raise
    except Exception as exc:  # unparsable raw file or a corrupt processed cache
        raise ValueError(f"TU dataset {name!r}: PyG could not read {source} (processed cache "
                         f"{Path(cache_root) / name / 'processed'}; delete it to rebuild): {type(exc).__name__}: {exc}") from exc
    graphs = [ds[i] for i in range(len(ds))]
    if source != "download":
        n_labels = _count_lines(Path(source) / f"{name}_graph_labels.txt")
        if len(graphs) != n_labels:  # PyG drops trailing graphs without edges (e.g. a truncated _A.txt)
            raise ValueError(f"TU dataset {name!r}: PyG built {len(graphs)} graphs from {source} but "
                             f"{name}_graph_labels.txt has {n_labels} labels (a truncated {name}_A.txt, or graphs "
                             f"without edges at the end)")
    if ds.num_node_features > 0:
        num_features = ds.num_node_features
        for g in graphs:
            g.x = g.x.float()
    else:
        num_features = 1
        for g in graphs:
            g.x = torch.ones(g.num_nodes, 1)
    ys = torch.cat([g.y.view(-1) for g in graphs])
    classes, inv = torch.unique(ys, return_inverse=True)
    for g, y in zip(graphs, inv):
        g.y = y.view(1)
        g.edge_attr = None  # TU edge labels are not used by GraphCL's encoder
    return TUData(name, graphs, num_features, int(classes.numel()), source)


def write_tu_raw(folder: Path, name: str, graphs: list[tuple[Tensor, Tensor, int]]) -> Path:
    """Write ``graphs`` (edge_index (2, E) 0-based per graph, node_labels (n,), label) in TU raw
    format to ``folder/name/raw`` (for tests and synthetic data). Returns the raw folder."""
    raw = Path(folder) / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    a_lines, ind_lines, nl_lines, gl_lines = [], [], [], []
    offset = 0
    for gi, (ei, nl, label) in enumerate(graphs, start=1):
        n = int(nl.numel())
        a_lines += [f"{int(s) + offset + 1}, {int(t) + offset + 1}" for s, t in ei.t().tolist()]
        ind_lines += [str(gi)] * n
        nl_lines += [str(int(v)) for v in nl.tolist()]
        gl_lines.append(str(int(label)))
        offset += n
    for kind, lines in (("A", a_lines), ("graph_indicator", ind_lines), ("node_labels", nl_lines),
                        ("graph_labels", gl_lines)):
        (raw / f"{name}_{kind}.txt").write_text("\n".join(lines) + "\n")
    return raw
