"""A pretrained encoder's evaluation by its run's protocol: kNN and the linear probe on backbone features, the
geometry of projections (:func:`evaluate`; streamed data: :func:`vision.streamed.evaluate_streamed`), the same at
the end of a run, every ``eval_every`` epochs and for a checkpoint (:func:`run_evaluation`); what produced each
metric (:func:`eval_protocol`) and the check of the evaluation's options (:func:`check_eval_options`); the 2-D
projections (:func:`projections_2d`) and class similarities (:func:`class_similarities`) logged at the end."""
from __future__ import annotations

import torch
from torch import Tensor

from suite.config import is_number
from suite.train import data_workers
from suite.train.seeding import derive_seed, forked_rng
from vision.config import PretrainConfig
from vision.data import ImageData, class_subset_indices
from vision.eval import ClassificationEvaluator, GeometryEvaluator
from vision.models import Encoder
from vision.sources import is_streamed
from vision.stream import EVAL_RESIZE, Skips
from vision.streamed import StreamedData, evaluate_streamed
from vision.transforms import EvalTransform, Recipe, ViewAugment


def check_eval_options(cfg: PretrainConfig) -> None:
    """The evaluation's options against the data (a ``ValueError`` naming the option): ``--eval-dataset`` and
    ``--probe sgd`` take streamed data; the probe's rate and epochs."""
    if not is_streamed(cfg.dataset) and (cfg.eval_dataset or cfg.probe != "features"):
        raise ValueError(f"--eval-dataset and --probe sgd apply to streamed data (folder: or wds:), "
                         f"not {cfg.dataset!r}")
    if not (is_number(cfg.probe_lr) and cfg.probe_lr > 0) or not (isinstance(cfg.probe_epochs, int)
                                                                    and cfg.probe_epochs >= 1):
        raise ValueError(f"--probe-lr must be > 0 and --probe-epochs >= 1, got {cfg.probe_lr!r} and "
                         f"{cfg.probe_epochs!r}")


def eval_protocol(cfg: PretrainConfig, size: int) -> dict[str, str]:
    """What produced each evaluation metric, keyed by its name (the names stay ``knn_acc`` / ``linear_acc``, the
    registry tables' keys), with ``data`` the bank, the test split and the crops: recorded with the registry row
    (run options ``eval_protocol``) and shown on the model card. ``size``: the recipe's crop size."""
    streamed = is_streamed(cfg.dataset)
    crops = f"centre {size} of resize {round(size * EVAL_RESIZE)}" if streamed else f"images resized to {size}"
    ev = cfg.eval_dataset or cfg.dataset
    bank = f"{ev} train split" + (f", {cfg.eval_train_per_class}/class" if cfg.eval_train_per_class else "")
    test = (f"{cfg.val_per_class}/class held out of the train split" if cfg.val_per_class else
            f"{ev} {'val/ or test/' if ev.lower().startswith('folder:') else 'test split'}"
            + (f", {cfg.eval_test_per_class}/class" if cfg.eval_test_per_class else ""))
    out = {"knn_acc": f"knn k={cfg.knn_k} t={cfg.knn_t:g} (cosine, weighted votes, backbone features)",
           "data": f"bank {bank}; test {test}; {crops}"}
    if cfg.linear_probe and cfg.probe == "sgd" and streamed:
        sched = ("Nesterov momentum 0.9, cosine (SimCLR's)" if cfg.probe_schedule == "simclr" else
                 "momentum 0.9, /10 at 60% and 80% (MoCo's)")
        out["linear_acc"] = (f"probe=sgd epochs={cfg.probe_epochs} lr={cfg.probe_lr:g} ({sched}; random resized crops "
                             f"0.08-1 + flips at {size}, frozen backbone)")
    elif cfg.linear_probe:
        out["linear_acc"] = "probe=features (logistic regression C=1 on standardised frozen backbone features)"
    return out


def evaluate(model: Encoder, data: ImageData, recipe: Recipe, device: torch.device, *, knn_k: int = 200,
             knn_t: float = 0.1, linear: bool = True, batch_size: int = 512, seed: int = 0,
             geometry_batches: int = 20) -> dict[str, float]:
    """kNN / linear-probe accuracy on backbone features (bank: ``data``'s training split) and the
    geometry of projections, on ``data``'s test split."""
    tf = EvalTransform(recipe).to(device)
    was_training = model.training
    model.eval()
    train_x, train_y = data.train_x, data.train_y

    def feats(x: Tensor) -> Tensor:
        return model.features(tf(x.to(device))).float()

    clf = ClassificationEvaluator(train_x, train_y, data.test_x, data.test_y, data.num_classes, knn_k, knn_t, linear,
                                  batch_size)
    out = clf(feats)
    if geometry_batches > 0:
        aug = ViewAugment(recipe, views=2).to(device)

        def project(v: Tensor) -> Tensor:
            return model(v.to(device)).float()

        bs = min(256, data.test_x.shape[0])
        out.update(GeometryEvaluator(data.test_x.to(device), aug, batch_size=bs, max_batches=geometry_batches,
                                     seed=seed)(project))
    model.train(was_training)
    return out


def run_evaluation(cfg: PretrainConfig, model: Encoder, data: ImageData | StreamedData, recipe: Recipe,
                   device: torch.device, *, linear: bool, skips: Skips | None = None) -> dict[str, float]:
    """The run's evaluation of ``model`` by ``cfg``'s protocol (:func:`eval_protocol`): kNN, the probe ``cfg.probe``
    and the geometry, the same at the end of a run and for ``suite vision eval --ckpt`` of its checkpoint. Torch's
    global generator is seeded from ``cfg.seed`` inside (and left as it was outside), so what draws from it (the
    probe's initial weights) is the same whatever ran before."""
    kw = dict(knn_k=cfg.knn_k, knn_t=cfg.knn_t, linear=linear, batch_size=cfg.eval_batch_size, seed=cfg.seed,
              geometry_batches=cfg.geometry_batches)
    with forked_rng(derive_seed(cfg.seed, stream="evaluation")):
        if isinstance(data, StreamedData):
            return evaluate_streamed(model, data, recipe, device, skips=skips, probe=cfg.probe,
                                     probe_epochs=cfg.probe_epochs, probe_lr=cfg.probe_lr,
                                     probe_schedule=cfg.probe_schedule,
                                     workers=cfg.workers if cfg.workers >= 0 else data_workers(device),
                                     **kw)  # type: ignore[arg-type]
        return evaluate(model, data, recipe, device, **kw)  # type: ignore[arg-type]


@torch.no_grad()
def projections_2d(model: Encoder, data: ImageData, recipe: Recipe, device: torch.device, n: int,
                   normalise: bool) -> tuple[Tensor, Tensor]:
    """(projections (n', 2), labels) of ``n // classes`` test images per class (a fixed subset), L2-normalised
    for the hypersphere losses (what their loss sees)."""
    idx = class_subset_indices(data.test_y, max(1, n // data.num_classes), seed=0)
    was = model.training
    model.eval()
    z = torch.cat([model(EvalTransform(recipe).to(device)(data.test_x[b].to(device))).float().cpu()
                   for b in idx.split(512)])
    model.train(was)
    return (torch.nn.functional.normalize(z, dim=-1) if normalise else z), data.test_y[idx]


@torch.no_grad()
def class_similarities(model: Encoder, data: ImageData, recipe: Recipe, device: torch.device,
                       per_class: int) -> dict[str, float]:
    """Mean cosine similarity of backbone features between every pair of classes over ``per_class`` test images
    of each (a fixed subset; :mod:`vision.eval.class_sim`), as ``sim_<i>_<j>`` metrics."""
    from vision.eval.class_sim import as_metrics, class_similarity

    idx = class_subset_indices(data.test_y, per_class, seed=0)
    was = model.training
    model.eval()
    h = torch.cat([model.features(EvalTransform(recipe).to(device)(data.test_x[b].to(device))).float().cpu()
                   for b in idx.split(512)])
    model.train(was)
    return as_metrics(class_similarity(h, data.test_y[idx], data.num_classes))
