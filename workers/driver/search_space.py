"""StudySpec knob distributions -> Ray Tune search-space objects (OptunaSearch converts them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray import tune

from studies.spec import Choice, Distribution, Fixed, Grid, IntRange, LogUniform, Uniform

__all__ = ["to_tune_space"]


def _to_tune(dist: Distribution) -> Any:
    if isinstance(dist, Fixed):
        return dist.value
    if isinstance(dist, Uniform):
        return tune.uniform(dist.low, dist.high)
    if isinstance(dist, LogUniform):
        return tune.loguniform(dist.low, dist.high)
    if isinstance(dist, IntRange):
        if dist.log:
            return tune.lograndint(dist.low, dist.high + 1)  # Tune's upper bound is exclusive
        if dist.step > 1:
            return tune.qrandint(dist.low, dist.high, dist.step)  # inclusive of high
        return tune.randint(dist.low, dist.high + 1)
    if isinstance(dist, Choice):
        return tune.choice(list(dist.values))
    if isinstance(dist, Grid):
        raise ValueError("grid distributions are expanded by the grid phase, not sampled by a tuner")
    raise TypeError(f"unsupported distribution {dist!r}")


def to_tune_space(space: Mapping[str, Distribution]) -> dict[str, Any]:
    """Knob name -> Tune domain (or constant for fixed knobs)."""
    return {name: _to_tune(dist) for name, dist in space.items()}
