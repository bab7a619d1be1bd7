"""StudySpec knob distributions -> the tuner's space: the Optuna distribution of each searched knob, from
studies.search_space (the one mapping: the knob importance re-reads the tune trials in the same space),
and the constant of each fixed knob."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from studies.search_space import optuna_distribution
from studies.spec import Distribution, Fixed

__all__ = ["to_tune_space"]


def to_tune_space(space: Mapping[str, Distribution]) -> dict[str, Any]:
    """Knob name -> Optuna distribution (or constant for fixed knobs), in the spec's order; a grid raises
    ValueError (the grid phase expands it)."""
    return {
        name: dist.value if isinstance(dist, Fixed) else optuna_distribution(dist)
        for name, dist in space.items()
    }
