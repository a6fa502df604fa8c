"""GIN encoder of GraphCL's TU experiments (You et al. 2020; encoder of Sun et al. 2020, InfoGraph).

Each layer: ``GINConv(MLP: Linear(in, h) -> ReLU -> Linear(h, h))`` -> ReLU -> BatchNorm. The graph
embedding is the concatenation over layers of the sum-pooled node states (``layers * hidden``,
96-d for the default 3 x 32). The projection head (Linear -> ReLU -> Linear, width = embedding
size) is used only for the loss.

Shapes: x (n, F), edge_index (2, E), batch (n,) -> graph embedding (B, layers * hidden);
        GraphCLModel(...) -> projection (B, proj_dim).
Example:
    >>> enc = GINEncoder(in_dim=7)
    >>> enc(x, edge_index, batch).shape   # (B, 96)
    >>> enc.save_pretrained("runs/gin"); GINEncoder.from_pretrained("runs/gin")  # safetensors + config.json
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GINConv, global_add_pool

from suite.pretrained import POSITIVE_INT, load_pretrained, load_state, save_pretrained

MODEL_TYPE = "graphcl_gin"


class GINEncoder(nn.Module):
    def __init__(self, in_dim: int, hidden: int = 32, layers: int = 3) -> None:
        super().__init__()
        if in_dim < 1 or hidden < 1 or layers < 1:
            raise ValueError(f"GINEncoder needs in_dim, hidden, layers >= 1; got {in_dim}, {hidden}, {layers}")
        self.in_dim, self.hidden, self.layers = in_dim, hidden, layers
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(layers):
            mlp = nn.Sequential(nn.Linear(in_dim if i == 0 else hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            self.convs.append(GINConv(mlp))
            self.norms.append(nn.BatchNorm1d(hidden))

    @property
    def out_dim(self) -> int:
        return self.hidden * self.layers

    def node_states(self, x: Tensor, edge_index: Tensor) -> list[Tensor]:
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"GINEncoder expects x of shape (n, {self.in_dim}); got {tuple(x.shape)}")
        hs = []
        h = x
        for conv, norm in zip(self.convs, self.norms):
            h = norm(F.relu(conv(h, edge_index)))  # (n, hidden)
            hs.append(h)
        return hs

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor, num_graphs: int | None = None) -> Tensor:
        hs = self.node_states(x, edge_index)
        size = int(batch.max()) + 1 if num_graphs is None else num_graphs
        return torch.cat([global_add_pool(h, batch, size=size) for h in hs], dim=1)  # (B, layers * hidden)

    def save_pretrained(self, path: str | Path) -> Path:
        """``path/model.safetensors`` + ``path/config.json`` (in_dim, hidden, layers); see :meth:`from_pretrained`."""
        return save_pretrained(self, path, MODEL_TYPE, {"in_dim": self.in_dim, "hidden": self.hidden, "layers": self.layers})

    @classmethod
    def from_pretrained(cls, path: str | Path) -> "GINEncoder":
        """The encoder saved by :meth:`save_pretrained` (eval mode; ``.train()`` to fine-tune). A folder that is not
        one (no config, another model type, a config without ``in_dim``, weights that are not safetensors or do not
        match the config) is a ``ValueError`` naming the path and what is wrong."""
        cfg, state = load_pretrained(path, MODEL_TYPE, {"in_dim": POSITIVE_INT, "hidden": POSITIVE_INT,
                                                        "layers": POSITIVE_INT})
        enc = cls(cfg["in_dim"], cfg["hidden"], cfg["layers"])
        load_state(enc, state, path)  # names and shapes checked: a config that does not match the weights is named
        return enc.eval()


class ProjectionHead(nn.Sequential):
    """Linear(d, p) -> ReLU -> Linear(p, p) (GraphCL's ``proj_head``)."""

    def __init__(self, in_dim: int, out_dim: int | None = None) -> None:
        p = out_dim or in_dim
        super().__init__(nn.Linear(in_dim, p), nn.ReLU(inplace=True), nn.Linear(p, p))


class GraphCLModel(nn.Module):
    """Encoder + projection head; ``forward`` returns the projection, ``embed`` the encoder output."""

    def __init__(self, in_dim: int, hidden: int = 32, layers: int = 3, proj_dim: int | None = None) -> None:
        super().__init__()
        self.encoder = GINEncoder(in_dim, hidden, layers)
        self.head = ProjectionHead(self.encoder.out_dim, proj_dim)
        for m in self.modules():  # GraphCL: xavier-uniform weights, zero biases
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def embed(self, x: Tensor, edge_index: Tensor, batch: Tensor, num_graphs: int | None = None) -> Tensor:
        return self.encoder(x, edge_index, batch, num_graphs)  # (B, layers * hidden)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor, num_graphs: int | None = None) -> Tensor:
        return self.head(self.embed(x, edge_index, batch, num_graphs))  # (B, proj)
