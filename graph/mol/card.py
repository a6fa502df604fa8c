"""The model card of a pretrained molecular encoder (the run owner writes it beside the exported weights)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.model_card import card_info


def mol_card(cfg: Any, label: str, loss: Any, epoch: int, n_molecules: int, steps: int | None = None,
             run: Any = None, folder: str = "<out>/export") -> dict[str, Any]:
    """The card's fields. ``cfg`` a ``PretrainMolConfig``, ``label`` the loss name of the run, ``loss`` the core loss
    object."""
    return card_info(
        title=f"Molecular GIN pretrained with the {label} loss ({cfg.featurizer} features)",
        what=(f"Hu et al.'s GIN ({cfg.num_layers} layers x {cfg.emb_dim}, mean pooling) pretrained by "
              f"contrastive-suite's GraphCL transfer front-end ({cfg.aug1} / {cfg.aug2}, ratio {cfg.aug_ratio}), "
              f"epoch {epoch} of {cfg.epochs}."),
        modality="graph", loss=label, loss_hparams=loss.hparams(), data=f"{Path(cfg.corpus).name} (SMILES)",
        n_train=n_molecules, steps=steps, seed=cfg.seed, run=run,
        extra={"epochs": epoch, "batch_size": cfg.batch_size, "lr": cfg.lr, "featurizer": cfg.featurizer},
        load=("from graph.mol.model import MolGIN\n"
              f"encoder = MolGIN.from_pretrained({folder!r}, dropout=0.5)  # plain nn.Module; .train() to fine-tune\n"
              "h = encoder(batch.x, batch.edge_index, batch.edge_attr)  # (N, D) node states; encoder.embed(b): (B, D)"))
