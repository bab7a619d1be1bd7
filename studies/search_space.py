"""StudySpec knob distributions -> Optuna distributions: the one mapping from a spec's search space to the
space the tuner samples (the study driver's OptunaSearch, through workers.driver.search_space) and the
space its tune trials are re-read in (knob importance, studies.tuning). Optuna's distributions only: the
driver imports this at start-up, so nothing here loads scipy.

A sweep's grid values are not sampled by anything; `grid_distribution` gives them the space an importance
evaluator reads them in: numbers as a range (so 5 < 10 < 20 keeps its order), anything else as categories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from studies.spec import Choice, Distribution, Fixed, Grid, IntRange, LogUniform, Uniform
from studies.spec.names import Scalar

__all__ = ["grid_distribution", "optuna_distribution", "optuna_space"]


def optuna_distribution(dist: Distribution) -> BaseDistribution:
    """The Optuna distribution a tuner samples a searched knob from; bounds are inclusive, as in the spec."""
    if isinstance(dist, Uniform):
        return FloatDistribution(dist.low, dist.high)
    if isinstance(dist, LogUniform):
        return FloatDistribution(dist.low, dist.high, log=True)
    if isinstance(dist, IntRange):
        # The spec allows log only with step 1 (as Optuna does).
        return IntDistribution(dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, Choice):
        return CategoricalDistribution(list(dist.values))
    if isinstance(dist, Grid):
        raise ValueError("grid distributions are expanded by the grid phase, not sampled by a tuner")
    if isinstance(dist, Fixed):
        raise ValueError("a fixed knob is a constant, not sampled by a tuner")
    raise TypeError(f"unsupported distribution {dist!r}")


def optuna_space(space: Mapping[str, Distribution]) -> dict[str, BaseDistribution]:
    """Knob name -> Optuna distribution for every knob a tuner searches; fixed knobs are constants and
    stay out (the caller adds them to every trial)."""
    return {name: optuna_distribution(dist) for name, dist in space.items() if not isinstance(dist, Fixed)}


def grid_distribution(values: Sequence[Scalar]) -> BaseDistribution:
    """The space of a grid knob's values: integers as an int range, numbers as a float range, anything
    else (text, booleans, null, a mix) as categories."""
    if not values:
        raise ValueError("a grid knob has at least one value")
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) < len(values):
        return CategoricalDistribution(list(values))
    if all(isinstance(v, int) for v in numbers):
        return IntDistribution(int(min(numbers)), int(max(numbers)))
    return FloatDistribution(float(min(numbers)), float(max(numbers)))
