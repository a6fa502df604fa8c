"""Model cards: one README rendered from a dict, for every model the suite saves (text, graph, vision).

A card records what the model is, the loss and its hyper-parameters, the data and how much of it,
the training steps, the seed, the code version, the evaluation metrics the registry holds for the
run, and how to load the model. Front-ends build the dict (:func:`card_info`) and call
:func:`write_card`; sentence-transformers models get the same facts through their own model-card
data (:func:`apply_to_sentence_transformer`), so the README they write shows them.

Example:
    >>> info = card_info(title="GraphCL-MACL GIN on MUTAG", modality="graph", loss="macl",
    ...                  loss_hparams={"tau0": 0.2}, data="MUTAG", n_train=188, steps=20, seed=0,
    ...                  load="GINEncoder.from_pretrained(path)", run=run)
    >>> write_card("runs/gin", info)   # runs/gin/README.md
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD = "README.md"


def registry_metrics(run: Any) -> dict[str, float]:
    """Last value of every metric of a registry run (``suite.registry.Run``), as ``"split/name"`` keys."""
    if run is None:
        return {}
    final = run.registry.final_metrics(run.id)
    return {(f"{split}/{name}" if split else name): float(v) for (name, split), v in sorted(final.items(), key=str)}


def card_info(*, title: str, modality: str, loss: str, loss_hparams: dict[str, Any], data: str, n_train: int | None,
              steps: int | None, seed: int | None, load: str, what: str = "", run: Any = None,
              metrics: dict[str, float] | None = None, extra: dict[str, Any] | None = None,
              citation: str = "", protocol: dict[str, str] | None = None) -> dict[str, Any]:
    """The card's fields. ``run`` (a registry run) fills ``run_id`` and the registry ``metrics``;
    ``metrics`` given here are added to them; ``extra`` holds further training facts (shown as a table);
    ``citation`` (BibTeX of the loss) is shown at the end; ``protocol`` ({metric name: how it was measured}) is shown
    beside each metric of that name (``test/knn_acc`` takes ``knn_acc``'s)."""
    from suite.registry import code_version

    m = {**registry_metrics(run), **(metrics or {})}
    return {"title": title, "what": what, "modality": modality, "loss": loss, "loss_hparams": dict(loss_hparams),
            "data": data, "n_train": n_train, "steps": steps, "seed": seed, "code_version": code_version(),
            "run_id": getattr(run, "id", None), "metrics": m, "load": load, "extra": dict(extra or {}),
            "citation": citation, **({"protocol": dict(protocol)} if protocol else {})}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list, tuple)):
        return f"`{json.dumps(v, sort_keys=True, default=str)}`"
    return "—" if v is None else str(v)


def render(info: dict[str, Any], *, header: bool = True) -> str:
    """Markdown card of ``info`` (see :func:`card_info`); ``header=False`` omits the front matter and
    title (for appending to another card)."""
    lines: list[str] = []
    if header:
        tags = ", ".join(json.dumps(t) for t in ("contrastive-learning", info.get("modality"), info.get("loss")) if t)
        lines += ["---", "library_name: contrastive-suite", f"tags: [{tags}]", "---", "", f"# {info['title']}", ""]
        if info.get("what"):
            lines += [info["what"], ""]
    lines += ["## Training (contrastive-suite)", "", "| | |", "|---|---|",
              f"| loss | `{info['loss']}` |", f"| hyper-parameters | {_fmt(info.get('loss_hparams', {}))} |",
              f"| data | {info.get('data')} |",
              f"| training examples | {_fmt(info.get('n_train'))} |", f"| steps | {_fmt(info.get('steps'))} |",
              f"| seed | {_fmt(info.get('seed'))} |", f"| code version | `{info.get('code_version')}` |",
              f"| registry run | {_fmt(info.get('run_id'))} |"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in info.get("extra", {}).items()]
    metrics = info.get("metrics") or {}
    lines += ["", "## Evaluation (from the registry)", ""]
    protocol = info.get("protocol") or {}
    if metrics and protocol:
        lines += ["| metric | value | protocol |", "|---|---|---|",
                  *[f"| {k} | {_fmt(v)} | {protocol.get(k.rsplit('/', 1)[-1], '')} |" for k, v in metrics.items()]]
    elif metrics:
        lines += ["| metric | value |", "|---|---|", *[f"| {k} | {_fmt(v)} |" for k, v in metrics.items()]]
    else:
        lines.append("No metrics recorded for this run.")
    lines += ["", "## How to load", "", "```python", info["load"].strip(), "```", ""]
    if info.get("citation") and header:
        lines += ["## Citation", "", "```bibtex", info["citation"].strip(), "```", ""]
    return "\n".join(lines)


def card_path(target: str | Path) -> Path:
    """Where the card of ``target`` goes: ``<dir>/README.md`` for a model folder, ``<stem>.md`` beside a
    checkpoint file (several checkpoints may share a folder)."""
    p = Path(target)
    return p / CARD if p.is_dir() or not p.suffix else p.with_suffix(".md")


def write_card(target: str | Path, info: dict[str, Any]) -> Path:
    """Render ``info`` and write it as the card of ``target`` (a model folder or a checkpoint file)."""
    path = card_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(info))
    return path


def apply_to_sentence_transformer(model: Any, info: dict[str, Any]) -> None:
    """Fill a SentenceTransformer's model-card data from ``info`` (name, training data with its size
    and loss, hyper-parameters incl. steps, seed and code version, citations), so the README that
    ``model.save`` writes records them. Call :func:`append_to_card` after saving for the registry
    metrics and loading snippet."""
    data = model.model_card_data
    data.local_files_only = True  # never look the data set names up on the Hub
    data.model_name = info["title"]
    hp = json.dumps(info.get("loss_hparams", {}), indent=4, sort_keys=True, default=str)
    data.train_datasets = [{"name": info.get("data"), "size": info.get("n_train"), "columns": ["sentence"],
                            "loss": {"fullname": f"suite.losses.{info['loss']}", "config_code": f"```json\n{hp}\n```"}}]
    facts = {"loss": info["loss"], "steps": info.get("steps"), "seed": info.get("seed"),
             "code_version": info.get("code_version"), "registry_run": info.get("run_id"), **info.get("extra", {})}
    data.all_hyperparameters = {k: v for k, v in facts.items() if v is not None}
    data.non_default_hyperparameters = dict(data.all_hyperparameters)
    if info.get("citation"):
        data.citations = {info["loss"]: info["citation"]}


def append_to_card(folder: str | Path, info: dict[str, Any]) -> Path:
    """Append the suite's training, evaluation and loading sections to ``folder/README.md``."""
    path = Path(folder) / CARD
    head = path.read_text() if path.exists() else ""
    path.write_text(head.rstrip() + "\n\n" + render(info, header=not head))
    return path
