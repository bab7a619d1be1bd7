"""The AutoNorm-S freeze rule as the paper states it: the selectors freeze when the gate entropy has NOT
fallen below eps_H at ANY epoch up to T_freeze; globally on the mean entropy, or layer by layer."""

from __future__ import annotations

import io

import pytest
import torch

from models import build_model
from models.norms import GateFreezer, gated_norms
from models.norms.freeze import FREEZE_SCOPES
from studies.spec import KNOBS

LAYERS = 5  # vit_lite_tiny: 2 blocks x 2 norms + the final norm


def _model() -> torch.nn.Module:
    return build_model("vit_lite_tiny", {"norm": "autonorm", "num_classes": 3})


def _selector_trainable(model: torch.nn.Module) -> list[bool]:
    return [all(p.requires_grad for p in norm.selector.parameters()) for _, norm in gated_norms(model)]


def test_an_entropy_that_dipped_below_eps_before_t_freeze_prevents_the_freeze():
    # The epoch-T_freeze value alone (0.5) would freeze; the dip at epoch 2 means H did fall below eps_H.
    model, freezer = _model(), GateFreezer(t_freeze=3, eps_h=0.1, scope="global")
    for epoch, entropy in enumerate([0.6, 0.05, 0.5], start=1):
        assert freezer.observe(epoch, entropy, model) is False
    assert freezer.decided and not freezer.frozen and freezer.freeze_epoch is None
    assert all(_selector_trainable(model))


def test_an_entropy_that_never_fell_below_eps_freezes_every_selector_after_t_freeze():
    model, freezer = _model(), GateFreezer(t_freeze=3, eps_h=0.1, scope="global")
    assert freezer.observe(1, 0.69, model) is False
    assert freezer.observe(2, 0.3, model) is False  # still watching: no decision before t_freeze
    assert all(_selector_trainable(model))
    assert freezer.observe(3, 0.1, model) is True  # eps_h itself is not "below"
    assert freezer.frozen_layers == list(range(LAYERS)) and freezer.freeze_epoch == 3
    assert not any(_selector_trainable(model))


def test_the_global_scope_watches_the_mean_of_the_per_layer_entropies():
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.2, scope="global")
    # One layer is far below eps_h, but the mean (0.25) is not: the global rule freezes them all.
    assert freezer.observe(1, [0.01, 0.31, 0.31, 0.31, 0.31], model) is True
    assert freezer.frozen_layers == list(range(LAYERS))


def test_the_per_layer_scope_freezes_each_selector_on_its_own_entropy_history():
    model, freezer = _model(), GateFreezer(t_freeze=2, eps_h=0.1, scope="per_layer")
    freezer.observe(1, [0.05, 0.6, 0.6, 0.6, 0.6], model)  # layer 0 dips below eps_h at epoch 1
    assert freezer.observe(2, [0.4, 0.6, 0.02, 0.6, 0.1], model) is True  # layer 2 dips at epoch 2
    assert freezer.frozen_layers == [1, 3, 4] and freezer.freeze_epoch == 2
    assert _selector_trainable(model) == [True, False, True, False, False]
    assert freezer.layer_metrics(LAYERS) == {
        "gates_frozen": 1,
        "freeze_epoch": 2,
        **{f"gate_frozen_{i}": int(i in (1, 3, 4)) for i in range(LAYERS)},
    }


def test_a_per_layer_scope_where_every_layer_dipped_freezes_nothing():
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.3, scope="per_layer")
    assert freezer.observe(1, [0.1] * LAYERS, model) is False
    assert freezer.layer_metrics(LAYERS)["gates_frozen"] == 0
    assert freezer.layer_metrics(LAYERS)["freeze_epoch"] == -1


def test_readings_must_cover_every_gated_layer():
    model = _model()
    with pytest.raises(ValueError, match="3 entropies for a model with 5 gated layers"):
        GateFreezer(t_freeze=1, eps_h=0.1, scope="global").observe(1, [0.5, 0.5, 0.5], model)
    with pytest.raises(ValueError, match="one entropy per gated layer"):
        GateFreezer(t_freeze=1, eps_h=0.1, scope="per_layer").observe(1, 0.5, model)
    with pytest.raises(ValueError, match="global, per_layer"):
        GateFreezer(t_freeze=1, eps_h=0.1, scope="layer")


def test_the_scopes_are_the_spec_knobs_categories():
    assert KNOBS["freeze_scope"].categories == FREEZE_SCOPES


def test_a_per_layer_freeze_survives_a_checkpoint_round_trip():
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.3, scope="per_layer")
    freezer.observe(1, [0.1, 0.5, 0.1, 0.5, 0.1], model)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "freezer": freezer.state_dict()}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    restored_model, restored = _model(), GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
    restored_model.load_state_dict(checkpoint["model"])
    restored.load_state_dict(checkpoint["freezer"])
    restored.apply(restored_model)
    assert restored.state_dict() == freezer.state_dict()
    assert restored.scope == "per_layer" and restored.frozen_layers == [1, 3]
    assert _selector_trainable(restored_model) == [True, False, True, False, True]


def test_a_checkpoint_from_before_per_layer_state_still_freezes_every_selector():
    legacy = {
        "t_freeze": 2,
        "eps_h": 0.1,
        "frozen": True,
        "freeze_epoch": 2,
        "decided": True,
        "entropy_history": [0.6, 0.5],
    }
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
    freezer.load_state_dict(legacy)
    assert freezer.frozen and freezer.scope == "global"
    assert freezer.layer_metrics(LAYERS)["gate_frozen_4"] == 1
    freezer.apply(model)
    assert freezer.frozen_layers == list(range(LAYERS)) and not any(_selector_trainable(model))


def test_an_undecided_legacy_checkpoint_applies_the_any_epoch_rule_to_its_history():
    legacy = {
        "t_freeze": 3,
        "eps_h": 0.1,
        "frozen": False,
        "freeze_epoch": None,
        "entropy_history": [0.05, 0.6],
    }
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
    freezer.load_state_dict(legacy)
    assert freezer.observe(3, 0.6, model) is False and freezer.decided and not freezer.frozen
