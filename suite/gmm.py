"""The t-SimCLR paper's Gaussian-mixture experiments (Hu et al. 2023, Sec. 3, Figure 1), at the paper's scale.

Two-dimensional synthetic data, no front-end's: the experiment probes the losses of the core themselves, so it lives
beside them. Its command stays ``suite vision gmm`` (the benchmark grid ``benchmarks/suites/gmm.yaml`` names it so,
and a job's identity holds its command), registered by :mod:`vision.cli`.

    suite vision gmm --experiment mixture2d --loss infonce      # Figure 1 (b, d): cosine SimCLR
    suite vision gmm --experiment mixture2d --loss simclr_l2    # Figure 1 (c, e): SimCLR with -l2 similarity
    suite vision gmm --experiment mixture2d --loss tsimclr      # t-SimCLR
    suite vision gmm --experiment order1d --loss infonce        # Sec. 3.1.3: the order a -> b -> c -> d

Data (Sec. 3, "Gaussian mixture setting"): x ~ (1/m) sum_i N(mu_i, sigma^2 I_d); the positive of x from
component i is an independent draw x' ~ N(mu_i, sigma^2 I_d) ("direct sampling"); the negatives are the
other samples of the batch, as in SimCLR. Every step draws a fresh batch (an unlimited sample, as the paper's
population setting). ``mixture2d``: d = 2, m = 5, sigma = 0.1; the paper does not give the means (its
Figure 1a shows four nearby clusters and one far away), so they are fixed here: (0, 0), (1, 0), (0, 1),
(1, 1) and (3, 3). ``order1d``: d = 1, m = 4, mu_i = i (i = 1..4), sigma = 0.1.

Encoder: a fully connected ReLU network (the paper's "fully connected ReLU network"; width not given:
2 hidden layers of 64 here) to d_z = 2. The cosine losses' features are the normalised outputs (on the
circle, Figure 1b), the others' the raw outputs.

Evaluation (fresh samples, a generator of its own):
- ``id_acc``: linear probe (standardised features, logistic regression) fit on 1,000 in-distribution
  samples, scored on 1,000 others;
- ``ood_acc``: the paper's out-of-distribution mean shift, +``shift`` in every dimension (Figure 1 d, e:
  48.4 % cosine, 100 % l2): the linear probe fit and scored on the shifted features (two samples of 1,000),
  i.e. how separable the shifted clusters stay in feature space;
- ``ood_transfer_acc``: the in-distribution probe scored on the shifted features (recorded beside);
- ``order1d``: ``ordered`` = 1 when the clusters' mean features, taken around the circle, come in the
  order a -> b -> c -> d (either direction), else 0; chance is 1/3 (three cyclic orders of four points up
  to reflection).
``points`` (a run option) logs that many in-distribution and shifted feature points (x, y, label) to the
registry (metrics ``point_x``, ``point_y``, ``point_label``, split ``id`` / ``ood``, step = point index) for
the report's pictures.

A run goes through the run owner (:func:`suite.train.run.run`, :class:`GMMTask`): it is seeded there (the training
batches are the run's generator ``data``, the evaluation samples its generator ``eval``), its folder is ``--out`` or
``runs/<task>/<experiment>-m<m>-<loss>-s<seed>-<hash>`` (``device``, ``points``, ``out``, ``resume``,
``checkpoint_every``, ``keep_checkpoints`` are run options: never hashed, never recorded in the experiment config), a
checkpoint is written every ``checkpoint_every`` steps and at the end (``checkpoints/step-<N>.pt``, removed once the
run has finished unless ``keep_checkpoints``), an interrupted run resumes (config-checked), and the registry row is
the owner's. Nothing is exported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from suite.eval.points import log_points
from suite.presets import loss_label, make_loss
from suite.train.run import RunContext, RunResult, Task, Training, run

MEANS = {"mixture2d": ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (3.0, 3.0)),
         "order1d": ((1.0,), (2.0,), (3.0,), (4.0,))}
@dataclass
class GMMConfig:
    RUN_OPTIONS: ClassVar[tuple[str, ...]] = ("device", "points", "out", "resume", "checkpoint_every",
                                              "keep_checkpoints")
    experiment: Literal["mixture2d", "order1d"] = "mixture2d"
    loss: str = "infonce"
    loss_hparams: dict[str, Any] = field(default_factory=dict, metadata={"help": "overrides of the loss preset"})
    sigma: float = 0.1
    hidden: list[int] = field(default_factory=lambda: [64, 64], metadata={"help": "widths of the hidden ReLU layers"})
    dz: int = 2
    steps: int = 3000
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    shift: float = 1.0
    n_eval: int = 1000
    seed: int = 0
    device: str = "cpu"
    points: int = field(default=0, metadata={"help": "feature points per split logged to the registry (pictures)"})
    out: str = field(default="", metadata={"help": "run folder (default: runs/<task>/<experiment>-m<m>-<loss>-s<seed>-"
                                                   "<hash>)"})
    resume: bool = True
    checkpoint_every: int = field(default=0, metadata={"help": "checkpoint every N steps (0: at the end only)"})
    keep_checkpoints: int = field(default=0, metadata={"help": "checkpoints kept once the run has finished (0: none)"})

    def __post_init__(self) -> None:
        bad = {k: getattr(self, k) for k, ok in (("sigma", self.sigma > 0), ("dz", self.dz >= 1),
                                                  ("steps", self.steps >= 1), ("batch_size", self.batch_size >= 2),
                                                  ("lr", self.lr > 0), ("n_eval", self.n_eval >= 10),
                                                  ("points", 0 <= self.points <= self.n_eval),
                                                  ("hidden", all(h >= 1 for h in self.hidden)),
                                                  ("checkpoint_every", self.checkpoint_every >= 0),
                                                  ("keep_checkpoints", self.keep_checkpoints >= 0)) if not ok}
        if bad:
            raise ValueError(f"invalid GMM setting(s): {bad} (sigma, lr > 0; dz, steps >= 1; batch_size >= 2; "
                             f"n_eval >= 10; 0 <= points <= n_eval; hidden widths >= 1; checkpoint_every, "
                             f"keep_checkpoints >= 0)")
        if self.experiment not in MEANS:
            raise ValueError(f"experiment must be one of {sorted(MEANS)}, got {self.experiment!r}")


def mixture(means: Tensor, sigma: float, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """(x, x', labels): n samples, each with a positive drawn independently from its own component."""
    labels = torch.randint(len(means), (n,), generator=gen)
    mu = means[labels]
    x = mu + sigma * torch.randn(mu.shape, generator=gen)
    x2 = mu + sigma * torch.randn(mu.shape, generator=gen)
    return x, x2, labels


def encoder(d_in: int, hidden: list[int], dz: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(d_in, h), nn.ReLU()]
        d_in = h
    return nn.Sequential(*layers, nn.Linear(d_in, dz))


def linear_accuracy(f_train: Tensor, y_train: Tensor, f_test: Tensor, y_test: Tensor) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(f_train.double().numpy(), y_train.numpy())
    return float(clf.score(f_test.double().numpy(), y_test.numpy()))


def cyclic_order(features: Tensor, labels: Tensor, m: int) -> list[int]:
    """The clusters in the order their mean features come around the features' centre, starting at 0."""
    centres = torch.stack([features[labels == k].mean(0) for k in range(m)])  # (m, 2)
    rel = centres - centres.mean(0)
    order = torch.atan2(rel[:, 1], rel[:, 0]).argsort().tolist()
    i = order.index(0)
    return order[i:] + order[:i]


def is_ordered(order: list[int]) -> bool:
    """a -> b -> c -> d around the circle, in either direction."""
    m = len(order)
    return order == list(range(m)) or order == [0] + list(range(m - 1, 0, -1))


TASKS = {"mixture2d": "gmm-2d", "order1d": "gmm-1d-order"}  # the registry task of each experiment


class GMMTask(Task[GMMConfig]):
    """One mixture experiment as a :class:`suite.train.run.Task` (task ``gmm-2d`` with headline ``ood_acc``, or
    ``gmm-1d-order`` with headline ``ordered``; split ``test``). One epoch of ``steps`` fresh batches drawn from the
    run's generator ``data``; the evaluation samples come from its generator ``eval``. The run owner seeds, places,
    checkpoints (every ``checkpoint_every`` steps and at the end; none kept unless ``keep_checkpoints``), resumes and
    records it; nothing is exported."""

    modality, eval_split = "synthetic", "test"

    def __init__(self, cfg: GMMConfig) -> None:
        self.name = TASKS[cfg.experiment]  # type: ignore[misc]
        self.primary = ("ood_acc" if cfg.experiment == "mixture2d" else "ordered", "test")  # type: ignore[misc]

    def dataset(self, cfg: GMMConfig) -> str:
        return f"{cfg.experiment}-m{len(MEANS[cfg.experiment])}"

    def loss_name(self, cfg: GMMConfig) -> str:
        return loss_label("gmm", cfg.loss)

    def build(self, cfg: GMMConfig, ctx: RunContext[GMMConfig]) -> Training:
        device = ctx.device
        self.means = means = torch.tensor(MEANS[cfg.experiment])  # (m, d)
        m, d = means.shape
        if cfg.dz != 2 and cfg.experiment == "order1d":
            raise ValueError("order1d reads the order around a circle: it needs dz = 2")
        loss = make_loss("gmm", cfg.loss, cfg.loss_hparams, provides=()).loss
        if loss.multi_view or loss.requires:
            raise ValueError(f"loss {cfg.loss!r} needs {'views' if loss.multi_view else loss.requires}: the mixture "
                             f"experiments take two-view losses without extra inputs")
        self.net = net = encoder(d, list(cfg.hidden), cfg.dz).to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        data_gen = ctx.generator("data")  # a fresh batch every step

        def step(_: int) -> Tensor:
            x, x2, _ = mixture(means, cfg.sigma, cfg.batch_size, data_gen)  # (B, d) each
            return loss(net(x.to(device)), net(x2.to(device)))

        return Training(net, opt, lambda ep: list(range(cfg.steps)), step, epochs=1, loss=loss,
                        size=lambda _: cfg.batch_size, rate_name="samples_per_s", checkpoint_unit="step")

    def evaluate(self, cfg: GMMConfig, ctx: RunContext[GMMConfig], training: Training) -> dict[str, float]:
        net, loss, device, means = self.net, training.loss, ctx.device, self.means
        m = len(means)

        @torch.no_grad()
        def features(x: Tensor) -> Tensor:
            z = net(x.to(device)).float().cpu()  # (n, dz)
            return F.normalize(z, dim=-1) if loss.hypersphere else z

        net.eval()
        eg = ctx.generator("eval")  # evaluation samples: their own stream
        sets = {name: mixture(means, cfg.sigma, cfg.n_eval, eg) for name in ("fit", "test", "ood_fit", "ood_test")}
        f = {k: features(x + (cfg.shift if k.startswith("ood") else 0.0)) for k, (x, _, _) in sets.items()}
        y = {k: lab for k, (_, _, lab) in sets.items()}
        metrics = {"id_acc": linear_accuracy(f["fit"], y["fit"], f["test"], y["test"]),
                   "ood_acc": linear_accuracy(f["ood_fit"], y["ood_fit"], f["ood_test"], y["ood_test"]),
                   "ood_transfer_acc": linear_accuracy(f["fit"], y["fit"], f["ood_test"], y["ood_test"]),
                   "final_loss": ctx.engine.last_loss}  # type: ignore[union-attr]
        if cfg.experiment == "order1d":
            order = cyclic_order(f["test"], y["test"], m)
            metrics["ordered"] = float(is_ordered(order))
            metrics["order_code"] = float("".join(map(str, order)))  # e.g. 123 for a -> b -> c -> d
        pos = F.pairwise_distance(*(features(sets["test"][i]) for i in (0, 1))).mean()
        metrics["alignment"] = float(pos)
        if ctx.run is not None:
            for split, key in (("id", "test"), ("ood", "ood_test")):
                log_points(ctx.run, f[key][:cfg.points], y[key][:cfg.points], split)
        return metrics


def run_gmm(cfg: GMMConfig, registry: Any = None) -> RunResult:
    """Train and evaluate one mixture experiment through the run owner (``registry`` as :func:`suite.train.run.run`
    takes it: None the default registry, False no row); its test metrics are the result's ``metrics``."""
    return run(GMMTask(cfg), cfg, registry=registry)
