"""The pretrained molecular encoder as a plain folder with its model card (``pretrain_mol`` calls it
after each epoch's ``encoder.pt``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from suite.model_card import card_info, write_card


def save_pretrained_mol(folder: str | Path, encoder: nn.Module, cfg: Any, label: str, loss: Any, epoch: int,
                        n_molecules: int, steps: int | None = None, run: Any = None) -> Path:
    """``folder``: ``MolGIN.save_pretrained`` (safetensors + config.json) + README.md (the card).
    ``cfg`` a ``PretrainMolConfig``, ``label`` the loss name of the run, ``loss`` the core loss object."""
    out = encoder.save_pretrained(folder)  # type: ignore[operator]
    info = card_info(
        title=f"Molecular GIN pretrained with the {label} loss ({cfg.featurizer} features)",
        what=(f"Hu et al.'s GIN ({cfg.num_layers} layers x {cfg.emb_dim}, mean pooling) pretrained by "
              f"contrastive-suite's GraphCL transfer front-end ({cfg.aug1} / {cfg.aug2}, ratio {cfg.aug_ratio}), "
              f"epoch {epoch} of {cfg.epochs}."),
        modality="graph", loss=label, loss_hparams=loss.hparams(), data=f"{Path(cfg.corpus).name} (SMILES)",
        n_train=n_molecules, steps=steps, seed=cfg.seed, run=run,
        extra={"epochs": epoch, "batch_size": cfg.batch_size, "lr": cfg.lr, "featurizer": cfg.featurizer},
        load=("from graph.models.gin_mol import MolGIN\n"
              f"encoder = MolGIN.from_pretrained({str(out)!r}, dropout=0.5)  # plain nn.Module; .train() to fine-tune\n"
              "h = encoder(batch.x, batch.edge_index, batch.edge_attr)  # (N, D) node states; encoder.embed(b): (B, D)"))
    write_card(out, info)
    return out
