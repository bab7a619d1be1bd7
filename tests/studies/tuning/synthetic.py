"""Tune and grid trials with known answers for the tuning views: the objective depends on the knobs
through a function the test chooses, plus seeded noise."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from studies.tuning import TuningTrial


def tune_trials(
    objective: Callable[[Mapping[str, Any]], float],
    space: Mapping[str, Callable[[np.random.Generator], Any]],
    n: int,
    *,
    method: str = "autonorm_s",
    seed: int = 3,
    noise: float = 0.002,
) -> list[TuningTrial]:
    """`n` tune trials on one trial seed, knobs drawn from `space` (knob -> draw), in start order."""
    rng = np.random.default_rng(0)
    trials = []
    for i in range(n):
        knobs = {knob: draw(rng) for knob, draw in space.items()}
        value = objective(knobs) + float(rng.normal(0.0, noise))
        trials.append(TuningTrial(f"{method}/tune/{i}", method, seed, "succeeded", value, knobs, epochs=10))
    return trials


def grid_trials(
    objective: Callable[[Mapping[str, Any], int], float],
    grid: Mapping[str, Sequence[Any]],
    seeds: Sequence[int] = (0, 1, 2),
    *,
    method: str = "autonorm_s",
) -> list[TuningTrial]:
    """Every grid point on every seed; `objective(knobs, seed)` gives each trial's value."""
    trials = []
    for combo in itertools.product(*grid.values()):
        knobs = dict(zip(grid, combo, strict=True))
        label = ",".join(f"{k}={v}" for k, v in knobs.items())
        for seed in seeds:
            value = objective(knobs, seed)
            trials.append(TuningTrial(f"{method}/{label}/{seed}", method, seed, "succeeded", value, knobs))
    return trials
