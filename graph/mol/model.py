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
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter

from graph.mol.data import HU, Featurizer, MolBatch, get_featurizer
from suite.pretrained import (FRACTION, MAPPING, NAME_OR_MAPPING, POSITIVE_INT, load_export, load_pretrained, load_state,
                              save_pretrained)
from suite.train.legacy import Earlier, OldExport

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


# what the layout before the run owner left: encoder.pt (the encoder's weights and spec) or a pretraining checkpoint
# (epoch<N>.pt, checkpoints/step-<N>.pt: the model's weights and config), in a folder or named itself
_SPEC = {"num_layers": "num_layers", "dim": "emb_dim", "featurizer": "featurizer"}
EARLIER = Earlier(exports=(
    OldExport(files=("encoder.pt",), weights="encoder", config="spec", fields=_SPEC, keep_config=True,
              facts={"loss": "loss"}, what="a molecular encoder checkpoint"),
    OldExport(files=("epoch*.pt", "checkpoints/step-*.pt"), weights="model", prefix="encoder.", config="config",
              fields=_SPEC, facts_from="config", facts={"loss": "loss"}, what="a molecular encoder checkpoint")))
SIZES = {"num_layers": POSITIVE_INT, "dim": POSITIVE_INT, "featurizer": NAME_OR_MAPPING}


def load_mol_encoder(path: str | Path, dropout: float = 0.0) -> tuple[MolGIN, dict[str, Any]]:
    """A molecular encoder and its spec ``{num_layers, emb_dim, featurizer (name), loss, path}`` from an exported
    folder (:meth:`MolGIN.save_pretrained`, with the run owner's ``run.json`` naming the loss), a pretraining run
    folder (its ``export/``), or an export of an earlier layout (:data:`EARLIER`, read by
    :func:`suite.pretrained.load_export`). ``dropout`` is the fine-tuning dropout."""
    ex = load_export(path, MODEL_TYPE, SIZES, earlier=EARLIER)
    c = ex.config
    feat = c["featurizer"]
    try:
        featurizer = get_featurizer(feat) if isinstance(feat, str) else Featurizer(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in feat.items()})
        enc = MolGIN(c["num_layers"], c["dim"], dropout, featurizer)
    except TypeError as exc:
        raise ValueError(f"{ex.path}: featurizer is not a featurizer vocabulary ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"{ex.path}: {exc}") from None
    load_state(enc, ex.weights, ex.path)  # tensor names and shapes checked, a mismatch named with the file
    spec = {k: v for k, v in c.items() if k not in ("model_type", "code_version", "dim", "dropout")}
    spec = {**spec, "num_layers": c["num_layers"], "emb_dim": c["dim"], "featurizer": featurizer.name}
    return enc.train(), {**spec, "loss": str(ex.record.get("loss", "?")), "path": str(ex.path),
                         "weights": weights_digest(enc.state_dict())}


def weights_digest(state: dict[str, Tensor]) -> str:
    """SHA-256 (16 hex digits) of a state dict's names, dtypes, shapes and values: the identity of the weights a
    fine-tuning starts from, recorded in its ``init_spec`` so that runs from two different encoders that share a
    path and a pretraining config (one rebuilt under other code) are never pooled as seeds of one row."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]
