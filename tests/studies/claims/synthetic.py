"""Fabricated studies for the claim checks: trials whose epoch-0 row holds per-depth init measurements
that follow a chosen law, so a test knows the verdict each check must reach."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from studies.claims import StudyData, TrialData

# Seed-to-seed wobble, multiplicative on per-depth values: small, deterministic, not a pure power.
WOBBLE = (0.02, -0.015, 0.01, -0.01, 0.0, 0.015, -0.02, 0.005)


def data(trials: list[TrialData]) -> StudyData:
    return StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))


def trial(
    knobs: Mapping[str, Any],
    seed: int,
    init: Mapping[str, float],
    *,
    value: float = 0.5,
    status: str = "succeeded",
) -> TrialData:
    group = ",".join(f"{k}={v}" for k, v in knobs.items())
    return TrialData(
        "frozen_ln",
        seed,
        status,
        value,
        group=group,
        knobs=dict(knobs),
        history=({"epoch": 0, **init}, {"epoch": 1, "val_accuracy": value}),
    )


def law(prefix: str, depths: range, value: Callable[[int], float], seed: int) -> dict[str, float]:
    """`<prefix>_<l>` for every depth, following `value(l)` with a per-depth, per-seed wobble."""
    return {f"{prefix}_{d}": value(d) * (1.0 + WOBBLE[(seed + 3 * d) % len(WOBBLE)]) for d in depths}
