"""What a design does under a given effect: the chance of stopping at each look, its power, the information
it expects to use, and the effect (drift) at which it reaches a target power. These size a study before
launch: maximum seeds = fixed-design seeds x inflation factor, expected seeds = maximum x expected fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from studies.sequential._integration import DEFAULT_GRID_SIZE, crossing_probabilities
from studies.sequential.boundaries import Boundaries, with_futility
from studies.sequential.spending import SpendingFunction

__all__ = ["OperatingCharacteristics", "drift_for_power", "inflation_factor", "operating_characteristics"]

# Beyond this drift (E[Z] at the maximum information) every sensible design has power 1.
_MAX_DRIFT = 40.0


@dataclass(frozen=True)
class OperatingCharacteristics:
    """A design's behaviour when E[Z at fraction 1] = drift (drift 0: no effect)."""

    drift: float
    rejections: tuple[float, ...]  # P(stop at look k having shown the effect), per look
    futility_stops: tuple[float, ...]  # P(stop at look k for futility), per look (0 without futility)
    expected_fraction: float  # E[information fraction used], counting the last look for paths that never stop

    @property
    def power(self) -> float:
        """P(reject H0 at some look): the type I error at drift 0."""
        return float(sum(self.rejections))


def operating_characteristics(
    design: Boundaries, drift: float, *, grid_size: int = DEFAULT_GRID_SIZE
) -> OperatingCharacteristics:
    """Stopping probabilities of `design` under `drift`; a two-sided design rejects in either tail."""
    lower = design.futility if design.futility is not None else design.lower_continuation()
    up, down = crossing_probabilities(
        design.fractions, design.efficacy, lower, drift=drift, grid_size=grid_size
    )
    if design.sided == 2:
        rejections, futility = up + down, np.zeros_like(up)
    else:
        rejections, futility = up, down
    stops = rejections + futility
    fractions = np.asarray(design.fractions)
    running_at_end = max(0.0, 1.0 - float(stops.sum()))
    expected = float(np.dot(stops, fractions) + running_at_end * fractions[-1])
    return OperatingCharacteristics(
        drift=drift,
        rejections=tuple(float(p) for p in rejections),
        futility_stops=tuple(float(p) for p in futility),
        expected_fraction=expected,
    )


def drift_for_power(
    design: Boundaries,
    *,
    power: float = 0.8,
    futility: SpendingFunction | None = None,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> float:
    """The drift (E[Z] at the maximum information) at which `design` rejects with probability `power`.

    With `futility`, the design gets non-binding futility boundaries spending beta = 1 - power under that
    same drift (one-sided designs), as gsDesign and rpact size a design with beta spending: the drift is
    then the one at which the last futility and efficacy boundaries meet.
    """
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power}")

    def shortfall(drift: float) -> float:
        sized = (
            design
            if futility is None
            else with_futility(design, drift=drift, beta=1.0 - power, spending=futility, grid_size=grid_size)
        )
        return operating_characteristics(sized, drift, grid_size=grid_size).power - power

    if shortfall(_MAX_DRIFT) < 0.0:
        raise ValueError(f"the design cannot reach power {power} (its boundaries may be infinite)")
    low = 0.0 if shortfall(0.0) < 0.0 else None
    if low is None:
        raise ValueError(f"the design already rejects with probability >= {power} under no effect")
    return float(optimize.brentq(shortfall, low, _MAX_DRIFT, xtol=1e-10))


def inflation_factor(design: Boundaries, drift: float, *, power: float) -> float:
    """Maximum information of the sequential design over the fixed design's at the same alpha and power."""
    fixed = stats.norm.isf(design.alpha / design.sided) + stats.norm.isf(1.0 - power)
    return float((drift / fixed) ** 2) if math.isfinite(drift) else math.inf
