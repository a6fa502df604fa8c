"""Loss settings as a user gives them: at build, on a built loss, through presets, through supervised SimCSE and
the sentence-transformers adapter. Each setting is honoured as recorded or refused with a ValueError naming it."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import suite.losses as L
from suite.objectives import sup_simcse_loss


# ----------------------------------------------------------------------------- a built loss (issue 26, item 2)

def test_chunk_size_set_on_a_built_loss():
    """`loss.chunk_size = -1` (and 0, 2.5, 'big') on a built loss -> ValueError naming chunk_size; a valid value is used"""
    loss = L.build("infonce")
    for bad in (-1, 0, 2.5, "big", True):
        with pytest.raises(ValueError, match="chunk_size"):
            loss.chunk_size = bad
    assert loss.chunk_size == "auto"
    a, b = torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    dense = loss(a, b)
    loss.chunk_size = 2  # a valid tile size is taken and gives the dense value
    assert loss.chunk_size == 2 and torch.allclose(loss(a, b), dense)


@pytest.mark.parametrize("name,attr,bad", [
    ("infonce", "temperature", 0.0), ("infonce", "temperature", float("nan")), ("infonce", "negatives", "some"),
    ("dcl", "temperature", -1.0), ("macl", "tau0", 1e-5), ("macl", "alpha", float("inf")),
    ("cacr", "t_neg", -2.0), ("cacr", "negatives", "all"), ("xclr", "target_temperature", 0.0),
    ("tsimclr", "t_df", 0.0), ("hard_negative", "tau_plus", 1.5), ("align_uniform", "t", "warm"),
    ("supcon", "temperature", None), ("cmc", "temperature", float("-inf")),
])
def test_hyperparameter_set_on_a_built_loss(name, attr, bad):
    """a bad temperature, tau0, arrangement, ... set on a built loss -> ValueError naming it, the old value kept"""
    loss = L.build(name)
    before = getattr(loss, attr)
    with pytest.raises(ValueError, match=attr):
        setattr(loss, attr, bad)
    assert getattr(loss, attr) == before


def test_valid_setting_on_a_built_loss_is_used_and_recorded():
    """`loss.temperature = 0.5` on a built loss -> the value is used (equals a loss built with it) and recorded"""
    a, b = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    loss = L.build("infonce")
    loss.temperature = 0.5
    loss.symmetric = False
    assert loss.hparams() == {"temperature": 0.5, "negatives": "all", "symmetric": False}
    assert torch.allclose(loss(a, b), L.build("infonce", temperature=0.5, symmetric=False)(a, b))


def test_fixed_variant_setting_on_a_built_loss():
    """`uaur.t_pos = 1` on a built loss (uaur fixes t_pos = t_neg = 0) -> ValueError naming the fixed setting"""
    loss = L.build("uaur")
    with pytest.raises(ValueError, match="uaur.*t_pos"):
        loss.t_pos = 1.0
    assert loss.t_pos == 0.0


def test_boolean_setting_given_as_a_string():
    """`build('infonce', symmetric='false')` (a string where a bool belongs) -> ValueError naming symmetric, not True"""
    for name, hp in (("infonce", {"symmetric": "false"}), ("macl", {"reweight": "no"}),
                     ("cacr", {"detach_weights": "yes"}), ("dcl", {"symmetric": 2})):
        with pytest.raises(ValueError, match=next(iter(hp))):
            L.build(name, **hp)
    assert L.build("infonce", symmetric=0).symmetric is False  # 0 / 1 and numpy-style bools stay accepted


def test_tau_plus_that_is_not_a_number():
    """hard_negative with tau_plus='x' (not a number) -> ValueError naming tau_plus (was a raw TypeError)"""
    with pytest.raises(ValueError, match="tau_plus"):
        L.build("hard_negative", tau_plus="x")


# ----------------------------------------------------------------------------- presets

def test_preset_with_a_non_string_loss():
    """preset('text', 5) / preset('text', None) -> ValueError naming the value (was AttributeError on .strip)"""
    from suite.presets import preset

    for bad in (5, None, ["macl"]):
        with pytest.raises(ValueError, match="loss name"):
            preset("text", bad)  # type: ignore[arg-type]


def test_preset_with_an_unknown_setting_or_loss():
    """preset('txt', 'macl') and preset('text', 'mcal') -> ValueError listing the settings / suggesting macl"""
    from suite.presets import preset

    with pytest.raises(ValueError, match="setting must be one of"):
        preset("txt", "macl")
    with pytest.raises(ValueError, match="did you mean macl"):
        preset("text", "mcal")


def test_override_contradicting_a_fixed_variant_through_a_preset():
    """vision/text build with `--loss uaur --loss-hparams t_neg=2` (uaur fixes it) -> ValueError naming t_neg"""
    from suite.presets import make_loss

    with pytest.raises(ValueError, match="t_neg"):
        make_loss("simclr", "uaur", {"t_neg": 2.0}, dataset="cifar10", views=2)
    with pytest.raises(ValueError, match="t_neg"):
        make_loss("text", "uaur", {"t_neg": 2.0})


# ----------------------------------------------------------------------------- supervised SimCSE (item 1)

class _StubEncoder(nn.Module):
    """Word-embedding bag: deterministic (no dropout), enough for the supervised step's arithmetic."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(64, 8)
        self.vocab: dict[str, int] = {}

    def tokenize(self, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
        ids = [[self.vocab.setdefault(w, len(self.vocab) + 1) for w in t.split()][:max_length] for t in texts]
        width = max(len(i) for i in ids)
        out = torch.zeros(len(ids), width, dtype=torch.long)
        for r, i in enumerate(ids):
            out[r, :len(i)] = torch.tensor(i)
        return {"input_ids": out, "attention_mask": (out > 0).long()}

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (self.emb(ids) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


TRIPLETS = [(f"a{i} man", f"a{i} person", f"no{i} cat") for i in range(6)]


@pytest.mark.parametrize("hp", [{}, {"negatives": "all", "symmetric": True}, {"negatives": "none"},
                                {"symmetric": True, "temperature": 0.1}])
def test_supervised_simcse_honours_the_arrangement(hp):
    """`suite text train --mode sup --loss infonce --loss-hparams negatives=all,symmetric=true` -> the step computes
    SimCSE's supervised loss with those settings (they were silently ignored), as the ST adapter does"""
    from suite.presets import make_loss
    from text.methods.simcse import SimCSEConfig, simcse_step

    cfg = SimCSEConfig(mode="sup", loss="infonce", loss_hparams=hp, max_length=8)
    loss = make_loss("text", cfg.loss, cfg.loss_hparams).loss
    enc = _StubEncoder()
    idx = torch.arange(len(TRIPLETS))
    got = simcse_step(enc, enc, loss, TRIPLETS, idx, cfg, 2, None, torch.device("cpu"))
    z = [enc(**dict(zip(("ids", "mask"), enc.tokenize([t[k] for t in TRIPLETS], 8).values()))) for k in range(3)]
    want = sup_simcse_loss(z[0], z[1], z[2], loss.temperature, 0.0, loss.negatives, loss.symmetric)
    assert torch.allclose(got, want)
    if hp.get("negatives") == "all":  # and it is not SimCSE's default arrangement's value
        assert not torch.allclose(got, sup_simcse_loss(z[0], z[1], z[2], loss.temperature))


def test_supervised_simcse_records_what_it_used(tiny_model_dir, data_env, tmp_path, monkeypatch):
    """a supervised infonce run with negatives=all,symmetric=true -> the registry row and the model card record
    exactly those settings, which are the ones the step used"""
    import json

    from suite.registry import Registry
    from text.methods.simcse import SimCSEConfig, train_simcse

    csv = tmp_path / "trip.csv"
    csv.write_text("sent0,sent1,hard_neg\n" + "".join(f"{a},{b},{c}\n" for a, b, c in TRIPLETS * 2))
    reg = Registry(str(tmp_path / "r.sqlite"))
    s = train_simcse(SimCSEConfig(mode="sup", backbone=str(tiny_model_dir), pooling="cls", data=str(csv), max_length=8,
                                  batch_size=6, max_steps=1, eval_every=0, eval_batch_size=16, out=str(tmp_path / "o"),
                                  loss_hparams={"negatives": "all", "symmetric": True}), registry=reg)
    (run,) = reg.runs(task="simcse-sup")
    assert json.loads(run["loss_hparams"]) == {"negatives": "all", "symmetric": True, "temperature": 0.05}
    card = (tmp_path / "o" / "export" / "README.md").read_text()
    assert '`{"negatives": "all", "symmetric": true, "temperature": 0.05}`' in card
    assert s.steps == 1


# ----------------------------------------------------------------------------- grad cache (item 7)

def test_text_grad_cache_chunk_negative_refused_up_front(tmp_path, capsys, monkeypatch):
    """`suite text train --grad-cache-chunk -1` -> exit 2 with one line naming grad_cache_chunk, before any model or
    data is loaded (was a late raw RuntimeError)"""
    from suite.cli import main

    monkeypatch.chdir(tmp_path)
    rc = main(["text", "train", "--grad-cache-chunk", "-1", "--backbone", str(tmp_path / "no-such-model"),
               "--data", str(tmp_path / "no-such-file.txt")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "grad_cache_chunk" in err and "-1" in err
    assert not (tmp_path / "runs").exists()


# ----------------------------------------------------------------------------- sentence-transformers adapter (8, 9)

def _st():
    """The sentence-transformers adapter; only the tests that use it are skipped without sentence-transformers."""
    return pytest.importorskip("suite.integrations.sentence_transformers", reason="sentence-transformers not installed")


def test_suite_loss_with_a_number_for_the_name():
    """`SuiteLoss(model, 5)` -> ValueError 'loss name must be a string, got 5' (was AttributeError on .strip)"""
    st = _st()
    for bad in (5, None):
        with pytest.raises(ValueError, match=f"loss name must be a string, got {bad}"):
            st.SuiteLoss(nn.Identity(), bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="loss name must be a string"):
            st.SuiteLoss(nn.Identity(), bad, setting=None)  # type: ignore[arg-type]


def test_multi_view_columns_of_different_lengths():
    """three text columns of 4, 4 and 3 rows into a multi-view loss (cacr) -> ValueError naming the columns and
    their lengths (was a torch.stack error)"""
    st = _st()
    loss = st.SuiteLoss(nn.Identity(), "cacr")
    cols = [torch.randn(4, 8), torch.randn(4, 8), torch.randn(3, 8)]
    with pytest.raises(ValueError, match=r"column 2 has 3 rows.*4"):
        loss.compute_loss_from_embeddings(cols, None)
    hn = st.SuiteLoss(nn.Identity(), "infonce")
    with pytest.raises(ValueError, match=r"column 2 has 3 rows"):
        hn.compute_loss_from_embeddings(cols, None)
