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


def finetuned_card(cfg: Any, dataset: str, label: str, task: str, task_reason: str, targets: list[str],
                   scaling: Any, n_train: int, steps: int | None, run: Any, init: dict[str, Any] | None,
                   folder: str = "<run>", smiles_column: str = "") -> dict[str, Any]:
    """The card of a model fine-tuned on a user's CSV (``cfg`` a ``FinetuneMolConfig``; ``dataset`` its registry name,
    file name and content fingerprint; ``label`` the pretraining loss or "none"; ``scaling`` (mean, std) tensors of a
    regression's targets, or None)."""
    start = (f"the encoder of {init['spec'].get('path')} (pretrained with {label})" if init is not None
             else "a randomly initialised encoder (no pretraining)")
    metric = "ROC-AUC (labelled molecules only)" if task == "classification" else "RMSE and MAE in the targets' units"
    extra: dict[str, Any] = {"task": f"{task} ({task_reason})", "targets": ", ".join(targets), "split": cfg.split,
                             "epochs": cfg.epochs, "batch_size": cfg.batch_size, "lr": cfg.lr, "dropout": cfg.dropout,
                             "featurizer": cfg.featurizer if init is None else init["spec"]["featurizer"]}
    if scaling is not None:
        extra["target scaling (train part)"] = {t: {"mean": round(float(m), 6), "std": round(float(s), 6)}
                                               for t, m, s in zip(targets, scaling[0], scaling[1])}
    return card_info(
        title=f"Molecular GIN fine-tuned on {dataset} ({task}: {', '.join(targets)})",
        what=(f"Hu et al.'s GIN with a linear head, fine-tuned from {start} on {dataset} ({cfg.split} split), scored "
              f"with {metric}. Predictions of a regression are in the targets' own units (the head's output times "
              "the training part's standard deviation plus its mean); those of a classification are probabilities."),
        modality="graph", loss=label, loss_hparams={}, data=f"{dataset} (SMILES column {smiles_column or cfg.smiles_column!r})",
        n_train=n_train, steps=steps, seed=cfg.seed, run=run, extra=extra,
        load=(f"# suite graph predict --model {folder} --data new.csv --out preds.csv\n"
              "from graph.mol.predict import load_finetuned, predict_file\n"
              f"model = load_finetuned({folder!r})  # model.model: a MolPredictor in eval mode; model.targets, model.task\n"
              f"summary = predict_file({folder!r}, 'new.csv', out='preds.csv')  # one row per input row, in order"))
