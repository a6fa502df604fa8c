"""The task tables of the report: every finished run's headline metric, grouped into cells of runs that differ only
in seed.

Rows are losses, split by the config keys the shipped suites vary on purpose (their grid keys: batch size, views,
projection size, ...). Any other config key whose value differs between a task's runs makes a separate setting:
cells never pool settings. :func:`collect` keeps each task's setting with the most runs, or every setting (the
history, one row per loss and setting) with ``all_settings``.
"""
from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from benchmarks.stats import std
from benchmarks.tables.claims import mean_std
from suite.registry import Registry
from suite.registry.queries import committed

# (modality, task prefix) -> candidate (metric, split) headline metrics, first present wins
HEADLINES: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("graph", "tu-graphcl", [("acc", "test")]),
    ("graph", "molnet-finetune", [("rocauc_last", "test")]),
    ("text", "simcse", [("avg", "test"), ("stsb", "test"), ("best_stsb_dev", "dev")]),
    ("text", "senteval", [("avg", "test"), ("stsb", "test")]),
    ("vision", "", [("knn_acc", "test"), ("linear_acc", "test")]),
]
LABELS = {"acc": "SVM accuracy (%)", "rocauc_last": "test ROC-AUC, last epoch (%)", "avg": "STS average Spearman (%)",
          "stsb": "STS-B test Spearman (%)", "best_stsb_dev": "STS-B dev Spearman, best step (%)",
          "knn_acc": "kNN accuracy (%)", "linear_acc": "linear-probe accuracy (%)"}
SKIP_TASKS = ("loss-bench", "mol-pretrain", "tu-graphcl-speed")
@dataclass
class Cell:
    values: list[float]
    loss: str = ""
    setting: int = 1  # index into the task's settings (1 = the one with most runs)
    rowkey: str = ""  # values of the suites' grid keys that vary in this task ("batch_size=64, views=5")
    name: str = ""  # the row label in the table
    hpkey: str = ""  # the loss hyper-parameters that vary between this loss's runs ("temperature=0.05")

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        """Sample std over seeds (NaN for one seed)."""
        return std(self.values)

    @property
    def err(self) -> float:
        """Error bar: the std, 0 for one seed."""
        return 0.0 if len(self.values) < 2 else self.std


# A run's setting is its recorded config (the experiment: run options are recorded apart, in run_options; runs
# recorded before that split are converted by `suite bench migrate`) less the keys that say which row and seed it
# is: its seed(s) (and nested ``*_seed`` keys), its loss, data set, and what a transfer or evaluation run starts
# from (the training data file, the pretrained encoder). Runs of one task that differ in any other key (batch size,
# views, epochs, profile, ...) are different settings: their numbers are never pooled as if they were seeds, and
# claims compare losses within one setting.
ROW_IDENTITY = frozenset({"seed", "seeds", "loss", "loss_hparams", "resolved", "dataset", "data", "init", "init_spec",
                          "run_id"})  # run_id: the training run an evaluation scored (its ``evaluated`` record)


@dataclass
class Table:
    """One task's headline metric: {dataset: {row label: Cell}} plus the legend of its settings."""
    by_ds: dict[str, dict[str, Cell]]
    settings: list[tuple[int, str]]  # (number of runs, "key=value, ...") for settings 1, 2, ... (with all_settings)
    latest: str = ""  # the setting shown (by default: the one with the most runs), "" if the task has one
    hidden: int = 0  # runs of other settings left out (none with all_settings)
    superseded: int = 0  # older runs of a setting and seed that a newer run of the same replaces (kept in the registry)
    versions: dict[str, int] = field(default_factory=dict)  # code version -> runs of it among the cells' runs


def row_keys() -> frozenset[str]:
    """Config keys the shipped suites vary on purpose (their ``grid`` keys, e.g. batch size, views): runs that
    differ in them are rows of one table, not settings. Any other key that differs is a setting."""
    import yaml

    from benchmarks.runner.suitefile import SUITES

    keys: set[str] = set()
    for f in sorted(SUITES.glob("*.yaml")):
        try:
            spec = yaml.safe_load(f.read_text()) or {}
        except yaml.YAMLError:
            continue
        for g in spec.get("jobs") or []:
            if isinstance(g, dict) and isinstance(g.get("grid"), dict):
                keys |= {str(k).replace("-", "_") for k in g["grid"]}
    return frozenset(keys - ROW_IDENTITY)


def _pct(v: float) -> float:
    return 100.0 * v if abs(v) <= 1.0 else v


def published() -> dict[tuple[str, str, str], float]:
    """(task prefix, dataset, loss) -> published number (%), from the front-end benchmarks' tables."""
    out: dict[tuple[str, str, str], float] = {}
    try:
        from benchmarks.tables.graph_tu import PUBLISHED as TU

        for ds, ((g, _), (m, _)) in TU.items():
            out[("tu-graphcl", ds, "graphcl")] = g
            out[("tu-graphcl", ds, "macl")] = m
    except Exception:  # a front-end extra missing: report without its published numbers
        pass
    try:
        from benchmarks.tables.graph_molnet import PUBLISHED as MOL

        for loss, row in MOL.items():
            for ds, v in row.items():
                out[("molnet-finetune", ds, loss)] = v
    except Exception:
        pass
    try:
        from benchmarks.tables.text_sts import PUBLISHED as TXT, STS_COLS

        for name, vals in TXT:
            loss = "macl" if "MACL" in name else "infonce"
            for col, v in zip(STS_COLS, vals):
                out[("simcse", col, loss)] = v
    except Exception:
        pass
    return out


def _setting(config: Any, prefix: str = "") -> dict[str, str]:
    """The run's setting: its config without ROW_IDENTITY keys, nested dicts flattened to ``a.b`` keys (a
    nested seed such as ``protocol.fold_seed`` is a seed too)."""
    cfg = config if isinstance(config, dict) else json.loads(config or "{}")
    if not isinstance(cfg, dict):
        return {}
    out: dict[str, str] = {}
    for k, v in cfg.items():
        if k in ROW_IDENTITY or k.endswith("_seed"):
            continue
        if isinstance(v, dict):
            out.update(_setting(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = json.dumps(v, sort_keys=True)
    return out


def collect(reg: Registry, all_settings: bool = False) -> dict[tuple[str, str, str], Table]:
    """{(modality, task, metric label): Table} of the headline metric over finished runs: the setting of each task
    with the most runs, or every setting with ``all_settings``."""
    hits: dict[tuple[str, str, str], list[tuple[str, str, dict[str, str], float, str]]] = defaultdict(list)
    version: dict[int, str] = {}  # id of a hit -> its run's code version
    # an evaluation run records what it scored in its config (``evaluated``: the training setting, a flattened key of
    # the setting, so an evaluation of a supervised model is never pooled with those of unsupervised ones); runs
    # recorded before that named the model only as a run option: their training run (same job hash) names the start
    # model and the training mode, which become part of the evaluation's setting
    trained = {r["config_hash"]: {k: json.loads(r["config"]).get(k) for k in ("backbone", "mode")}
               for r in reg.runs(status="finished", modality="text") if r["task"].startswith("simcse")}
    runs = [r for r in reg.runs(status="finished")
            if r["modality"] != "core" and not r["task"].startswith(SKIP_TASKS) and committed(r)]
    finals = reg.final_metrics_for([r["id"] for r in runs])
    for r in runs:
        fm = finals[r["id"]]
        for mod, prefix, cands in HEADLINES:
            if r["modality"] != mod or not r["task"].startswith(prefix):
                continue
            hit = next(((m, s) for m, s in cands if (m, s) in fm), None)
            if hit is None:
                break
            label = f"{LABELS.get(hit[0], hit[0])} [{hit[0]}, {hit[1]}]"
            setting = _setting(r["config"])
            if r["task"].startswith("senteval"):
                setting.update({k: str(v) for k, v in trained.get(r["config_hash"], {}).items() if v})
            cfg = json.loads(r["config"] or "{}") or {}
            scored = cfg.get("evaluated") or {}
            seed = scored.get("training_seed", r["seed"]) if isinstance(scored, dict) else r["seed"]  # a trained model
            hp = _setting(r["loss_hparams"])
            init = cfg.get("init_spec") or {}
            if isinstance(init, dict) and init.get("weights"):  # the encoder a fine-tuning started from: runs from
                hp["init_weights"] = str(init["weights"])      # other weights are another row, never more seeds
            hits[(mod, r["task"], label)].append((r["dataset"], r["loss"], setting, _pct(fm[hit]),
                                                  r["started_at"], hp, seed))
            version[id(hits[(mod, r["task"], label)][-1])] = str(r["code_version"] or "?")
            break
    keys = row_keys()
    out = {}
    for key, rows in hits.items():
        newest = _newest(rows)
        out[key] = _table(newest, keys, all_settings)
        out[key].superseded = len(rows) - len(newest)
        if all_settings:  # every newest run is in a cell (without: the shown setting's only; not counted)
            out[key].versions = dict(Counter(version[id(r)] for r in newest))
    return out


def _newest(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One run per (data set, loss, setting, hyper-parameters, seed): the newest. A setting run again (under newer
    code, by another suite) supersedes its older runs in every table; they stay in the registry."""
    latest: dict[str, tuple[Any, ...]] = {}
    for r in rows:
        ds, loss, setting, _, started, hp, seed = r
        key = json.dumps([ds, loss, setting, hp, seed], sort_keys=True, default=str)
        if key not in latest or str(started) > str(latest[key][4]):
            latest[key] = r
    return list(latest.values())


def _table(rows: list[tuple[Any, ...]], keys: frozenset[str] = frozenset(), all_settings: bool = True) -> Table:
    """Group one task's runs into cells by (data set, loss, row keys, setting). A key is a row key when the suites
    vary it on purpose (``keys``), else part of the setting, in both cases only when its value differs between
    runs of one data set (a key fixed per data set, e.g. the imbalance rule that names the column, is already
    told apart by the column). A loss hyper-parameter (rows may carry them as a sixth element) whose value
    differs between runs of one loss and data set is a row key of that loss's rows: runs with other
    hyper-parameters are never pooled as seeds. Without ``all_settings`` only the setting with the most runs (ties:
    the newest) is kept."""
    rows = [tuple(r) + (({},) * (6 - len(r))) + ((None,) if len(r) < 7 else ()) for r in rows]
    names = sorted({k for _, _, st, *_ in rows for k in st})
    per_ds: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    per_loss: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    hp_names = sorted({k for r in rows for k in r[5]})
    for ds, loss, st, _, _, hp, _ in rows:
        for k in names:
            per_ds[ds][k].add(st.get(k, "unset"))
        for k in hp_names:
            per_loss[(ds, loss)][k].add(hp.get(k, "unset"))
    varying = [k for k in names if any(len(v[k]) > 1 for v in per_ds.values())]
    hp_varying: dict[str, set[str]] = defaultdict(set)  # per loss: hyper-parameters that differ in one data set
    for (_, loss), vals in per_loss.items():
        hp_varying[loss] |= {k for k in hp_names if len(vals[k]) > 1}
    row_part = [k for k in varying if k in keys]
    set_part = [k for k in varying if k not in keys]
    sig = [tuple((k, st.get(k, "unset")) for k in set_part) for _, _, st, *_ in rows]
    rk = [", ".join(f"{k}={st.get(k, 'unset')}" for k in row_part) for _, _, st, *_ in rows]
    hk = [", ".join(f"{k}={hp.get(k, 'unset')}" for k in sorted(hp_varying[loss])) for _, loss, _, _, _, hp, _ in rows]
    counts = Counter(sig)
    hidden, latest = 0, ""
    if not all_settings and len(counts) > 1:
        # the setting with the most runs (a task's main grid, not a one-off check run after it); ties: the newest
        newest = max(range(len(rows)), key=lambda i: (counts[sig[i]], rows[i][4]))
        keep = [i for i in range(len(rows)) if sig[i] == sig[newest]]
        hidden = len(rows) - len(keep)
        latest = ", ".join(f"{k}={v}" for k, v in sig[newest])
        rows, sig, rk, hk = [rows[i] for i in keep], [sig[i] for i in keep], [rk[i] for i in keep], [hk[i] for i in keep]
        counts = Counter(sig)
    order = sorted(counts, key=lambda sg: (-counts[sg], sg))
    index = {sg: i for i, sg in enumerate(order, 1)}
    by_ds: dict[str, dict[str, Cell]] = defaultdict(dict)
    # one value per seed of a cell: the latest run (two suites running one setting with the same seed numbers, or a
    # re-run, are not independent seeds); runs without a seed each count
    latest_of: dict[tuple[str, str, Any], tuple[str, float]] = {}
    for i, ((ds, loss, _, v, started, _, seed), sg, key, hpk) in enumerate(zip(rows, sig, rk, hk)):
        both = ", ".join(x for x in (key, hpk) if x)
        name = loss + (f" [{both}]" if both else "") + (f" [s{index[sg]}]" if len(order) > 1 else "")
        by_ds[ds].setdefault(name, Cell([], loss, index[sg], key, name, hpk))
        slot = (ds, name, seed if seed is not None else ("run", i))
        if slot not in latest_of or str(started) >= latest_of[slot][0]:
            latest_of[slot] = (str(started), v)
    for (ds, name, _), (_, v) in latest_of.items():
        by_ds[ds][name].values.append(v)
    legend = [(counts[sg], ", ".join(f"{k}={v}" for k, v in sg)) for sg in order] if len(order) > 1 else []
    return Table(dict(by_ds), legend, latest, hidden)


def _fmt(c: Cell | None) -> str:
    return "–" if c is None else mean_std(c.values)


def _rows(by_ds: dict[str, dict[str, Cell]]) -> list[str]:
    cells = {name: c for d in by_ds.values() for name, c in d.items()}
    return sorted(cells, key=lambda n: (cells[n].loss, cells[n].rowkey, cells[n].setting))


