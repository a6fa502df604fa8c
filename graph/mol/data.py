"""Molecules to graphs: RDKit featurisation, SMILES file readers, MoleculeNet loaders, on-disk cache.

Default featuriser ``"hu"`` is the one of Hu et al. 2020 ("Strategies for Pre-training GNNs",
snap-stanford/pretrain-gnns ``mol_to_graph_data_obj_simple``):

- node  x = [atom type index (atomic number - 1, 0..117; 119 = mask token), chirality tag (0..3)]
- edge  edge_attr = [bond type (0 single, 1 double, 2 triple, 3 aromatic; 4 = self-loop, 5 = mask),
  bond direction (0 none, 1 end-up-right, 2 end-down-right)], both directions of every bond.

``"ogb"`` uses ``ogb.utils.smiles2graph`` (9 atom / 3 bond feature columns). A molecule whose SMILES
does not parse (or has no atoms, or a bond type outside the vocabulary) is skipped: the count and the
first few are reported in a warning; a set whose molecules all fail raises ``ValueError``.

Graphs are stored packed (:class:`MolGraphs`: concatenated node/edge arrays + pointers), so a batch
is a vectorised gather (:meth:`MolGraphs.batch`), not a Python loop over molecules.

A user's own CSV of molecules and targets is read in :mod:`graph.mol.user_data` (its names are importable from here
too).
"""
from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from graph.mol.user_data import (SPLIT_NAMES, TASKS, TargetTable, _table, content_fingerprint,  # noqa: F401
                                 read_target_table, smiles_column_of)  # a user's own CSV: named here as before
from suite.paths import cache_dir, data_path
from suite.safeio import cache_unreadable, load_arrays, read_text, save_arrays
from suite.train.seeding import fixed_numpy_rng

CACHE_VERSION = "v2"  # v2: .npz of plain arrays (v1 was a pickle)


@dataclass(frozen=True)
class Featurizer:
    """Vocabulary of a featuriser: sizes of each categorical column (incl. special tokens)."""

    name: str
    atom_dims: tuple[int, ...]  # embedding size per node feature column
    bond_dims: tuple[int, ...]  # embedding size per edge feature column
    self_loop: tuple[int, ...]  # edge_attr of the self-loops the encoder adds
    mask_atom: tuple[int, ...]  # node features of a masked atom
    mask_bond: tuple[int, ...]  # edge features of a masked bond


HU = Featurizer("hu", atom_dims=(120, 4), bond_dims=(6, 3), self_loop=(4, 0), mask_atom=(119, 0), mask_bond=(5, 0))


def _ogb_featurizer() -> Featurizer:
    from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims

    a, b = list(get_atom_feature_dims()), list(get_bond_feature_dims())
    # one extra index per atom column (mask), two on the bond-type column (self-loop, mask)
    return Featurizer("ogb", atom_dims=tuple(d + 1 for d in a), bond_dims=(b[0] + 2, *b[1:]),
                      self_loop=(b[0], *([0] * (len(b) - 1))), mask_atom=tuple(a),
                      mask_bond=(b[0] + 1, *([0] * (len(b) - 1))))


def get_featurizer(name: str) -> Featurizer:
    if name == "hu":
        return HU
    if name == "ogb":
        return _ogb_featurizer()
    raise ValueError(f"unknown featurizer {name!r}; choose 'hu' or 'ogb'")


# RDKit enum int -> Hu index. BondType ints: SINGLE 1, DOUBLE 2, TRIPLE 3, AROMATIC 12.
_BOND_TYPE = np.full(64, -1, dtype=np.int64)
_BOND_TYPE[[1, 2, 3, 12]] = [0, 1, 2, 3]
# BondDir ints: NONE 0, ENDDOWNRIGHT 3, ENDUPRIGHT 4; wedge/dash/either/unknown -> none
_BOND_DIR = np.zeros(16, dtype=np.int64)
_BOND_DIR[[4, 3]] = [1, 2]


@dataclass
class MolBatch:
    """A batch of molecular graphs (PyG layout).

    Shapes: x (N, Fa) long; edge_index (2, E) long; edge_attr (E, Fb) long; batch (N,) long;
    ptr (B+1,); y (B, T) float with NaN = missing label (or None).
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    batch: Tensor
    ptr: Tensor
    num_graphs: int
    y: Tensor | None = None

    def to(self, device: torch.device | str) -> "MolBatch":
        return MolBatch(self.x.to(device), self.edge_index.to(device), self.edge_attr.to(device),
                        self.batch.to(device), self.ptr.to(device), self.num_graphs,
                        None if self.y is None else self.y.to(device))

    def to_pyg(self):  # type: ignore[no-untyped-def]
        """As a ``torch_geometric.data.Batch`` (shares the tensors)."""
        from torch_geometric.data import Batch

        b = Batch(x=self.x, edge_index=self.edge_index, edge_attr=self.edge_attr, batch=self.batch, ptr=self.ptr)
        if self.y is not None:
            b.y = self.y
        b._num_graphs = self.num_graphs
        return b


@dataclass
class MolGraphs:
    """Packed molecular graphs: all nodes / edges concatenated, graph g owns
    ``x[node_ptr[g]:node_ptr[g+1]]`` and ``edge_index[:, edge_ptr[g]:edge_ptr[g+1]]`` (local ids).

    Shapes: x (Ntot, Fa) int16; edge_index (2, Etot) int16 local; edge_attr (Etot, Fb) int16;
    node_ptr, edge_ptr (G+1,) int64; y (G, T) float32 NaN = missing, or None.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    node_ptr: Tensor
    edge_ptr: Tensor
    smiles: list[str]
    featurizer: str = "hu"
    y: Tensor | None = None
    tasks: list[str] = field(default_factory=list)
    source_index: Tensor | None = None  # row of each kept molecule in the source file
    skipped: int = 0  # molecules that could not be featurised
    bad_labels: int = 0  # non-numeric label cells of the source file, kept as missing

    def __len__(self) -> int:
        return self.node_ptr.numel() - 1

    @property
    def num_nodes(self) -> Tensor:  # (G,)
        return self.node_ptr[1:] - self.node_ptr[:-1]

    @property
    def num_edges(self) -> Tensor:  # (G,) directed edges
        return self.edge_ptr[1:] - self.edge_ptr[:-1]

    def batch(self, idx: Tensor | Sequence[int]) -> MolBatch:
        """Collate graphs ``idx`` into one :class:`MolBatch` (vectorised gather)."""
        idx = torch.as_tensor(idx, dtype=torch.long)
        b = idx.numel()
        n = self.num_nodes[idx]  # (B,)
        e = self.num_edges[idx]  # (B,)
        ptr = torch.zeros(b + 1, dtype=torch.long)
        ptr[1:] = torch.cumsum(n, 0)
        eptr = torch.zeros(b + 1, dtype=torch.long)
        eptr[1:] = torch.cumsum(e, 0)
        batch = torch.repeat_interleave(torch.arange(b), n)  # (N,)
        ebatch = torch.repeat_interleave(torch.arange(b), e)  # (E,)
        node_ids = self.node_ptr[idx][batch] + torch.arange(int(ptr[-1])) - ptr[batch]
        edge_ids = self.edge_ptr[idx][ebatch] + torch.arange(int(eptr[-1])) - eptr[ebatch]
        edge_index = self.edge_index[:, edge_ids].long() + ptr[ebatch]  # (2, E) global ids
        y = None if self.y is None else self.y[idx]
        return MolBatch(self.x[node_ids].long(), edge_index, self.edge_attr[edge_ids].long(), batch, ptr, b, y)

    def subset(self, idx: Tensor | Sequence[int]) -> "MolGraphs":
        idx = torch.as_tensor(idx, dtype=torch.long)
        bt = self.batch(idx)
        local = bt.edge_index - bt.ptr[:-1][bt.batch[bt.edge_index[0]]]
        eptr = torch.zeros(len(idx) + 1, dtype=torch.long)
        eptr[1:] = torch.cumsum(self.num_edges[idx], 0)
        return MolGraphs(bt.x.short(), local.short(), bt.edge_attr.short(), bt.ptr, eptr,
                         [self.smiles[i] for i in idx.tolist()], self.featurizer, bt.y, list(self.tasks),
                         None if self.source_index is None else self.source_index[idx], self.skipped, self.bad_labels)


def _warn_skipped(failures: list[tuple[int, str, str]], total: int, what: str) -> None:
    if not failures:
        return
    head = "; ".join(f"#{i} {s!r} ({why})" for i, s, why in failures[:5])
    warnings.warn(f"{what}: skipped {len(failures)} of {total} molecules that could not be featurised; first: {head}",
                  stacklevel=3)


def _pack(xs: list[np.ndarray], eis: list[np.ndarray], eas: list[np.ndarray], fa: int, fb: int) -> tuple[Tensor, ...]:
    n = np.array([len(a) for a in xs], dtype=np.int64)
    e = np.array([a.shape[1] for a in eis], dtype=np.int64)
    x = torch.from_numpy(np.concatenate(xs).reshape(-1, fa).astype(np.int16)) if xs else torch.zeros(0, fa, dtype=torch.int16)
    ei = torch.from_numpy(np.concatenate(eis, axis=1).astype(np.int16)) if eis else torch.zeros(2, 0, dtype=torch.int16)
    ea = torch.from_numpy(np.concatenate(eas).reshape(-1, fb).astype(np.int16)) if eas else torch.zeros(0, fb, dtype=torch.int16)
    node_ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(n)]))
    edge_ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(e)]))
    return x, ei, ea, node_ptr, edge_ptr


def _featurize_hu(smiles: Sequence[str]) -> tuple[list[int], list[tuple[int, str, str]], tuple[Tensor, ...]]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    kept: list[int] = []
    failures: list[tuple[int, str, str]] = []
    z_all: list[int] = []
    ch_all: list[int] = []
    n_atoms: list[int] = []
    bonds: list[tuple[int, int, int, int]] = []
    n_bonds: list[int] = []
    for i, s in enumerate(smiles):  # RDKit is per molecule; everything after is vectorised
        mol = Chem.MolFromSmiles(s) if isinstance(s, str) and s else None
        if mol is None:
            failures.append((i, str(s), "unparsable SMILES"))
            continue
        atoms = mol.GetAtoms()
        if len(atoms) == 0:
            failures.append((i, s, "no atoms"))
            continue
        z = [a.GetAtomicNum() for a in atoms]
        if min(z) < 1:
            failures.append((i, s, "dummy atom (atomic number 0)"))
            continue
        bl = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), int(b.GetBondType()), int(b.GetBondDir())) for b in mol.GetBonds()]
        if any(_BOND_TYPE[t] < 0 for _, _, t, _ in bl):
            failures.append((i, s, "bond type outside single/double/triple/aromatic"))
            continue
        kept.append(i)
        z_all.extend(z)
        ch_all.extend(int(a.GetChiralTag()) for a in atoms)
        n_atoms.append(len(z))
        bonds.extend(bl)
        n_bonds.append(len(bl))
    if not kept:
        return kept, failures, ()
    x = np.stack([np.asarray(z_all) - 1, np.minimum(np.asarray(ch_all), 3)], axis=1)  # (Ntot, 2)
    bd = np.asarray(bonds, dtype=np.int64).reshape(-1, 4)  # (Btot, 4)
    # both directions per bond, interleaved (i->j, j->i) as in pretrain-gnns
    ei = np.stack([bd[:, [0, 1]], bd[:, [1, 0]]], axis=1).reshape(-1, 2).T  # (2, 2Btot) local ids
    ea1 = np.stack([_BOND_TYPE[bd[:, 2]], _BOND_DIR[np.minimum(bd[:, 3], 15)]], axis=1)  # (Btot, 2)
    ea = np.repeat(ea1, 2, axis=0)  # (2Btot, 2)
    n = np.asarray(n_atoms, dtype=np.int64)
    e = 2 * np.asarray(n_bonds, dtype=np.int64)
    node_ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(n)]))
    edge_ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(e)]))
    packed = (torch.from_numpy(x.astype(np.int16)), torch.from_numpy(ei.astype(np.int16)),
              torch.from_numpy(ea.astype(np.int16)), node_ptr, edge_ptr)
    return kept, failures, packed


def _featurize_ogb(smiles: Sequence[str]) -> tuple[list[int], list[tuple[int, str, str]], tuple[Tensor, ...]]:
    from ogb.utils import smiles2graph
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    kept: list[int] = []
    failures: list[tuple[int, str, str]] = []
    xs: list[np.ndarray] = []
    eis: list[np.ndarray] = []
    eas: list[np.ndarray] = []
    for i, s in enumerate(smiles):
        try:
            g = smiles2graph(s)
        except Exception as exc:  # ogb raises AttributeError on unparsable SMILES
            failures.append((i, str(s), f"unparsable SMILES ({type(exc).__name__})"))
            continue
        if g["num_nodes"] == 0:
            failures.append((i, s, "no atoms"))
            continue
        kept.append(i)
        xs.append(g["node_feat"])
        eis.append(g["edge_index"])
        eas.append(g["edge_feat"])
    if not kept:
        return kept, failures, ()
    return kept, failures, _pack(xs, eis, eas, xs[0].shape[1], 3)


def featurize(smiles: Sequence[str], featurizer: str = "hu", y: Tensor | None = None, tasks: Sequence[str] = (),
              what: str = "molecules") -> MolGraphs:
    """Featurise SMILES into packed graphs; unparsable molecules are skipped, counted and warned about.

    ``y`` (G_in, T), if given, is subset to the kept molecules. Raises ``ValueError`` if none parse.
    """
    fn = {"hu": _featurize_hu, "ogb": _featurize_ogb}.get(featurizer)
    if fn is None:
        raise ValueError(f"unknown featurizer {featurizer!r}; choose 'hu' or 'ogb'")
    if len(smiles) == 0:
        raise ValueError(f"{what}: no SMILES given")
    kept, failures, packed = fn(smiles)
    if not kept:
        head = "; ".join(f"{s!r} ({why})" for _, s, why in failures[:5])
        raise ValueError(f"{what}: all {len(smiles)} SMILES failed to featurise; first: {head}")
    _warn_skipped(failures, len(smiles), what)
    x, ei, ea, node_ptr, edge_ptr = packed
    kept_t = torch.tensor(kept, dtype=torch.long)
    return MolGraphs(x, ei, ea, node_ptr, edge_ptr, [smiles[i] for i in kept], featurizer,
                     None if y is None else y[kept_t], list(tasks), kept_t, len(failures))


# --------------------------------------------------------------------------- files and cache
def _csv(text: str, path: Path) -> Any:
    """``text`` (the decoded contents of ``path``) parsed as CSV; a malformed table names the file."""
    import pandas as pd

    try:
        return pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path}: not a readable CSV ({' '.join(str(exc).split())})") from exc


def read_smiles(path: str | Path, column: str | None = None, limit: int | None = None, seed: int = 0) -> list[str]:
    """SMILES from a CSV with a SMILES column (``column`` or any column named smiles, case-insensitive)
    or a file with one SMILES per line (first whitespace token; a header line 'smiles' is dropped);
    gzip or plain UTF-8 (a binary or non-UTF-8 file raises ``ValueError`` naming it and the line).
    ``limit`` takes a seeded random subset (kept in file order)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"SMILES file not found: {path}")
    text = read_text(path, what="SMILES file")
    first = text[: text.find("\n")].strip() if "\n" in text else text.strip()
    if "," in first:
        df = _csv(text, path)
        cols = {c.lower(): c for c in df.columns}
        col = column if column is not None else cols.get("smiles")
        if col is None or col not in df.columns:
            raise ValueError(f"{path}: no SMILES column (looked for {column or 'smiles'!r}); columns: {list(df.columns)[:10]}")
        out = df[col].astype(str).tolist()
    else:
        lines = [ln.split()[0] for ln in text.splitlines() if ln.strip()]
        if lines and lines[0].lower() in ("smiles", (column or "smiles").lower()):
            lines = lines[1:]
        out = lines
    if not out:
        raise ValueError(f"{path}: no SMILES found")
    if limit is not None and 0 < limit < len(out):
        idx = np.sort(fixed_numpy_rng(seed).choice(len(out), size=limit, replace=False))
        out = [out[i] for i in idx]
    return out


def file_hash(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _cache_path(path: Path, featurizer: str, extra: str) -> Path:
    key = hashlib.sha256(f"{file_hash(path)}|{featurizer}|{extra}|{CACHE_VERSION}".encode()).hexdigest()[:16]
    return cache_dir("molecules") / f"{path.name.split('.')[0]}-{featurizer}-{key}.npz"


_TENSORS = ("x", "edge_index", "edge_attr", "node_ptr", "edge_ptr", "y", "source_index")
_SEP = "\x00"  # SMILES separator in the cache (never inside a SMILES)


def _save(graphs: MolGraphs, p: Path) -> None:
    """Cache as plain arrays (suite.safeio.save_arrays): nothing in the file can run code."""
    if any(_SEP in s for s in graphs.smiles):
        return  # cannot be stored unambiguously: no cache
    arrays = {k: getattr(graphs, k) for k in _TENSORS if getattr(graphs, k) is not None}
    arrays["smiles"] = np.frombuffer(_SEP.join(graphs.smiles).encode(), dtype=np.uint8)
    save_arrays(p, arrays, {"featurizer": graphs.featurizer, "tasks": list(graphs.tasks), "skipped": graphs.skipped,
                            "bad_labels": graphs.bad_labels, "version": CACHE_VERSION})


def _load(p: Path) -> MolGraphs | None:
    """The cached graphs, or None (with a warning naming the file) when the cache is unreadable."""
    try:
        arrays, meta = load_arrays(p, "molecule cache")
        missing = {"x", "edge_index", "edge_attr", "node_ptr", "edge_ptr", "smiles"} - set(arrays)
        if missing or meta.get("version") != CACHE_VERSION:
            raise ValueError(f"molecule cache {p} is unreadable: missing {sorted(missing)} or another version")
        blob = arrays.pop("smiles").numpy().tobytes().decode()
        smiles = blob.split(_SEP) if blob else []
        g = MolGraphs(**{k: arrays.get(k) for k in _TENSORS}, smiles=smiles, featurizer=str(meta["featurizer"]),
                      tasks=list(meta["tasks"]), skipped=int(meta["skipped"]), bad_labels=int(meta["bad_labels"]))
        if len(g.smiles) != len(g) or g.edge_ptr.numel() != len(g) + 1:
            raise ValueError(f"molecule cache {p} is unreadable: {len(g.smiles)} SMILES for {len(g)} graphs")
        return g
    except Exception as exc:  # corrupt or planted cache: say so, then rebuild
        cache_unreadable(p, exc)
        return None


def load_smiles_file(path: str | Path, featurizer: str = "hu", limit: int | None = None, seed: int = 0,
                     column: str | None = None, use_cache: bool = True) -> MolGraphs:
    """Featurised graphs of a SMILES file, cached on disk (key: file hash, featuriser, limit, seed)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"SMILES file not found: {path}")
    cp = _cache_path(path, featurizer, f"limit={limit}|seed={seed}|col={column}") if use_cache else None
    if cp is not None and cp.exists() and (g := _load(cp)) is not None:
        return g
    g = featurize(read_smiles(path, column, limit, seed), featurizer, what=str(path.name))
    if cp is not None:
        _save(g, cp)
    return g


# --------------------------------------------------------------------------- MoleculeNet
TOX21 = ["NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD", "NR-PPAR-gamma", "SR-ARE",
         "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53"]
MUV = ["MUV-466", "MUV-548", "MUV-600", "MUV-644", "MUV-652", "MUV-689", "MUV-692", "MUV-712", "MUV-713",
       "MUV-733", "MUV-737", "MUV-810", "MUV-832", "MUV-846", "MUV-852", "MUV-858", "MUV-859"]
# name -> (smiles column, task columns; None = every column but the SMILES one), as in pretrain-gnns loader.py
MOLECULENET: dict[str, tuple[str, list[str] | None]] = {
    "bbbp": ("smiles", ["p_np"]),
    "tox21": ("smiles", TOX21),
    "toxcast": ("smiles", None),
    "sider": ("smiles", None),
    "clintox": ("smiles", ["FDA_APPROVED", "CT_TOX"]),
    "muv": ("smiles", MUV),
    "hiv": ("smiles", ["HIV_active"]),
    "bace": ("mol", ["Class"]),
}


@dataclass
class MoleculeNetTable:
    """A MoleculeNet CSV as read: SMILES, labels (G, T) float32 (1 / 0, NaN = missing; raw -1 means
    negative), task names, and the count of non-numeric label cells (reported, kept as missing)."""

    smiles: list[str]
    y: Tensor
    tasks: list[str]
    non_numeric: int = 0


def read_moleculenet_table(path: str | Path, name: str) -> MoleculeNetTable:
    """Read ``path`` as MoleculeNet set ``name``. A label cell that is neither empty nor a number is
    counted and warned about (file, column, line and value of the first ones) and kept as missing; a
    number other than -1/0/1 raises ``ValueError``."""
    import pandas as pd

    if name not in MOLECULENET:
        raise ValueError(f"unknown MoleculeNet data set {name!r}; choose from {sorted(MOLECULENET)}")
    scol, tasks = MOLECULENET[name]
    df = _csv(read_text(path, what="MoleculeNet CSV"), Path(path))
    if scol not in df.columns:
        raise ValueError(f"{path}: SMILES column {scol!r} missing; columns: {list(df.columns)[:10]}")
    if tasks is None:
        tasks = [c for c in df.columns if c != scol]
    missing = [t for t in tasks if t not in df.columns]
    if missing:
        raise ValueError(f"{path}: task column(s) {missing} missing")
    cells = df[tasks]
    raw = cells.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)  # (G, T)
    text = cells.astype(str).apply(lambda c: c.str.strip()).to_numpy()  # (G, T), per column (vectorised)
    non_numeric = np.isnan(raw) & cells.notna().to_numpy() & (text != "")
    n_bad = int(non_numeric.sum())
    if n_bad:
        where = np.argwhere(non_numeric)[:3]
        head = "; ".join(f"line {r + 2} column {tasks[c]!r}: {str(cells.iat[r, c])[:20]!r}" for r, c in where)
        warnings.warn(f"{path}: {n_bad} non-numeric label(s) treated as missing (first: {head})", stacklevel=2)
    bad = ~np.isnan(raw) & ~np.isin(raw, (-1.0, 0.0, 1.0))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{path}: label {raw[r, c]} in column {tasks[c]!r} row {r} is not -1/0/1/empty")
    y = np.where(raw == -1, 0.0, raw).astype(np.float32)
    return MoleculeNetTable(df[scol].astype(str).tolist(), torch.from_numpy(y), list(tasks), n_bad)


def read_moleculenet_csv(path: str | Path, name: str) -> tuple[list[str], Tensor, list[str]]:
    """SMILES, labels (G, T) float32 (1 / 0, NaN = missing; raw -1 means negative) and task names
    (:func:`read_moleculenet_table` without the count of non-numeric labels)."""
    t = read_moleculenet_table(path, name)
    return t.smiles, t.y, t.tasks


def load_moleculenet(name: str, featurizer: str = "hu", root: str | Path | None = None, use_cache: bool = True) -> MolGraphs:
    """One of the eight MoleculeNet classification sets from ``$SUITE_DATA/moleculenet/<name>.csv``."""
    name = name.lower()
    path = Path(root) / f"{name}.csv" if root is not None else data_path("moleculenet", f"{name}.csv")
    if name not in MOLECULENET:
        raise ValueError(f"unknown MoleculeNet data set {name!r}; choose from {sorted(MOLECULENET)}")
    if not path.exists():
        raise ValueError(f"MoleculeNet file not found: {path} (set SUITE_DATA)")
    cp = _cache_path(path, featurizer, f"molnet={name}") if use_cache else None
    if cp is not None and cp.exists() and (g := _load(cp)) is not None:
        return g
    table = read_moleculenet_table(path, name)
    g = featurize(table.smiles, featurizer, y=table.y, tasks=table.tasks, what=name)
    g.bad_labels = table.non_numeric
    if cp is not None:
        _save(g, cp)
    return g
