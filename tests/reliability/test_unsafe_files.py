"""No code runs from files: every loader of checkpoints, weights and caches is handed a crafted
pickle whose unpickling would create a marker file; each refuses it (checkpoints, weights) or
rebuilds it with a warning naming the file (caches), and the marker never appears."""
from __future__ import annotations

import io
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.safeio import UnsafeFileError, load_arrays, load_tensors, save_arrays
from tests.reliability.images import image_folder


class _Payload:
    """Unpickling it calls ``open(marker, "w")``: the marker file appears iff code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (self.marker, "w"))


def _plant_torch(path: Path, marker: Path, key: str = "model") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({key: _Payload(marker), "epoch": 1}, path)
    return path


def _plant_pickle(path: Path, marker: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"data": _Payload(marker)}))
    return path


@pytest.fixture()
def marker(tmp_path: Path) -> Path:
    m = tmp_path / "PWNED"
    yield m
    assert not m.exists(), "a crafted file ran code"


def test_payload_works_without_protection(tmp_path: Path) -> None:
    """the crafted .pt under torch.load(weights_only=False) -> marker appears (the probe is live)"""
    m = tmp_path / "live"
    torch.load(_plant_torch(tmp_path / "evil.pt", m), weights_only=False)
    assert m.exists()


def test_load_tensors_refuses_payload(tmp_path: Path, marker: Path) -> None:
    """crafted .pt to suite.safeio.load_tensors -> UnsafeFileError naming the file, no code run"""
    p = _plant_torch(tmp_path / "evil.pt", marker)
    with pytest.raises(UnsafeFileError, match=r"evil\.pt is refused"):
        load_tensors(p)


def test_load_arrays_refuses_pickle(tmp_path: Path, marker: Path) -> None:
    """pickle planted as a .npz cache to load_arrays -> ValueError naming the file, no code run"""
    p = _plant_pickle(tmp_path / "cache.npz", marker)
    with pytest.raises(ValueError, match=r"cache\.npz is unreadable"):
        load_arrays(p)
    ok = save_arrays(tmp_path / "ok.npz", {"a": torch.arange(3)}, {"k": [1]})
    arrays, meta = load_arrays(ok)
    assert torch.equal(arrays["a"], torch.arange(3)) and meta == {"k": [1]}


def test_vision_eval_ckpt_refuses_payload(tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`suite vision eval --ckpt evil.pt` -> exit 2 with a one-line error naming the file, no code run"""
    from suite.cli import main

    p = _plant_torch(tmp_path / "evil.pt", marker, key="method")
    assert main(["vision", "eval", "--ckpt", str(p), "--no-registry"]) == 2
    err = capsys.readouterr().err.strip()
    assert "evil.pt" in err and "refused" in err and len(err.splitlines()) == 1


def test_vision_resume_refuses_planted_checkpoint(tmp_path: Path, marker: Path) -> None:
    """crafted checkpoint in a vision run folder (the run owner's layout, or the older epoch0001.pt), resume ->
    refused naming the file, no code run"""
    from vision.config import PretrainConfig
    from vision.train import pretrain

    cfg = PretrainConfig(dataset="digits", encoder="convnet", width=4, epochs=1, batch_size=32, max_steps_per_epoch=1,
                         optimizer="adam", out=str(tmp_path / "r"), registry=False, linear_probe=False,
                         geometry_batches=0, train_per_class=5)
    _plant_torch(tmp_path / "r" / "epoch0001.pt", marker, key="method")
    with pytest.raises(ValueError, match=r"epoch0001\.pt is refused"):
        pretrain(cfg)
    _plant_torch(tmp_path / "r" / "checkpoints" / "step-000000001.pt", marker, key="method")
    with pytest.raises(ValueError, match=r"step-000000001\.pt is refused"):
        pretrain(cfg)


def test_tu_eval_refuses_payload(tmp_path: Path, marker: Path) -> None:
    """`suite graph tu-eval evil.pt` (evaluate_checkpoint) -> ValueError naming the file, no code run"""
    from graph.tu.run import evaluate_checkpoint

    p = _plant_torch(tmp_path / "evil.pt", marker)
    with pytest.raises(ValueError, match=r"evil\.pt is refused"):
        evaluate_checkpoint(p)


def test_finetune_init_refuses_payload(tmp_path: Path, marker: Path) -> None:
    """`suite graph finetune-mol --init evil.pt` and a pretraining folder with a crafted encoder.pt -> refused, no code run"""
    from graph.mol.finetune import FinetuneMolConfig, finetune
    from graph.mol.model import load_mol_encoder as load_encoder

    p = _plant_torch(tmp_path / "evil.pt", marker, key="encoder")
    with pytest.raises(ValueError, match=r"evil\.pt is refused"):
        finetune(FinetuneMolConfig(init=str(p), registry=False))
    _plant_torch(tmp_path / "pre" / "encoder.pt", marker, key="encoder")
    with pytest.raises(ValueError, match=r"encoder\.pt is refused"):
        load_encoder(tmp_path / "pre")


def test_pretrain_mol_resume_refuses_payload(tmp_path: Path, marker: Path) -> None:
    """crafted epoch1.pt in a pretrain-mol --out, resume -> refused naming the file, no code run"""
    from graph.mol.pretrain import PretrainMolConfig, pretrain

    corpus = tmp_path / "c.smi"
    corpus.write_text("CCO\nCCN\nCCC\nc1ccccc1\n")
    _plant_torch(tmp_path / "out" / "epoch1.pt", marker)
    with pytest.raises(ValueError, match=r"epoch1\.pt is refused"):
        pretrain(PretrainMolConfig(corpus=str(corpus), out=str(tmp_path / "out"), epochs=2, batch_size=2, num_layers=2,
                                   emb_dim=4, registry=False, device="cpu"))


def test_molecule_cache_payload_rebuilt(tmp_path: Path, marker: Path) -> None:
    """pickle planted as the molecule cache -> warning naming the cache file, rebuilt from the SMILES, no code run"""
    from graph.mol.data import _cache_path, load_smiles_file

    src = tmp_path / "m.smi"
    src.write_text("CCO\nCCN\nc1ccccc1\n")
    first = load_smiles_file(src)
    cp = _cache_path(src, "hu", "limit=None|seed=0|col=None")
    assert cp.exists() and cp.suffix == ".npz"
    assert load_smiles_file(src).smiles == first.smiles  # read back from the cache
    _plant_pickle(cp, marker)
    with pytest.warns(UserWarning, match=rf"{cp.name}.*rebuilding"):
        again = load_smiles_file(src)
    assert again.smiles == first.smiles and torch.equal(again.x, first.x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_smiles_file(src)  # the rebuilt cache is valid


def test_text_head_refuses_payload(tiny_model_dir: Path, tmp_path: Path, marker: Path) -> None:
    """saved text encoder whose simcse_head.pt is a crafted pickle -> load_encoder refuses naming it, no code run"""
    from text.models import build_encoder, load_encoder, save_encoder
    from text.models.save import HEAD as SAVED
    from text.models.save import EARLIER

    HEAD = EARLIER.files[SAVED]  # the torch file of a model saved before safetensors

    out = save_encoder(build_encoder(str(tiny_model_dir), pooling="cls", head_at_test=True), tmp_path / "saved")
    (out / SAVED).unlink()
    _plant_torch(out / HEAD, marker)
    with pytest.raises(ValueError, match=rf"{HEAD} is refused"):
        load_encoder(out)


def test_text_embedding_cache_payload_rebuilt(tiny_model_dir: Path, marker: Path) -> None:
    """pickle planted as a text embedding cache (EncodeFn) -> warning naming the file, embeddings recomputed, no code run"""
    from text.eval.encode import EncodeFn
    from text.models import build_encoder

    enc = build_encoder(str(tiny_model_dir), pooling="cls", dropout=0.0).eval()
    texts = ["a man is playing", "the dog is running"]
    fn = EncodeFn(enc, cache=True)
    emb = fn(texts)
    path = fn._path(texts)
    _plant_pickle(path, marker)
    with pytest.warns(UserWarning, match=rf"{path.name}.*rebuilding"):
        again = EncodeFn(enc, cache=True)(texts)
    torch.testing.assert_close(again, emb)


def test_graph_text_embedding_cache_payload_rebuilt(tmp_path: Path, marker: Path) -> None:
    """pickle planted as cached_text_embeddings' file -> warning naming it, recomputed, no code run"""
    from suite.losses.graphs import cached_text_embeddings

    class _Model:
        def encode(self, texts, **kw):  # type: ignore[no-untyped-def]
            return torch.tensor([[float(len(t)), 1.0] for t in texts])

    emb = cached_text_embeddings(_Model(), ["a", "bb"], tmp_path, "m")
    (path,) = list(tmp_path.glob("text-emb-*"))
    _plant_pickle(path, marker)
    with pytest.warns(UserWarning, match=rf"{path.name}.*rebuilding"):
        again = cached_text_embeddings(_Model(), ["a", "bb"], tmp_path, "m")
    assert torch.equal(again, emb)


def _image_folder(root: Path) -> Path:
    return image_folder(root, size=8, per_class=2)


def test_image_cache_payload_rebuilt(tmp_path: Path, marker: Path) -> None:
    """pickle planted as the image-folder cache -> warning naming the file, images decoded again, no code run"""
    from vision.data import load_image_folder

    root = _image_folder(tmp_path / "imgs")
    first = load_image_folder(root)
    cache = Path(first.info["cache"])
    assert cache.exists() and cache.suffix == ".npz"
    _plant_pickle(cache, marker)
    with pytest.warns(UserWarning, match=rf"{cache.name}.*rebuilding"):
        again = load_image_folder(root)
    assert torch.equal(again.train_x, first.train_x) and again.classes == first.classes


def test_cifar_pickle_payload_refused(tmp_path: Path, marker: Path) -> None:
    """crafted CIFAR data_batch_1 (a pickle calling open) -> ValueError naming the file, no code run"""
    from vision.data import load_cifar_pickle

    d = tmp_path / "cifar-10-batches-py"
    _plant_pickle(d / "data_batch_1", marker)
    with pytest.raises(ValueError, match=r"data_batch_1 is refused"):
        load_cifar_pickle(d)


def test_tu_processed_cache_payload_rebuilt(tmp_path: Path, marker: Path) -> None:
    """crafted PyG processed data.pt in the TU cache (PyG itself would fall back to weights_only=False) -> warning, rebuilt, no code run"""
    from graph.tu.data import load_tu
    from suite.paths import cache_dir
    from tests.graph.synthetic import write_synthetic_tu

    root = write_synthetic_tu(tmp_path, name="EVIL", n_graphs=6)
    first = load_tu("EVIL", root)
    (p,) = list(cache_dir("TU").glob("EVIL-*/EVIL/processed/data.pt"))
    buf = io.BytesIO()
    torch.save({"x": _Payload(marker)}, buf)
    p.write_bytes(buf.getvalue())
    with pytest.warns(UserWarning, match=r"data\.pt is refused.*rebuilding"):
        again = load_tu("EVIL", root)
    assert torch.equal(again.labels, first.labels)


def test_checkpoint_rng_state_is_plain_data(tmp_path: Path) -> None:
    """save_checkpoint with every RNG state, read back with weights_only=True -> loads and restores numpy/python/torch draws"""
    import random

    from suite.train import load_checkpoint, rng_state, save_checkpoint, set_rng_state

    np.random.seed(5)
    random.seed(5)
    torch.manual_seed(5)
    p = save_checkpoint(tmp_path / "c.pt", {"rng": rng_state(), "config": {"loss": "macl"}})
    draws = (np.random.rand(3).tolist(), random.random(), torch.rand(2))
    np.random.seed(0)
    random.seed(0)
    set_rng_state(torch.load(p, weights_only=True)["rng"])  # plain torch.load, weights only
    assert (np.random.rand(3).tolist(), random.random()) == draws[:2]
    assert torch.equal(torch.rand(2), draws[2])
    assert load_checkpoint(p)["config"] == {"loss": "macl"}


def _write_cache_many(path: str, value: int) -> None:
    for _ in range(30):
        save_arrays(path, {"x": np.full(20_000, value)}, {"writer": value})


def test_two_processes_writing_one_cache_at_once_both_succeed(tmp_path):
    """two processes (two ranks featurising one corpus) write the same cache file at once, 30 times each -> neither
    fails (each writes its own temporary file; before, one's rename removed the other's shared temporary name),
    the file reads back whole, and no temporary file is left"""
    import multiprocessing as mp

    path = str(tmp_path / "c.npz")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_write_cache_many, args=(path, v)) for v in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    arrays, meta = load_arrays(path)
    assert int(arrays["x"][0]) == meta["writer"] and bool((arrays["x"] == meta["writer"]).all())
    assert sorted(q.name for q in tmp_path.iterdir()) == ["c.npz"]
