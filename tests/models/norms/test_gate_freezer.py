import io

import torch

from models import build_model
from models.norms import GateFreezer, gate_summary, selector_parameters


def _model() -> torch.nn.Module:
    return build_model("vit_lite_tiny", {"norm": "autonorm", "num_classes": 3})


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def test_freezes_at_t_freeze_when_entropy_is_still_high() -> None:
    model, freezer = _model(), GateFreezer(t_freeze=2, eps_h=0.1, scope="global")
    assert freezer.observe(1, 0.69, model) is False and not freezer.frozen
    assert freezer.observe(2, 0.5, model) is True
    assert freezer.frozen and freezer.freeze_epoch == 2
    assert all(not p.requires_grad for p in selector_parameters(model))
    assert freezer.observe(3, 0.5, model) is False and freezer.freeze_epoch == 2


def test_does_not_freeze_when_entropy_dropped_below_eps_and_never_decides_again() -> None:
    model, freezer = _model(), GateFreezer(t_freeze=2, eps_h=0.1, scope="global")
    freezer.observe(1, 0.3, model)
    assert freezer.observe(2, 0.05, model) is False
    assert freezer.observe(3, 0.6, model) is False
    assert not freezer.frozen and freezer.freeze_epoch is None
    assert all(p.requires_grad for p in selector_parameters(model))


def test_frozen_selectors_stay_bit_identical_while_the_backbone_keeps_training() -> None:
    model = _model()
    selectors = selector_parameters(model)
    assert len(selectors) == 5 * 4  # (2 blocks x 2 norms + final norm) x (fc1, fc2 weight and bias)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.5)
    _train_step(model, optimizer)  # selectors get AdamW state before the freeze
    freezer = GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
    assert freezer.observe(1, 0.69, model)
    frozen_before = [p.detach().clone() for p in selectors]
    backbone = model.head.weight
    backbone_before = backbone.detach().clone()
    for _ in range(3):
        _train_step(model, optimizer)
    for before, param in zip(frozen_before, selectors, strict=True):
        assert torch.equal(before, param)
    assert not torch.equal(backbone_before, backbone)


def test_state_survives_a_checkpoint_round_trip_and_reapplies_the_freeze() -> None:
    model, freezer = _model(), GateFreezer(t_freeze=1, eps_h=0.2, scope="global")
    freezer.observe(1, 0.6, model)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "freezer": freezer.state_dict()}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    restored_model, restored = _model(), GateFreezer(t_freeze=1, eps_h=0.1, scope="global")
    restored_model.load_state_dict(checkpoint["model"])
    restored.load_state_dict(checkpoint["freezer"])
    restored.apply(restored_model)
    assert restored.frozen and restored.freeze_epoch == 1 and restored.eps_h == 0.2 and restored.t_freeze == 1
    assert restored.state_dict() == freezer.state_dict()
    assert all(not p.requires_grad for p in selector_parameters(restored_model))


def test_gate_summary_has_one_row_per_autonorm_site_after_a_forward() -> None:
    model = _model().eval()
    model(torch.randn(2, 1, 8, 8))
    assert len(gate_summary(model)) == 5
