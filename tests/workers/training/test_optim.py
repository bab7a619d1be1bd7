"""AdamW's construction (workers/training/optim.py): which implementation runs where."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from workers.training.optim import adamw, build_optimizer, fused_applies


def test_cpu_parameters_keep_torchs_default_implementation() -> None:
    optimizer = build_optimizer(nn.Linear(4, 3), lr=1e-3, weight_decay=0.05)
    assert optimizer.defaults["fused"] is None
    assert all(group["fused"] is None for group in optimizer.param_groups)


def test_parameters_all_on_cuda_take_the_fused_kernel_and_a_mix_or_nothing_does_not() -> None:
    on_cuda, on_cpu = SimpleNamespace(is_cuda=True), SimpleNamespace(is_cuda=False)
    assert fused_applies([on_cuda, on_cuda])  # type: ignore[list-item]
    assert not fused_applies([on_cuda, on_cpu])  # type: ignore[list-item]
    assert not fused_applies([])


def test_the_groups_and_their_settings_are_kept() -> None:
    model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    groups = [
        {"name": "decay", "params": [model[0].weight], "weight_decay": 0.1},
        {"name": "no_decay", "params": [model[0].bias, *model[1].parameters()], "weight_decay": 0.0},
    ]
    optimizer = adamw(groups, lr=2e-3)
    assert [g["name"] for g in optimizer.param_groups] == ["decay", "no_decay"]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    assert all(g["lr"] == 2e-3 for g in optimizer.param_groups)
    model(torch.randn(2, 4)).sum().backward()
    before = model[0].weight.detach().clone()
    optimizer.step()
    assert not torch.equal(before, model[0].weight)
