"""suite.integrations.sentence_transformers: core losses inside SentenceTransformerTrainer, on a tiny
random BERT (offline)."""
from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

st = pytest.importorskip("sentence_transformers")
datasets = pytest.importorskip("datasets")
pytest.importorskip("accelerate")

from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer  # noqa: E402

import suite.losses as L  # noqa: E402
from suite.integrations.sentence_transformers import (CACRLoss, CachedSuiteLoss, MACLLoss, SuiteLoss,  # noqa: E402
                                                      TSimCLRLoss, XCLRLoss, log_diagnostics)
from suite.objectives import sup_simcse_loss  # noqa: E402
from suite.presets import preset  # noqa: E402

from .conftest import WORDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]


def _model(path: Path) -> SentenceTransformer:
    t = Transformer(str(path), max_seq_length=32)
    return SentenceTransformer(modules=[t, Pooling(t.get_embedding_dimension(), "mean")], device="cpu")


def _graph(c: int) -> torch.Tensor:
    g = torch.nn.functional.normalize(torch.randn(c, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    return (g @ g.T).fill_diagonal_(1.0)


def _dataset(kind: str) -> datasets.Dataset:
    s, s2, s3 = _sentences(16), _sentences(16, 1), _sentences(16, 2)
    if kind == "views2":  # unsupervised SimCSE: the same sentence twice
        return datasets.Dataset.from_dict({"a": s, "b": s})
    if kind == "views3":
        return datasets.Dataset.from_dict({"a": s, "b": s, "c": s})
    if kind == "triplets":
        return datasets.Dataset.from_dict({"anchor": s, "positive": s2, "negative": s3})
    if kind == "labelled":  # pairs with a class id (supcon) / a row of a class graph (xclr)
        return datasets.Dataset.from_dict({"a": s, "b": s, "label": [i % 4 for i in range(16)]})
    raise AssertionError(kind)


def _train(model, loss, data, tmp: Path, steps: int = 8) -> tuple[list[float], SentenceTransformerTrainer]:
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp / "out"), max_steps=steps, per_device_train_batch_size=8, learning_rate=2e-3,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, seed=0, disable_tqdm=True,
        dataloader_drop_last=True)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=loss)
    log_diagnostics(trainer)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h], trainer


CASES = {  # name -> (loss factory, dataset kind)
    "macl": (lambda m: MACLLoss(m), "views2"),
    "cacr": (lambda m: CACRLoss(m), "views3"),
    "xclr": (lambda m: XCLRLoss(m, graph=_graph(4)), "labelled"),
    "tsimclr": (lambda m: TSimCLRLoss(m), "views2"),
    "infonce-triplets": (lambda m: SuiteLoss(m, "infonce"), "triplets"),
    "supcon": (lambda m: SuiteLoss(m, "supcon"), "labelled"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trainer_loss_finite_and_decreasing(case, tiny_model_dir, tmp_path):
    """SentenceTransformerTrainer, 8 steps with each seed loss on a toy set -> finite losses that go down."""
    make, kind = CASES[case]
    model = _model(tiny_model_dir)
    losses, _ = _train(model, make(model), _dataset(kind), tmp_path)
    assert len(losses) == 8 and all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-3:]) < sum(losses[:3]), losses


def test_diagnostics_logged_and_model_reloads(tiny_model_dir, tmp_path):
    """MACL trained by the trainer, saved, reloaded -> macl_tau/alignment in the logs; same embeddings after reload."""
    model = _model(tiny_model_dir)
    loss = MACLLoss(model)
    _, trainer = _train(model, loss, _dataset("views2"), tmp_path, steps=3)
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert all("macl_tau" in h and "macl_alignment" in h for h in logged)
    assert logged[-1]["macl_tau"] == pytest.approx(loss.diagnostics()["tau"], abs=1e-4)  # one step per log
    model.save(str(tmp_path / "saved"))
    again = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    s = _sentences(6, 5)
    torch.testing.assert_close(again.encode(s, convert_to_tensor=True), model.encode(s, convert_to_tensor=True))
    card = (tmp_path / "saved" / "README.md").read_text()
    assert "MACLLoss" in card and '"tau0": 0.05' in card and "huang2023macl" in card


def test_cacr_entropies_logged(tiny_model_dir, tmp_path):
    """CACR with three view columns in the trainer -> its entropies and terms reach the logs."""
    model = _model(tiny_model_dir)
    _, trainer = _train(model, CACRLoss(model), _dataset("views3"), tmp_path, steps=1)
    h = [h for h in trainer.state.log_history if "loss" in h][0]
    assert {"cacr_cond_entropy", "cacr_pos_weight_entropy", "cacr_attraction", "cacr_repulsion"} <= set(h)


def _features(model, cols: list[list[str]]) -> list[dict]:
    return [model.tokenize(c) for c in cols]


@pytest.mark.parametrize("name", ["macl", "cacr", "xclr", "tsimclr", "supcon"])
def test_value_equals_core_loss(name, tiny_model_dir):
    """The wrapper on tokenised columns (eval mode) -> exactly the core loss (text preset) on model.encode embeddings."""
    model = _model(tiny_model_dir).eval()
    s, s2 = _sentences(8), _sentences(8, 3)
    cols = [s, s2, s] if name == "cacr" else [s, s2]
    labels = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]) if name in ("xclr", "supcon") else None
    kw = {"graph": _graph(4)} if name == "xclr" else {}
    wrapper = SuiteLoss(model, name, **kw)
    with torch.no_grad():
        got = wrapper(_features(model, cols), labels)
    emb = [model.encode(c, convert_to_tensor=True) for c in cols]
    core_name, hp = preset("text", name)
    core = L.build(core_name, **hp)
    extra = {"labels": labels} if name == "supcon" else {}
    if name == "xclr":
        extra = {"similarity": _graph(4)[labels][:, labels]}
    want = core(torch.stack(emb), **extra) if core.multi_view else core(emb[0], emb[1], **extra)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_triplets_are_supervised_simcse(tiny_model_dir):
    """(anchor, positive, negative) columns with infonce -> supervised SimCSE (text front-end's objective), with
    gradient through the hard negatives; with macl -> hard negatives as detached queue entries."""
    from text.methods.simcse import sup_simcse_loss as text_sup

    model = _model(tiny_model_dir).eval()
    cols = [_sentences(8), _sentences(8, 1), _sentences(8, 2)]
    z = [model.encode(c, convert_to_tensor=True).clone().requires_grad_() for c in cols]
    got = SuiteLoss(model, "infonce", hard_negative_weight=0.5).compute_loss_from_embeddings(z, None)
    torch.testing.assert_close(got, text_sup(*z, 0.05, 0.5))
    torch.testing.assert_close(got, sup_simcse_loss(*z, 0.05, 0.5))
    got.backward()
    assert z[2].grad is not None and z[2].grad.abs().sum() > 0
    z = [t.detach().requires_grad_() for t in z]
    m = SuiteLoss(model, "macl").compute_loss_from_embeddings(z, None)
    torch.testing.assert_close(m, L.build(*preset("text", "macl")[:1], **preset("text", "macl")[1])(z[0], z[1], queue=z[2]))
    m.backward()
    assert z[2].grad is None


def test_xclr_guide_graph(tiny_model_dir):
    """XCLRLoss with a frozen guide model -> the core X-CLR with the guide's cosine graph of the anchors."""
    model = _model(tiny_model_dir).eval()
    guide = _model(tiny_model_dir).eval()
    with torch.no_grad():  # make the guide differ from the model
        for p in guide.parameters():
            p.add_(0.05 * torch.randn_like(p))
    s, s2 = _sentences(8), _sentences(8, 3)
    loss = XCLRLoss(model, guide=guide)
    with torch.no_grad():
        got = loss(_features(model, [s, s2]), None)
    g = torch.nn.functional.normalize(guide.encode(s, convert_to_tensor=True), dim=1)
    sim = (g @ g.T).clamp(-1, 1).fill_diagonal_(1.0)
    core = L.build(*preset("text", "xclr")[:1], **preset("text", "xclr")[1])
    want = core(model.encode(s, convert_to_tensor=True), model.encode(s2, convert_to_tensor=True), sim)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not any(p.requires_grad for p in guide.parameters())


def test_cached_matches_uncached_gradients(tiny_model_dir):
    """CachedSuiteLoss (GradCache, mini-batches of 3) vs SuiteLoss on the same batch (eval mode) -> same loss and
    parameter gradients."""
    s = _sentences(8)
    grads, values = [], []
    for cached in (False, True):
        model = _model(tiny_model_dir).eval()
        loss = CachedSuiteLoss(model, "macl", mini_batch_size=3) if cached else SuiteLoss(model, "macl")
        v = loss(_features(model, [s, _sentences(8, 4)]), None)
        v.backward()
        values.append(v.detach())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(values[0], values[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_bad_inputs_are_clear_errors(tiny_model_dir):
    """One column, an unused label column, supcon without labels, unknown hparams, guide on macl -> ValueError."""
    model = _model(tiny_model_dir).eval()
    f = _features(model, [_sentences(4), _sentences(4)])
    with pytest.raises(ValueError, match="needs >= 2 text columns"):
        SuiteLoss(model, "macl")(f[:1], None)
    with pytest.raises(ValueError, match="takes no labels"):
        SuiteLoss(model, "macl")(f, torch.arange(4))
    with pytest.raises(ValueError, match="needs a 'label' column"):
        SuiteLoss(model, "supcon")(f, None)
    with pytest.raises(ValueError, match="needs a similarity graph"):
        XCLRLoss(model)(f, None)
    with pytest.raises(ValueError, match="index the graph"):
        XCLRLoss(model, graph=_graph(4))(f, torch.tensor([0, 1, 2, 9]))
    with pytest.raises(ValueError, match="no hyper-parameter"):
        MACLLoss(model, tau=0.1)
    with pytest.raises(ValueError, match="guide= and graph="):
        SuiteLoss(model, "macl", graph=_graph(4))


def test_import_suite_does_not_need_sentence_transformers():
    """import suite, suite.losses, suite.presets, suite.objectives -> sentence_transformers not imported."""
    code = ("import sys, suite, suite.losses, suite.presets, suite.objectives, suite.integrations; "
            "assert 'sentence_transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_readme_example_runs(tiny_model_dir, tmp_path, monkeypatch):
    """The text README's "train with MACL in your own sentence-transformers pipeline" block -> runs as written
    (with the tiny model's path in place of the packaged model)."""
    text = (ROOT / "text" / "README.md").read_text()
    block = re.search(r"## Train with MACL in your own sentence-transformers pipeline.*?```python\n(.*?)```", text, re.S)
    assert block, "README example block missing"
    code = block.group(1)
    assert len(code.strip().splitlines()) <= 12
    code = re.sub(r"SentenceTransformer\(str\(default_backbone_path\(\)\)\)", f"SentenceTransformer({str(tiny_model_dir)!r})", code)
    code = code.replace("max_steps=100", "max_steps=2")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "runs" / "st-macl" / "final" / "modules.json").exists()


def test_bf16_training_finite(tiny_model_dir, tmp_path):
    """Trainer with bf16=True (autocast) and MACL -> finite losses and a finite tau (the core computes in float32)."""
    model = _model(tiny_model_dir)
    loss = MACLLoss(model)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=8, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, bf16=True, disable_tqdm=True)
    trainer = log_diagnostics(SentenceTransformerTrainer(model=model, args=args, train_dataset=_dataset("views2"), loss=loss))
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 3 and all(torch.isfinite(torch.tensor([h["loss"], h["macl_tau"]])).all() for h in logged)
