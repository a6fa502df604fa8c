"""X-CLR on an ImageNet-style folder: class folders named by WordNet id are captioned by their human names (the
shipped ImageNet-1K map or ``--class-names FILE``), an id neither names is refused in one line, and the run records
the names' source and fingerprint (issue 75, item 1). Generated folders only; no text model is loaded."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vision.graph as vg
from tests.vision.streamdata import _image
from vision.config import PretrainConfig
from vision.graph import IMAGENET_CLASSES, caption_names, read_class_names
from vision.streamed import prepare_stream
from vision.train import build_method, check_config, recipe_for


def _wnid_folder(root: Path, wnids: list[str]) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    for split in ("train", "val"):
        for c, w in enumerate(wnids):
            (root / split / w).mkdir(parents=True)
            for i in range(2):
                _image(rng, c, 36, 36, "RGB").save(root / split / w / f"{i}.JPEG")
    return root


def _graph_names(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Capture the class names :func:`vision.graph.class_graph` is built from (no sentence model is loaded)."""
    seen: list[list[str]] = []

    def fake(names: list[str], model: str = "", template: str = "a photo of a {}") -> torch.Tensor:
        seen.append([template.format(n) for n in names])
        return torch.eye(len(names))

    monkeypatch.setattr(vg, "class_graph", fake)
    return seen


def _build(cfg: PretrainConfig) -> torch.nn.Module:
    check_config(cfg)
    data, _ = prepare_stream(cfg)
    return build_method(cfg, data, recipe_for(cfg, data))


def test_shipped_map_holds_imagenet_1k() -> None:
    table = read_class_names(IMAGENET_CLASSES)
    assert len(table) == 1000 and all(k.startswith("n") and len(k) == 9 for k in table)
    assert table["n01440764"] == "tench" and table["n15075141"] == "toilet tissue"
    assert "# " in IMAGENET_CLASSES.read_text().splitlines()[0] and "timm" in IMAGENET_CLASSES.read_text()[:400]


def test_xclr_on_wordnet_folders_builds_its_graph_from_the_names(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _graph_names(monkeypatch)
    root = _wnid_folder(tmp_path / "in", ["n01440764", "n01443537", "n02085620"])
    method = _build(PretrainConfig(dataset=f"folder:{root}", loss="xclr", encoder="convnet", image_size=32,
                                   batch_size=4, device="cpu", registry=""))
    assert seen == [["a photo of a tench", "a photo of a goldfish", "a photo of a Chihuahua"]]
    rec = method.caption_names
    assert rec["count"] == 3 and "imagenet_classes.tsv" in rec["source"] and len(rec["sha256"]) == 64
    assert rec["first"] == ["tench", "goldfish", "Chihuahua"]


def test_unmapped_wordnet_id_is_refused_and_a_names_file_fixes_it(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _graph_names(monkeypatch)
    root = _wnid_folder(tmp_path / "in", ["n01440764", "n99999999"])
    cfg = PretrainConfig(dataset=f"folder:{root}", loss="xclr", encoder="convnet", image_size=32, batch_size=4,
                         device="cpu", registry="")
    with pytest.raises(ValueError, match=r"n99999999.*--class-names FILE") as err:
        _build(cfg)
    assert "\n" not in str(err.value)
    names = tmp_path / "names.tsv"
    names.write_text("# mine\nn01440764\ttench\nn99999999\tsea slug\n")
    method = _build(PretrainConfig(**{**cfg.__dict__, "class_names": str(names)}))
    assert seen[-1] == ["a photo of a tench", "a photo of a sea slug"]
    assert method.caption_names["source"] == f"--class-names {names}"
    # the labels graph needs no names; plain folder names stay as they are
    assert caption_names(["cat", "dog"]).names == ("cat", "dog")
    bad = tmp_path / "bad.tsv"
    bad.write_text("n01440764 tench\n")
    with pytest.raises(ValueError, match="line 1"):
        check_config(PretrainConfig(**{**cfg.__dict__, "class_names": str(bad)}))
