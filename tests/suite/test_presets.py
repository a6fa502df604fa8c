"""The papers' loss settings (suite.presets) and the front-ends that read them."""
from __future__ import annotations

import pytest

import suite.losses as L
from suite.presets import SETTINGS, cacr_image, names, preset, resolve, text_dropout, views


def test_presets_are_the_papers_values():
    assert preset("moco", "macl") == ("macl", {"tau0": 0.15, "alpha": 0.5, "a0": 0.2})  # MACL App. B.2.1
    assert preset("simclr", "macl") == ("macl", {"tau0": 0.1, "alpha": 0.5, "a0": 0.0})  # App. B.1
    assert preset("imagenet", "tsimclr")[1] == {"temperature": 5.0, "t_df": 10.0}  # t-SimCLR App. C.4
    name, hp = preset("text", "macl")  # App. B.4 with SimCSE's arrangement
    assert hp == {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False, "negatives": "cross", "symmetric": False}
    for loss in ("infonce", "ntxent", "dcl", "hard_negative"):  # SimCSE: anchors z1, candidates z2, one direction
        assert preset("text", loss)[1]["negatives"] == "cross" and preset("text", loss)[1]["symmetric"] is False
    assert preset("graph_tu", "graphcl") == ("dcl", {"temperature": 0.2, "negatives": "cross", "symmetric": False})
    assert preset("graph_transfer", "macl")[1]["tau0"] == 0.1
    assert preset("text", "supcon") == ("supcon", {})  # no preset: the loss's own defaults
    for setting in SETTINGS:  # every preset builds
        for loss in ("infonce", "macl", "tsimclr"):
            name, hp = preset(setting, loss)
            L.build(name, **hp)
    with pytest.raises(ValueError, match="setting"):
        preset("audio", "macl")


def test_cacr_image_temperatures_app_c1():
    assert cacr_image("cifar10", 2) == {"t_pos": 1.0, "t_neg": 2.0}
    assert cacr_image("cifar10", 5) == {"t_pos": 1.0, "t_neg": 0.9}
    assert cacr_image("cifar100", 2)["t_neg"] == 3.0 and cacr_image("CIFAR-100", 5)["t_neg"] == 2.0
    assert cacr_image("stl10", 2)["t_neg"] == 3.0
    assert preset("simclr", "cacr", dataset="cifar10", views=5) == ("cacr", {"t_pos": 1.0, "t_neg": 0.9})
    assert preset("simclr", "uaur", dataset="cifar10", views=5) == ("uaur", {})


def test_resolve_applies_overrides_then_the_moco_arrangement():
    # MoCo v2: the InfoNCE family contrasts the query with its key and the queue only, unless the user says otherwise
    assert resolve("moco", "infonce") == ("infonce", {"temperature": 0.2, "negatives": "none", "symmetric": False})
    assert resolve("moco", "dcl", {"negatives": "all"}) == ("dcl", {"negatives": "all", "symmetric": False})
    assert resolve("moco", "tsimclr")[1] == {"temperature": 5.0, "t_df": 10.0}  # not of the family: no arrangement
    assert resolve("moco", "simclr_l2") == ("simclr_l2", {})
    assert resolve("simclr", "infonce", {"temperature": 0.5}) == ("infonce", {"temperature": 0.5})
    assert resolve("text", "ntxent")[1]["temperature"] == 0.05  # an alias selects its loss's preset ...
    assert resolve("graph_transfer", "ntxent", aliases=False) == ("infonce", {})  # ... except by the graph rule
    assert resolve("graph_transfer", "GraphCL", aliases=False)[0] == "dcl"
    assert resolve("graph_tu", "cacr3", {"t_neg": 1.0}, aliases=False) == ("cacr", {"t_neg": 1.0})
    assert names("graph_tu") == ["cacr", "cacr3", "graphcl", "infonce", "macl", "tsimclr"]


def test_views_and_text_dropout():
    assert views("graph_tu", "cacr3") == 3 and views("graph_tu", "cacr") == 2 and views("graph_tu", "graphcl") == 2
    assert [views("text", k) for k in ("cacr", "uaur", "cct", "cmc", "infonce", "xclr")] == [3, 3, 3, 3, 2, 2]
    assert views("simclr", "cacr") == 2  # vision: the user's --views
    assert text_dropout("macl") == 0.2 and text_dropout("infonce") == 0.1 and text_dropout("macl", 0.0) == 0.0


def test_front_ends_read_the_presets():
    """the front-ends' settings through the one factory (suite.presets.make_loss) give the papers' values"""
    from suite.presets import make_loss
    from text.methods.simcse import SimCSEConfig, dropout_for

    def build_loss(name, hp, framework, dataset="", views=2):
        ctx = {"dataset": dataset, "views": views} if dataset else {}
        return make_loss(framework, name, hp, **ctx).loss

    m = build_loss("macl", {}, "moco")
    assert (m.tau0, m.alpha, m.a0) == (0.15, 0.5, 0.2)
    assert build_loss("macl", {"tau0": 0.3}, "moco").tau0 == 0.3  # the user's value wins
    assert build_loss("cacr", {}, "simclr", "cifar10", 5).t_neg == 0.9
    t = make_loss("text", "infonce").loss
    assert (t.negatives, t.symmetric, t.temperature) == ("cross", False, 0.05)
    assert make_loss("text", "infonce", {"negatives": "all", "symmetric": True}).loss.symmetric is True  # 2N form
    assert dropout_for(SimCSEConfig(loss="macl")) == 0.2 and dropout_for(SimCSEConfig(loss="infonce")) == 0.1
    assert dropout_for(SimCSEConfig(loss="macl", dropout=0.1)) == 0.1
    m = build_loss("infonce", {}, "moco")
    assert (m.temperature, m.negatives, m.symmetric) == (0.2, "none", False)  # MoCo's arrangement from suite.presets
    assert make_loss("gmm", "ntxent").hparams["temperature"] == 0.5  # t-SimCLR App. C: cosine SimCLR at 0.5

    from graph.tu.presets import resolve as graph_resolve

    loss, mode, record = graph_resolve("cacr3")
    assert (type(loss).name, mode, record["preset"]) == ("cacr", "orig+aug+aug", "cacr3")
    assert graph_resolve("ntxent")[2]["preset"] is None and graph_resolve("ntxent")[0].negatives == "all"
    mol = make_loss("graph_transfer", "graphcl", aliases=False)
    assert mol.hparams == {"temperature": 0.1, "negatives": "cross", "symmetric": False} and mol.preset == "graphcl"
