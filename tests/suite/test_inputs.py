"""What a run reads (suite.inputs): an export folder's identity is its files, not the record or card that describe the
run that wrote them, and a run's config fields name the exported models it reads."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from suite.inputs import files_digest, input_identities, input_identity


def _export(folder: Path, weights: bytes, run_id: str = "r1") -> Path:
    exp = folder / "export"
    (exp / "tokenizer").mkdir(parents=True)
    (exp / "model.safetensors").write_bytes(weights)
    (exp / "config.json").write_text('{"dim": 4}')
    (exp / "tokenizer" / "vocab.txt").write_text("a\nb\n")
    (exp / "run.json").write_text(json.dumps({"run_id": run_id, "metrics": {"train/mol_per_s": 101.3}}))
    (exp / "README.md").write_text("card: 101.3 molecules/s\n")
    return exp


def test_digest_is_the_files_not_their_description(tmp_path):
    """two exports with the same weights, config and tokenizer from two runs (other run id, timings, card) -> one
    digest; one byte of the weights, a tokenizer file or a file name changed -> another (a rewrite with the same
    bytes is read again and gives the same digest)"""
    a, b = _export(tmp_path / "a", b"\x00\x01\x02"), _export(tmp_path / "b", b"\x00\x01\x02", run_id="r2")
    (b / "run.json").write_text(json.dumps({"run_id": "r2", "metrics": {"train/mol_per_s": 55.0}}))
    (b / "README.md").write_text("another card\n")
    assert files_digest(a) == files_digest(b)
    digest = files_digest(a)
    (a / "model.safetensors").write_bytes(b"\x00\x01\x03")
    assert files_digest(a) != digest
    (a / "model.safetensors").write_bytes(b"\x00\x01\x02")
    os.utime(a / "model.safetensors", ns=(1, 1))
    assert files_digest(a) == digest
    (a / "tokenizer" / "vocab.txt").write_text("a\nc\n")
    assert files_digest(a) != digest
    shutil.copy(b / "tokenizer" / "vocab.txt", a / "tokenizer" / "vocab.txt")
    (a / "tokenizer" / "vocab.txt").rename(a / "tokenizer" / "vocab2.txt")
    assert files_digest(a) != digest


@dataclass
class _Cfg:
    init: str = "none"
    model: str = "all-MiniLM-L6-v2"
    data_root: str = ""
    out: str = ""
    epochs: int = 1


def test_identities_of_the_config_fields_that_name_an_export(tmp_path, monkeypatch):
    """a config whose init names an export folder (itself or its parent, relative or models:NAME), a model a hub name,
    a data folder with no record, out its own folder -> only init is an input, with the run that made it and its
    files; the run's own folder is never its input; a record that is not JSON -> ValueError naming the file"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SUITE_MODELS", str(tmp_path / "models"))
    exp = _export(tmp_path / "enc", b"w")
    (tmp_path / "data").mkdir()
    _export(tmp_path / "own", b"o")
    want = {"init": {"path": "enc", "run_id": "r1", "files": files_digest(exp)}}
    assert input_identities(_Cfg(init="enc", data_root="data", out="own")) == want
    assert input_identities(_Cfg(init="enc/export"))["init"]["files"] == files_digest(exp)
    assert input_identities(_Cfg(init="own"), own=tmp_path / "own") == {}
    shutil.copytree(tmp_path / "enc", tmp_path / "models" / "enc")
    assert input_identity("models:enc") == {"path": "models:enc", "run_id": "r1", "files": files_digest(exp)}
    assert input_identity("models:nope") is None and input_identity("none") is None
    (exp / "run.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"enc/export/run.json: not a run record"):
        input_identities(_Cfg(init="enc"))


def test_same_weights_from_another_commit_are_the_same_files(tmp_path, monkeypatch):
    """an encoder rebuilt at another commit with the same weights and config -> the same digest, so the jobs that read
    it are not run again; the commit is in the run record, beside the files. Other weights -> another digest."""
    import torch

    import suite.registry as registry
    from suite.pretrained import save_pretrained

    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    digests = []
    for i, commit in enumerate(["1896ae31f5d6", "62c16306ed12"]):
        monkeypatch.setattr(registry, "code_version", lambda root=None, c=commit: c)
        out = save_pretrained(module, tmp_path / f"e{i}", "probe", {"dim": 3})
        assert "code_version" not in json.loads((out / "config.json").read_text())
        digests.append(files_digest(out))
    assert digests[0] == digests[1]
    with torch.no_grad():
        module.weight[0, 0] += 1.0
    assert files_digest(save_pretrained(module, tmp_path / "e2", "probe", {"dim": 3})) != digests[0]
