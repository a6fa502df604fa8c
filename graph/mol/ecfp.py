"""The fingerprint baseline of MoleculeNet transfer: Morgan fingerprints (ECFP4: RDKit, radius 2, 2,048 bits) and a
scikit-learn random forest per task, on the same molecules, scaffold split and seeds as the GNN fine-tuning
(:mod:`graph.mol.finetune`), recorded as a registry run of the same task (``molnet-finetune``, loss ``ecfp-rf``) so
that the MoleculeNet table shows it as a row beside no pretraining and the pretrained encoders.

- **molecules**: :func:`graph.mol.data.load_moleculenet` (the GNN path: a molecule RDKit or the featuriser rejects is
  skipped there and here), so the split (:func:`graph.mol.splits.split`, scaffold 80/10/10) is the same one;
- **model**: one ``RandomForestClassifier`` per task (500 trees, ``class_weight="balanced"`` by default, every other
  setting scikit-learn's default, ``n_jobs=1``), trained on that task's labelled training molecules only (missing
  labels masked, as the GNN's BCE masks them); a task whose training labels have one class predicts that class's
  frequency (a constant: it scores no AUC above 0.5);
- **score**: test (and valid) ROC-AUC averaged over the tasks with both classes (:class:`graph.mol.rocauc.RocAuc`,
  the GNN path's evaluator), logged as ``rocauc_last`` (test), the metric the table and the claims read;
- **seed**: the forest's ``random_state`` (the scaffold split is deterministic: the seed changes only the forest).

Shapes: fingerprints (N, n_bits) uint8; y (N, T) float, NaN = missing -> scores (N, T).
Example: >>> res = ecfp_mol(EcfpMolConfig(dataset="bbbp", seed=0))   # one registry run; res.metrics["rocauc_last"]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from suite.config import RUN_OPTION, RunOptions
from suite.train.run import RunContext, RunResult, Task, evaluation

METHOD = "ecfp-rf"  # the registry's loss name of the baseline, the table's row
CLASS_WEIGHTS = ("balanced", "none")


@dataclass
class EcfpMolConfig(RunOptions):
    RUN_DEFAULTS: ClassVar[dict[str, Any]] = {"keep_checkpoints": 0}
    dataset: str = "bbbp"
    seed: int = field(default=0, metadata={"help": "the forest's random_state (the scaffold split is deterministic)"})
    split: str = "scaffold"
    radius: int = field(default=2, metadata={"help": "Morgan radius (2: ECFP4)"})
    n_bits: int = field(default=2048, metadata={"help": "fingerprint length"})
    n_estimators: int = field(default=500, metadata={"help": "trees per task"})
    class_weight: str = field(default="balanced", metadata={"help": "balanced | none"})
    featurizer: str = field(default="hu", metadata={"help": "the GNN featuriser whose kept molecules are used (the "
                                                            "same molecules and split as the fine-tuning)"})
    data_root: str | None = field(default=None, metadata={"help": "folder holding the MoleculeNet CSV files "
                                                                   "(default: $SUITE_DATA/moleculenet)", RUN_OPTION: True})


def check_config(cfg: EcfpMolConfig) -> None:
    """Refuse settings no forest can use, before any data is read (``ValueError`` naming the field)."""
    from graph.mol.splits import SPLITS
    from suite.config import check_ints

    check_ints(cfg, {"radius": 0, "n_bits": 1, "n_estimators": 1})
    if cfg.class_weight not in CLASS_WEIGHTS:
        raise ValueError(f"class_weight must be one of {CLASS_WEIGHTS}, got {cfg.class_weight!r}")
    if cfg.split not in SPLITS:
        raise ValueError(f"unknown split {cfg.split!r}; choose from {SPLITS}")


def fingerprints(smiles: list[str], radius: int = 2, n_bits: int = 2048) -> np.ndarray:
    """Morgan bit vectors, (N, n_bits) uint8; a SMILES RDKit cannot parse gets all zeros (the GNN path has already
    dropped those it could not featurise)."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    RDLogger.DisableLog("rdApp.*")
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    for i, s in enumerate(smiles):  # RDKit is per molecule
        mol = Chem.MolFromSmiles(s)
        if mol is not None:
            out[i] = gen.GetFingerprintAsNumPy(mol)
    return out


def forest_scores(x: np.ndarray, y: np.ndarray, train: np.ndarray, seed: int, n_estimators: int = 500,
                  class_weight: str = "balanced", score: np.ndarray | None = None) -> np.ndarray:
    """Per task, a random forest fit on the task's labelled training rows; P(class 1) for the rows ``score`` (default
    every row). Shapes: x (N, B), y (N, T) NaN = missing, train (n,) and score (m,) indices -> (m, T).

    The bits go in as a sparse matrix (about 1.5 % of ECFP4's bits are set): scikit-learn's sparse splitter sorts only
    the set bits at a node and grows the same trees as on the dense array (the same scores, bit for bit, on every
    Tox21 and SIDER task checked; tests/graph/test_mol_ecfp.py), about 3x faster on Tox21."""
    from scipy.sparse import csr_matrix
    from sklearn.ensemble import RandomForestClassifier

    xs = csr_matrix(x)
    xp = xs if score is None else xs[score]  # predicting only the rows read: ~0.5 s a ToxCast task saved
    scores = np.zeros((xp.shape[0], y.shape[1]), dtype=np.float64)
    for t in range(y.shape[1]):  # one forest per task
        rows = train[~np.isnan(y[train, t])]
        labels = y[rows, t].astype(int)
        if len(np.unique(labels)) < 2:  # one class (or none) in training: a constant score
            scores[:, t] = float(labels.mean()) if len(labels) else 0.5
            continue
        rf = RandomForestClassifier(n_estimators=n_estimators, n_jobs=1, random_state=seed,
                                    class_weight=None if class_weight == "none" else class_weight)
        rf.fit(xs[rows], labels)
        scores[:, t] = rf.predict_proba(xp)[:, list(rf.classes_).index(1)]
    return scores


class EcfpMolTask(Task[EcfpMolConfig]):
    """The baseline as an evaluation-only run (:func:`suite.train.run.evaluation`): task ``molnet-finetune``, loss
    ``ecfp-rf``, headline the test ROC-AUC (``rocauc_last``, as the fine-tuning's)."""

    modality, name, primary = "graph", "molnet-finetune", ("rocauc_last", "test")

    def __init__(self) -> None:
        self.info: dict[str, float] = {}

    def loss_name(self, cfg: EcfpMolConfig) -> str:
        return METHOD

    def evaluate(self, cfg: EcfpMolConfig, ctx: RunContext[EcfpMolConfig], training: Any) -> dict[str, float]:
        from graph.mol.data import load_moleculenet
        from graph.mol.rocauc import RocAuc
        from graph.mol.splits import split as make_split

        check_config(cfg)
        t0 = time.perf_counter()
        graphs = load_moleculenet(cfg.dataset, cfg.featurizer, cfg.data_root)
        if graphs.y is None or not graphs.tasks:
            raise ValueError(f"{cfg.dataset}: no labels")
        train, valid, test = make_split(graphs.smiles, cfg.split,  # as the fine-tuning: seeded only when random
                                        seed=cfg.seed if cfg.split in ("random", "random_scaffold") else 0)
        x = fingerprints(graphs.smiles, cfg.radius, cfg.n_bits)  # (N, n_bits)
        y = graphs.y.double().numpy()  # (N, T), NaN = missing
        t1 = time.perf_counter()
        va, te = valid.numpy(), test.numpy()
        s = forest_scores(x, y, train.numpy(), cfg.seed, cfg.n_estimators, cfg.class_weight,
                          score=np.concatenate([va, te]))  # (n_valid + n_test, T): only the rows scored
        fit_s = time.perf_counter() - t1
        ev = RocAuc()
        out = {}
        for name, idx, part in (("valid", va, s[:len(va)]), ("test", te, s[len(va):])):
            try:
                out[name] = ev(torch.from_numpy(y[idx]), torch.from_numpy(part))["rocauc"]
            except ValueError:  # no task with both classes in this part
                out[name] = float("nan")
        if out["valid"] == out["valid"]:
            ctx.log({"rocauc": out["valid"]}, split="valid")
        self.info = {"molecules": float(len(graphs)), "skipped": float(graphs.skipped),
                     "non_numeric_labels": float(graphs.bad_labels), "tasks": float(len(graphs.tasks)),
                     "fit_s": fit_s, "total_s": time.perf_counter() - t0}
        ctx.log(self.info, split="info")
        self.scores = out
        return {"rocauc_last": out["test"]} if out["test"] == out["test"] else {}


def ecfp_mol(cfg: EcfpMolConfig, registry: Any = None) -> RunResult:
    """The baseline on ``cfg.dataset`` with ``cfg.seed``: one registry run (``registry``: as :func:`evaluation`)."""
    check_config(cfg)
    task = EcfpMolTask()
    res = evaluation(task, cfg, registry=registry, folder="")
    res.info = {"dataset": cfg.dataset, "seed": cfg.seed, "loss": METHOD, **task.info,
                "test_rocauc": task.scores["test"], "valid_rocauc": task.scores["valid"]}
    return res
