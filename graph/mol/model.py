"""GIN with edge features of Hu et al. 2020 ("Strategies for Pre-training GNNs", pretrain-gnns model.py).

Per layer l:  h_i' = MLP_l( sum_{j in N(i) U {i}} (h_j + e_ji) ),  e = sum of bond-feature embeddings
(self-loops get the self-loop bond type), then BatchNorm, ReLU (not after the last layer), dropout.
Node representation: last layer; graph representation: mean pooling. GraphCL's projection head
(Linear-ReLU-Linear, 300) sits on top for pretraining; fine-tuning uses a linear head.

Shapes: x (N, Fa) long, edge_index (2, E), edge_attr (E, Fb) long, batch (N,) -> nodes (N, D), graphs (B, D).
Example: >>> enc = MolGIN(); h = enc.embed(batch)   # (B, 300)
         >>> enc.save_pretrained("runs/mol"); MolGIN.from_pretrained("runs/mol", dropout=0.5)
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter

from graph.mol.data import HU, Featurizer, MolBatch, get_featurizer
from suite.config import check_ints
from suite.pretrained import FRACTION, MAPPING, POSITIVE_INT, load_pretrained, load_state, save_pretrained
from suite.train.checkpoint import latest_checkpoint, load_checkpoint

MODEL_TYPE = "hu_mol_gin"


@dataclass
class MolGINConfig:
    """The molecular GIN and its optimiser, shared by pretraining and fine-tuning (Hu et al. 2020: GIN 5 x 300,
    Adam 1e-3 without weight decay, 100 epochs); each adds its own batch size, dropout and task fields."""

    featurizer: str = "hu"
    num_layers: int = 5
    emb_dim: int = 300
    epochs: int = 100
    lr: float = 0.001
    weight_decay: float = 0.0


class CategoricalEmbedding(nn.Module):
    """Sum of one embedding per categorical column. Shapes: (M, F) long -> (M, D)."""

    def __init__(self, dims: tuple[int, ...], dim: int) -> None:
        super().__init__()
        self.dims = dims
        self.embs = nn.ModuleList(nn.Embedding(d, dim) for d in dims)
        for e in self.embs:
            nn.init.xavier_uniform_(e.weight)

    def forward(self, a: Tensor) -> Tensor:
        if a.dim() != 2 or a.shape[1] != len(self.dims):
            raise ValueError(f"expected categorical features (M, {len(self.dims)}), got {tuple(a.shape)}")
        out = self.embs[0](a[:, 0])
        for k in range(1, len(self.dims)):
            out = out + self.embs[k](a[:, k])
        return out


class GINEConv(nn.Module):
    """One GIN layer with edge embeddings added to messages (sum aggregation, self-loops included)."""

    def __init__(self, dim: int, bond_dims: tuple[int, ...], self_loop: tuple[int, ...]) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.edge_emb = CategoricalEmbedding(bond_dims, dim)
        self.register_buffer("self_loop", torch.tensor(self_loop, dtype=torch.long), persistent=False)

    def forward(self, h: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        n = h.shape[0]
        loops = torch.arange(n, device=h.device)
        src = torch.cat([edge_index[0], loops])  # (E+N,)
        dst = torch.cat([edge_index[1], loops])
        attr = torch.cat([edge_attr, self.self_loop.expand(n, -1)])  # (E+N, Fb)
        msg = h[src] + self.edge_emb(attr)  # (E+N, D)
        agg = scatter(msg, dst, dim=0, dim_size=n, reduce="sum")  # (N, D)
        return self.mlp(agg)


class MolGIN(nn.Module):
    """Hu et al.'s 5-layer GIN encoder (emb 300, BatchNorm, dropout, last-layer JK, mean pool)."""

    def __init__(self, num_layers: int = 5, dim: int = 300, dropout: float = 0.0, featurizer: Featurizer = HU) -> None:
        super().__init__()
        if num_layers < 2:
            raise ValueError(f"num_layers must be >= 2, got {num_layers}")
        self.num_layers, self.dim, self.dropout = num_layers, dim, dropout
        self.featurizer = featurizer
        self.atom_emb = CategoricalEmbedding(featurizer.atom_dims, dim)
        self.convs = nn.ModuleList(GINEConv(dim, featurizer.bond_dims, featurizer.self_loop) for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(dim) for _ in range(num_layers))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        h = self.atom_emb(x)  # (N, D)
        for layer, (conv, bn) in enumerate(zip(self.convs, self.norms)):
            h = bn(conv(h, edge_index, edge_attr))
            h = self.drop(h) if layer == self.num_layers - 1 else self.drop(torch.relu(h))
        return h  # (N, D) last-layer node representation

    def embed(self, b: MolBatch) -> Tensor:
        """Mean-pooled graph embedding. Shapes: MolBatch -> (B, D)."""
        h = self(b.x, b.edge_index, b.edge_attr)
        return scatter(h, b.batch, dim=0, dim_size=b.num_graphs, reduce="mean")

    def save_pretrained(self, path: str | Path) -> Path:
        """``path/model.safetensors`` + ``path/config.json`` (num_layers, dim, dropout, featurizer vocabulary)."""
        cfg = {"num_layers": self.num_layers, "dim": self.dim, "dropout": self.dropout,
               "featurizer": dataclasses.asdict(self.featurizer)}  # the vocabulary itself: no ogb needed to load
        return save_pretrained(self, path, MODEL_TYPE, cfg)

    @classmethod
    def from_pretrained(cls, path: str | Path, dropout: float | None = None) -> "MolGIN":
        """The encoder saved by :meth:`save_pretrained` (eval mode); ``dropout`` overrides the saved one
        for fine-tuning (Hu et al. fine-tune with 0.5)."""
        cfg, state = load_pretrained(path, MODEL_TYPE, {"num_layers": POSITIVE_INT, "dim": POSITIVE_INT,
                                                        "dropout": FRACTION, "featurizer": MAPPING})
        try:
            feat = Featurizer(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg["featurizer"].items()})
        except TypeError as exc:
            raise ValueError(f"{Path(path) / 'config.json'}: featurizer is not a featurizer vocabulary ({exc})") from None
        try:
            enc = cls(cfg["num_layers"], cfg["dim"], float(cfg["dropout"] if dropout is None else dropout), feat)
        except ValueError as exc:
            raise ValueError(f"{Path(path) / 'config.json'}: {exc}") from None
        load_state(enc, state, path)  # names and shapes checked: a config that does not match the weights is named
        return enc.eval()


def projection_head(dim: int = 300) -> nn.Module:
    """GraphCL's projection head (transfer setting): Linear-ReLU-Linear."""
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Linear(dim, dim))


class MolPredictor(nn.Module):
    """Encoder + linear head on the pooled embedding. Shapes: MolBatch -> logits (B, T)."""

    def __init__(self, encoder: MolGIN, num_tasks: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.dim, num_tasks)

    def forward(self, b: MolBatch) -> Tensor:
        return self.head(self.encoder.embed(b))


def load_mol_encoder(path: str | Path, dropout: float = 0.0) -> tuple[MolGIN, dict[str, Any]]:
    """A molecular encoder and its spec ``{num_layers, emb_dim, featurizer (name), loss, path}`` from: an exported
    folder (:meth:`MolGIN.save_pretrained`, with the run owner's ``run.json`` naming the loss), a pretraining run
    folder (its ``export/``), or a checkpoint of the layout before the run owner (``encoder.pt``, ``epoch<N>.pt``, or a
    folder holding them; :func:`load_legacy_mol_encoder`). ``dropout`` is the fine-tuning dropout."""
    p = Path(path)
    folder = p / "export" if (p / "export" / "config.json").is_file() else p
    if folder.is_dir() and (folder / "config.json").is_file():
        enc = MolGIN.from_pretrained(folder, dropout=dropout)
        loss = "?"
        if (folder / "run.json").is_file():
            try:
                loss = str(json.loads((folder / "run.json").read_text(encoding="utf-8")).get("loss", "?"))
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
                raise ValueError(f"{folder / 'run.json'}: not a run record ({exc})") from None
        spec = {"num_layers": enc.num_layers, "emb_dim": enc.dim, "featurizer": enc.featurizer.name}
        return enc.train(), {**spec, "loss": loss, "path": str(folder)}
    return load_legacy_mol_encoder(p, dropout)


def load_legacy_mol_encoder(path: str | Path, dropout: float = 0.0) -> tuple[MolGIN, dict[str, Any]]:
    """An encoder from a checkpoint of the layout before the run owner: ``encoder.pt`` (or a directory holding it, or
    an ``epoch<N>.pt`` checkpoint), or a training checkpoint of a run folder (``checkpoints/step-<N>.pt``). A checkpoint
    that loads as data but lacks its ``spec`` (encoder.pt) or ``config`` (a pretraining checkpoint), or holds one
    that is not a mapping or has a field of the wrong type, is a ValueError naming the file and what is wrong."""
    p = Path(path)
    if p.is_dir():
        cand = p / "encoder.pt"
        p = cand if cand.exists() else (latest_checkpoint(p, "epoch*.pt") or latest_checkpoint(p / "checkpoints", "step-*.pt")
                                        or cand)
    state = load_checkpoint(p)
    if "encoder" in state:
        entry, what = "spec", "an encoder checkpoint ('encoder' entry)"
    elif "model" in state:  # a full pretraining checkpoint
        entry, what = "config", "a pretraining checkpoint ('model' entry)"
    else:
        raise ValueError(f"{p} is not a molecular encoder checkpoint (no 'encoder' or 'model' entry)")
    if entry not in state:
        raise ValueError(f"{p}: {what} with no '{entry}' entry, so the encoder cannot be rebuilt (num_layers, "
                         f"emb_dim, featurizer)")
    c = state[entry]
    if not isinstance(c, dict):
        raise ValueError(f"{p}: '{entry}' must be a mapping (num_layers, emb_dim, featurizer), got {type(c).__name__}")
    weights = state["encoder" if entry == "spec" else "model"]
    if not isinstance(weights, dict):
        raise ValueError(f"{p}: the weights must be a mapping of tensors, got {type(weights).__name__}")
    lacking = {"num_layers", "emb_dim", "featurizer"} - set(c)
    if lacking:
        raise ValueError(f"{p}: the encoder {entry} lacks {sorted(lacking)}")
    spec = {"num_layers": c["num_layers"], "emb_dim": c["emb_dim"], "featurizer": c["featurizer"]}
    if entry == "spec":
        spec = {**c, **spec}
    check_ints(spec, {"num_layers": 1, "emb_dim": 1}, where=f"{p}: {entry} ")
    if not isinstance(spec["featurizer"], str):
        raise ValueError(f"{p}: {entry} featurizer must be a name ('hu' or 'ogb'), got {spec['featurizer']!r}")
    sd_ = weights if entry == "spec" else {k[len("encoder."):]: v for k, v in weights.items()
                                          if isinstance(k, str) and k.startswith("encoder.")}
    try:
        enc = MolGIN(spec["num_layers"], spec["emb_dim"], dropout, get_featurizer(spec["featurizer"]))
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
    load_state(enc, sd_, p)  # tensor names and shapes checked, a mismatch named with the file
    config = state.get("config")
    loss = state.get("loss", config.get("loss", "?") if isinstance(config, dict) else "?")
    return enc, {**spec, "loss": loss, "path": str(p)}

