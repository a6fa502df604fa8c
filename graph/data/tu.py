"""TU graph-classification datasets (Morris et al. 2020) through ``torch_geometric.datasets.TUDataset``.

The raw files live read-only under ``$SUITE_DATA/TU/<NAME>/raw`` (TU raw layout); PyG's processed
cache is written under ``suite.paths.cache_dir("TU")`` (a ``raw`` link to the data root), never
inside the data root. Before PyG touches a local copy the raw folder is checked: a missing or
inconsistent file raises ``ValueError`` naming it, and nothing is downloaded over it. Only a
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
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from torch_geometric.data import Data

from suite.paths import cache_dir, data_path, file_lock

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
        link.symlink_to(raw_dir.resolve(), target_is_directory=True)
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


def load_tu(name: str, root: str | Path | None = None, *, download: bool = False) -> TUData:
    """Load TU dataset ``name`` from ``root`` (default ``$SUITE_DATA/TU``) with GraphCL's features."""
    from torch_geometric.datasets import TUDataset

    base = Path(root) if root is not None else data_path("TU")
    folder = base / name
    if folder.exists():
        raw = folder / "raw"
        check_tu_raw(raw, name)
        cache_root = _prepare_root(name, raw)
        source = str(raw)
    elif download:
        cache_root = cache_dir("TU", "downloaded")
        source = "download"
    else:
        raise ValueError(f"TU dataset {name!r} not found under {base} (expected {folder}/raw/{name}_A.txt, ...); "
                         "set SUITE_DATA or pass download=True to let PyG download it into the cache")
    try:
        # PyG builds the processed cache on first use; DDP ranks and parallel workers take turns, so
        # none reads a half-written file (the first builds, the others load it)
        with file_lock(Path(cache_root) / f"{name}.lock"):
            _check_processed(Path(cache_root) / name / "processed")
            ds = TUDataset(str(cache_root), name, use_node_attr=False)
    except Exception as exc:  # unparsable raw file or a corrupt processed cache
        raise ValueError(f"TU dataset {name!r}: PyG could not read {source} (processed cache "
                         f"{Path(cache_root) / name / 'processed'}; delete it to rebuild): {type(exc).__name__}: {exc}") from exc
    graphs = [ds[i] for i in range(len(ds))]
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
