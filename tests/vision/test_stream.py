"""Streamed images (issue 65) on generated data only: an ImageNet-style folder of varied sizes and modes, WebDataset
shards written with webdataset's writer. Pretraining and evaluation from both, crops as torchvision defines them,
the same crops whatever the workers, a run resumed in the middle of an epoch equal to an uninterrupted one, two ranks
reading their own parts, and unreadable files named, counted and replaced."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.registry import Registry
from tests.vision.streamdata import image_folder, shards
from vision.config import PretrainConfig
from vision.sources import folder_source, open_source, shard_source
from vision.stream import Crops, EpochBatch, center_crop, crop_params, decode, resized_crop
from vision.train import pretrain


def _cfg(tmp_path: Path, dataset: str, **kw: object) -> PretrainConfig:
    base = dict(dataset=dataset, encoder="convnet", width=4, recipe="imagenet", image_size=32, epochs=1, batch_size=8,
                optimizer="adam", out=str(tmp_path / "run"), knn_k=5, geometry_batches=1, proj_dim=16, registry=False,
                seed=0)
    base.update(kw)
    return PretrainConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return image_folder(tmp_path_factory.mktemp("imgs"))


def test_resnet50_lars_imagenet_recipe_trains_from_a_folder_of_any_size(folder: Path, tmp_path: Path) -> None:
    """the issue's 'done when': a folder of JPEGs and PNGs of 40 to 90 pixels in five modes trains a ResNet-50 (slim,
    ImageNet stem) with LARS and the ImageNet recipe and evaluates by kNN and the linear probe; no image is skipped for
    its size (the in-memory loader kept 1 of 24 here)"""
    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    res = pretrain(_cfg(tmp_path, f"folder:{folder}", encoder="resnet50", width=4, stem="imagenet", image_size=64,
                        optimizer="lars", registry=True), reg)
    m = res.metrics
    assert {"knn_acc", "linear_acc", "alignment", "uniformity"} <= set(m) and 0 <= m["knn_acc"] <= 1
    assert res.info["data"]["train"] == 24 and res.info["data"]["test"] == 12
    logged = {(x["name"], x["split"]): x["value"] for x in reg.metrics(res.run_id)}
    assert logged[("train_images", "data")] == 24 and logged[("skipped_train_images", "data")] == 0
    assert logged[("unreadable_images", "data")] == 0
    sizes = {tuple(np.asarray(decode((p).read_bytes(), str(p))).shape) for p in folder.rglob("*.*")}
    assert len(sizes) > 20  # the folder really holds images of many sizes


def test_xclr_trains_from_caption_shards_with_a_per_sample_graph(tmp_path: Path) -> None:
    """X-CLR from image-caption shards: each batch's graph from its images' own captions (embedded once per source
    with the packaged sentence model, memory-mapped), txt and json captions; kNN and probe on labelled test shards"""
    pytest.importorskip("sentence_transformers")
    train = shards(tmp_path / "sh", n=24, per_shard=10)
    test = shards(tmp_path / "sh", n=9, per_shard=10, prefix="test", captions="json")
    cfg = _cfg(tmp_path, train, eval_dataset=test, loss="xclr")
    from vision import train as vt

    seen: list[torch.Tensor] = []
    real = vt.step_output

    def spy(*a, **k):  # noqa: ANN002, ANN003
        seen.append(a[5] if len(a) > 5 else k.get("captions"))
        return real(*a, **k)

    vt.step_output = spy
    try:
        res = pretrain(cfg)
    finally:
        vt.step_output = real
    assert "knn_acc" in res.metrics and res.info["data"]["test"] == 9
    caps = [c for c in seen if c is not None]
    assert caps and caps[0].shape == (8, 384)  # (batch, all-MiniLM-L6-v2's dimension)
    g = caps[0] @ caps[0].T
    assert torch.allclose(g.diagonal(), torch.ones(8), atol=1e-2) and g.min() < 0.99  # a graph, not the identity


def test_shards_need_an_evaluation_set(tmp_path: Path) -> None:
    train = shards(tmp_path / "sh", n=12)
    with pytest.raises(ValueError, match="--eval-dataset"):
        pretrain(_cfg(tmp_path, train))


def test_crops_follow_torchvisions_definition(folder: Path) -> None:
    """RandomResizedCrop's boxes lie inside the image with area in scale x H x W and aspect in ratio (rounding
    allowed); an image too narrow for the ratio takes torchvision's fallback, the centre crop at the clamped aspect;
    the resized crop is Pillow's crop then bilinear resize; evaluation: resize the short side, centre crop"""
    from PIL import Image

    rng = np.random.default_rng(0)
    for _ in range(500):
        h, w = (int(v) for v in rng.integers(20, 400, 2))
        top, left, ch, cw = crop_params(rng, h, w, (0.08, 1.0), (3 / 4, 4 / 3))
        assert 0 <= top and top + ch <= h and 0 <= left and left + cw <= w
        # area and aspect as drawn, up to the rounding of each side to whole pixels (else torchvision's fallback)
        fw, fh = (w, round(w / (3 / 4))) if w / h < 3 / 4 else ((round(h * 4 / 3), h) if w / h > 4 / 3 else (w, h))
        if (top, left, ch, cw) == ((h - fh) // 2, (w - fw) // 2, fh, fw):
            continue
        assert (ch + 0.5) * (cw + 0.5) >= 0.08 * h * w and ch * cw <= h * w
        assert (cw + 0.5) / (ch - 0.5 if ch > 1 else 0.5) >= 3 / 4 and (cw - 0.5) / (ch + 0.5) <= 4 / 3
    # 10 tries that cannot fit (a 1-pixel-high image): the centre crop, width clamped to 4/3 of the height
    assert crop_params(np.random.default_rng(0), 3, 300, (0.9, 1.0), (3 / 4, 4 / 3)) == (0, 148, 3, 4)
    im = Image.fromarray(np.random.default_rng(1).integers(0, 255, (50, 70, 3), dtype=np.uint8))
    out = resized_crop(im, (5, 7, 30, 40), 16)
    assert out.shape == (16, 16, 3)
    assert np.array_equal(out, np.asarray(im.crop((7, 5, 47, 35)).resize((16, 16), Image.BILINEAR)))
    ev = center_crop(im, 32, 37)  # short side 50 -> 37: (37, 51), centre 32
    ref = np.asarray(im.resize((51, 37), Image.BILINEAR).crop((10, 2, 42, 34)))
    assert np.array_equal(ev, ref)


def test_the_same_crops_whatever_the_workers_and_the_epoch_changes_them(folder: Path) -> None:
    """each sample's crops come from (seed, epoch, sample): decoded in this process or in 2 DataLoader workers, in
    another batch, the same pixels; another epoch draws others"""
    src = folder_source(folder, "train")
    crops = Crops(src, 24, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=3, iou=True)
    b = EpochBatch(0, torch.tensor([5, 1, 17, 9]))
    here = crops(b)
    assert here.images.shape == (2, 4, 3, 24, 24) and here.images.dtype == torch.uint8
    assert here.iou is not None and ((here.iou > 0) & (here.iou <= 1)).all()
    from suite.train.batches import Prefetch

    with_workers = list(Prefetch(crops, workers=2)([b, EpochBatch(0, torch.tensor([17]))]))
    assert torch.equal(with_workers[0].images, here.images) and torch.equal(with_workers[0].labels, here.labels)
    assert torch.equal(with_workers[1].images[:, 0], here.images[:, 2])  # sample 17 alone: the same crops
    assert not torch.equal(crops(EpochBatch(1, b.index)).images, here.images)


def test_a_run_resumed_in_the_middle_of_an_epoch_equals_an_uninterrupted_one(folder: Path, tmp_path: Path) -> None:
    """a checkpoint every step (--checkpoint-steps 1): a run started from the one written after step 2 of 3 (in the
    middle of the only epoch) ends with the uninterrupted run's parameters, bit for bit: the same samples, crops and
    augmentations"""
    full = pretrain(_cfg(tmp_path / "a", f"folder:{folder}", checkpoint_steps=1, keep_checkpoints=5,
                         geometry_batches=0, linear_probe=False))
    ck = sorted((full.folder / "checkpoints").glob("step-*.pt"))
    mid = [p for p in ck if p.name == "step-000000002.pt"]
    assert mid, [p.name for p in ck]
    part = tmp_path / "b" / "run" / "checkpoints"
    part.mkdir(parents=True)
    shutil.copy(mid[0], part / mid[0].name)
    res = pretrain(_cfg(tmp_path / "b", f"folder:{folder}", checkpoint_steps=1, keep_checkpoints=5,
                        geometry_batches=0, linear_probe=False))
    kept = sorted(p.name for p in (res.folder / "checkpoints").glob("step-*.pt"))
    assert kept == ["step-000000002.pt", "step-000000003.pt"], kept  # it went on from step 2, not from the start
    a = torch.load(sorted((full.folder / "checkpoints").glob("step-*.pt"))[-1], weights_only=True)["model"]
    b = torch.load(sorted((res.folder / "checkpoints").glob("step-*.pt"))[-1], weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert res.metrics["knn_acc"] == full.metrics["knn_acc"]


def test_two_ranks_read_their_own_parts(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """under torch.distributed each rank takes its own slice of the epoch's order (the engine's rule): two ranks'
    batches are disjoint, together they are the global batch, and each decodes only its own samples"""
    from suite import distributed as sd
    from suite.train.batches import epoch_batches

    src = folder_source(folder, "train")
    crops = Crops(src, 16, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=0)
    monkeypatch.setattr(sd, "world_size", lambda: 2)
    parts = []
    for r in (0, 1):
        monkeypatch.setattr(sd, "rank", lambda r=r: r)
        parts.append(epoch_batches(len(src), 4, 0, 0))
    monkeypatch.setattr(sd, "world_size", lambda: 1)
    monkeypatch.setattr(sd, "rank", lambda: 0)
    one = epoch_batches(len(src), 8, 0, 0)
    for k, (a, b) in enumerate(zip(*parts)):
        assert not set(a.tolist()) & set(b.tolist())
        assert sorted(a.tolist() + b.tolist()) == sorted(one[k].tolist())
        assert torch.equal(torch.cat([crops(EpochBatch(0, a)).images, crops(EpochBatch(0, b)).images], 1),
                           crops(EpochBatch(0, torch.cat([a, b]))).images)


def test_a_corrupt_jpeg_is_named_counted_and_replaced(folder: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """a JPEG cut in half and a file deleted after the index was read: one line naming each, the batch keeps its size
    (the next readable sample takes the place), the count recorded with the run (unreadable_images)"""
    root = tmp_path / "imgs"
    shutil.copytree(folder, root)
    bad = sorted((root / "train" / "c01").glob("*.JPEG"))[0]
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 3])
    src = folder_source(root, "train")
    gone = root / "train" / "c02" / sorted(p.name for p in (root / "train" / "c02").iterdir())[0]
    gone.unlink()
    crops = Crops(src, 16, 2, (0.2, 1.0), (3 / 4, 4 / 3), seed=0)
    out = crops(EpochBatch(0, torch.arange(len(src))))
    assert out.images.shape[1] == len(src) and len(out.skipped) == 2
    assert any(str(bad) in s and "cannot be decoded" in s for s in out.skipped)
    assert any(str(gone) in s and "cannot be read" in s for s in out.skipped)
    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    gone.write_bytes(b"")  # an empty file: unreadable too, and the folder keeps its index
    res = pretrain(_cfg(tmp_path, f"folder:{root}", registry=True, batch_size=24, linear_probe=False), reg)
    said = capsys.readouterr().out
    assert f"skipped: image {bad} cannot be decoded" in said and str(gone) in said
    logged = {(x["name"], x["split"]): x["value"] for x in reg.metrics(res.run_id)}
    assert logged[("unreadable_images", "data")] == 2


def test_empty_and_cut_off_shards_and_an_empty_class_folder_are_named_and_counted(tmp_path: Path) -> None:
    pattern = shards(tmp_path / "sh", n=30, per_shard=10)
    paths = sorted((tmp_path / "sh").glob("train-*.tar"))
    paths[1].write_bytes(paths[1].read_bytes()[:7000])  # cut off inside its samples
    paths[2].write_bytes(b"")  # empty
    with pytest.warns(UserWarning) as said:
        src = shard_source(pattern, cache=False)
    lines = [str(w.message) for w in said]
    assert any(str(paths[2]) in s and "empty" in s for s in lines)
    assert any(str(paths[1]) in s and "cut off" in s for s in lines)
    assert 10 <= len(src) < 20 and src.info["shard_problems"] >= 2
    root = image_folder(tmp_path / "f", classes=2, train=2, test=1)
    (root / "train" / "c09").mkdir()
    (root / "classes.txt").write_text("c00 c01 c09\n")
    with pytest.warns(UserWarning, match=r"c09: no image"):
        fs = open_source(f"folder:{root}", "train")
    assert fs.info["empty_classes"] == 1 and len(fs) == 4


def test_missing_data_is_one_line_naming_the_layout(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no folder .*train/<class>"):
        pretrain(_cfg(tmp_path, f"folder:{tmp_path / 'nowhere'}"))
    (tmp_path / "only" / "train" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no val/ or test/ split"):
        open_source(f"folder:{tmp_path / 'only'}", "test")
    with pytest.raises(ValueError, match=r"1 of 1 not found"):
        open_source(f"wds:{tmp_path}/x-{{0..0}}.tar", "train")


def test_a_streamed_folder_is_part_of_the_runs_identity(folder: Path, tmp_path: Path) -> None:
    """the run records its folder's identity (issue 69: reuse and resume decide on it): the same images elsewhere have
    the same digest, one image changed another"""
    import json

    from suite.inputs import data_identity

    reg = Registry(f"sqlite:///{tmp_path / 'reg.sqlite'}")
    res = pretrain(_cfg(tmp_path, f"folder:{folder}", registry=True, linear_probe=False, geometry_batches=0), reg)
    recorded = json.loads(reg.get(res.run_id)["run_options"])["data"]
    assert recorded["data"]["digest"] == data_identity(folder)["digest"]
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert data_identity(copy)["digest"] == recorded["data"]["digest"]
    img = sorted((copy / "train" / "c00").glob("*.JPEG"))[0]
    img.write_bytes(img.read_bytes()[:-10] + bytes(10))
    assert data_identity(copy)["digest"] != recorded["data"]["digest"]


def test_imagenets_linear_protocol_trains_a_classifier_on_augmented_crops(folder: Path, tmp_path: Path) -> None:
    """--probe sgd: a linear layer on the frozen backbone trained on random resized crops and flips of the bank (the
    backbone unchanged by it), evaluated on the centre crops; refused for data held in memory"""
    from vision import streamed

    seen: list[tuple[int, float]] = []
    real = streamed.sgd_probe

    def spy(model, *a, **k):  # noqa: ANN001, ANN002, ANN003
        before = [p.detach().clone() for p in model.parameters()]
        out = real(model, *a, **k)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))  # frozen
        seen.append((k["epochs"], out["linear_acc"]))
        return out

    streamed.sgd_probe = spy
    try:
        res = pretrain(_cfg(tmp_path, f"folder:{folder}", probe="sgd", probe_epochs=3, probe_lr=1.0,
                            geometry_batches=0))
    finally:
        streamed.sgd_probe = real
    assert seen and seen[0][0] == 3 and res.metrics["linear_acc"] == seen[0][1]
    assert 0 <= res.metrics["linear_train_acc"] <= 1
    with pytest.raises(ValueError, match="--probe sgd apply to streamed data"):
        pretrain(_cfg(tmp_path, "digits", probe="sgd"))


def test_sgd_probe_takes_simclrs_linear_protocol(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--probe-schedule simclr (issue 75: SimCLR-framework jobs take SimCLR's linear protocol, App. B.6): Nesterov
    momentum and a cosine over the steps from the given rate; moco: plain momentum, /10 at 60 % and 80 % of the
    epochs; the run records which"""
    import json

    from vision import streamed

    rates: dict[str, list[float]] = {}
    real_sgd = torch.optim.SGD

    def watched(kind: str):  # noqa: ANN202
        class SGD(real_sgd):  # type: ignore[misc, valid-type]
            def step(self, closure=None):  # noqa: ANN001, ANN202
                rates.setdefault(kind, []).append(self.param_groups[0]["lr"])
                assert self.param_groups[0]["nesterov"] is (kind == "simclr")
                return super().step(closure)
        return SGD

    for kind in ("simclr", "moco"):
        monkeypatch.setattr(streamed.torch.optim, "SGD", watched(kind))
        res = pretrain(_cfg(tmp_path / kind, f"folder:{folder}", probe="sgd", probe_epochs=5, probe_lr=1.0,
                            probe_schedule=kind, geometry_batches=0, registry=True))
        protocol = json.loads(Registry().get(res.run_id)["run_options"])["eval_protocol"]["linear_acc"]
        assert ("cosine (SimCLR's)" in protocol) is (kind == "simclr"), protocol
    monkeypatch.setattr(streamed.torch.optim, "SGD", real_sgd)
    cos, step = rates["simclr"], rates["moco"]
    assert cos[0] == pytest.approx(1.0) and all(a >= b for a, b in zip(cos, cos[1:])) and cos[-1] < 0.2
    assert len(set(cos)) == len(cos)  # a new rate every step
    assert sorted(set(step), reverse=True) == pytest.approx([1.0, 0.1, 0.01])  # epochs 0-2, 3, 4 of 5


def test_streamed_evaluation_fills_banks_and_times_its_stages(folder: Path, tmp_path: Path) -> None:
    """evaluate_streamed (issue 76): kNN on the bank filled in place gives the accuracy of the whole-bank kNN on the
    same features gathered as a list and concatenated, the probe trained in torch the accuracy of scikit-learn's, and
    each stage's seconds come with the metrics"""
    from suite.eval import knn_accuracy, linear_probe
    from vision.models import build_encoder
    from vision.stream import eval_images
    from vision.streamed import evaluate_streamed, prepare_stream
    from vision.transforms import EvalTransform, get_recipe

    cfg = _cfg(tmp_path, f"folder:{folder}")
    data, _ = prepare_stream(cfg)
    recipe = get_recipe("imagenet", 32)
    torch.manual_seed(0)
    model = build_encoder("convnet", 4, 32, 16)
    cpu = torch.device("cpu")
    m = evaluate_streamed(model, data, recipe, cpu, knn_k=5, geometry_batches=0, batch_size=7,
                          bank_dtype=torch.float32)
    assert {"eval_extract_s", "eval_knn_s", "eval_probe_s"} <= set(m) and "eval_geometry_s" not in m
    assert all(m[k] > 0 for k in ("eval_extract_s", "eval_knn_s", "eval_probe_s"))
    tf = EvalTransform(recipe)
    model.eval()
    with torch.no_grad():
        tr, te = ([(model.features(tf(x)), y) for x, y in eval_images(s, 32, 7)] for s in (data.bank, data.test))
    (tr_x, tr_y), (te_x, te_y) = ((torch.cat([h for h, _ in b]), torch.cat([y for _, y in b])) for b in (tr, te))
    assert m["knn_acc"] == knn_accuracy(tr_x, tr_y, te_x, te_y, k=5, num_classes=data.num_classes)
    ref = linear_probe(tr_x, tr_y, te_x, te_y)
    assert abs(m["linear_acc"] - ref["test_acc"]) <= 1 / len(te_y) + 1e-9  # one test image at most
    half = evaluate_streamed(model, data, recipe, cpu, knn_k=5, geometry_batches=0, linear=False)  # fp16 bank
    assert half["knn_acc"] == m["knn_acc"] and "eval_probe_s" not in half
