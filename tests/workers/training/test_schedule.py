import itertools
import math

import pytest
import torch

from workers.training.schedule import build_warmup_cosine, warmup_cosine_factor


def test_warmup_ramps_linearly_to_the_peak_and_the_first_step_is_not_zero():
    factors = [warmup_cosine_factor(s, warmup_steps=4, total_steps=20) for s in range(4)]
    assert factors == pytest.approx([0.25, 0.5, 0.75, 1.0])


def test_cosine_runs_from_the_peak_after_warmup_to_min_ratio_at_the_last_step():
    kwargs = {"warmup_steps": 2, "total_steps": 12, "min_ratio": 0.1}
    assert warmup_cosine_factor(2, **kwargs) == pytest.approx(1.0)
    assert warmup_cosine_factor(11, **kwargs) == pytest.approx(0.1)
    midpoint = warmup_cosine_factor(2 + 4.5, **kwargs)  # halfway through the 9 decay steps
    assert midpoint == pytest.approx(0.1 + 0.9 * 0.5)
    decay = [warmup_cosine_factor(s, **kwargs) for s in range(2, 12)]
    assert all(a > b for a, b in itertools.pairwise(decay))


def test_without_warmup_the_first_step_uses_the_peak_rate():
    assert warmup_cosine_factor(0, warmup_steps=0, total_steps=10) == pytest.approx(1.0)
    assert warmup_cosine_factor(9, warmup_steps=0, total_steps=10) == pytest.approx(0.0)


def test_scheduler_sets_the_optimizer_lr_per_step():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=1e-3)
    scheduler = build_warmup_cosine(optimizer, warmup_steps=2, total_steps=6)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    expected = [1e-3 * warmup_cosine_factor(s, warmup_steps=2, total_steps=6) for s in range(6)]
    assert seen == pytest.approx(expected)
    assert seen[-1] == pytest.approx(0.0, abs=1e-12)
    assert not any(math.isnan(v) for v in seen)


def test_scheduler_state_round_trips_to_the_same_next_lr():
    def make():
        param = torch.nn.Parameter(torch.zeros(1))
        optimizer = torch.optim.AdamW([param], lr=1.0)
        return optimizer, build_warmup_cosine(optimizer, warmup_steps=3, total_steps=10)

    optimizer, scheduler = make()
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    restored_opt, restored = make()
    restored_opt.load_state_dict(optimizer.state_dict())
    restored.load_state_dict(scheduler.state_dict())
    optimizer.step(), scheduler.step()
    restored_opt.step(), restored.step()
    assert restored_opt.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
