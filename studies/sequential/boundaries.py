"""Group-sequential boundaries on the z scale: from an error-spending function at the information
fractions actually reached (Lan & DeMets 1983), or the classical Pocock and O'Brien-Fleming constants for
K equally spaced looks (Jennison & Turnbull 2000, tables 2.1 and 2.3)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

from studies.sequential._integration import DEFAULT_GRID_SIZE, Recursion, crossing_probabilities
from studies.sequential.spending import SpendingFunction, obrien_fleming_spending

__all__ = [
    "Boundaries",
    "classical_boundaries",
    "critical_values",
    "efficacy_boundaries",
    "with_futility",
]

Sided = Literal[1, 2]

# Far enough that no boundary worth computing lies beyond: P(Z > 40) is 4e-350.
_Z_LIMIT = 40.0


@dataclass(frozen=True)
class Boundaries:
    """A design's boundaries at its looks, all on the z scale.

    Efficacy: a one-sided design rejects at look k when Z_k >= efficacy[k], a two-sided one when
    |Z_k| >= efficacy[k] (symmetric). Futility (one-sided designs only, non-binding): the comparison may
    stop for futility when Z_k <= futility[k]; the efficacy boundaries were computed as if it never did, so
    ignoring a futility stop never inflates the type I error. An infinite efficacy boundary means the look
    can not stop for efficacy (nothing was left to spend there).
    """

    fractions: tuple[float, ...]
    efficacy: tuple[float, ...]
    alpha: float  # the design's whole type I error (both tails together when two-sided)
    sided: Sided
    spent: tuple[float, ...]  # cumulative type I error spent by each look (both tails when two-sided)
    futility: tuple[float, ...] | None = None
    beta: float | None = None  # type II error the futility boundaries spend, under `drift`
    drift: float | None = None  # E[Z] at fraction 1 under the effect the futility boundaries assume

    @property
    def looks(self) -> int:
        return len(self.fractions)

    @property
    def nominal_levels(self) -> tuple[float, ...]:
        """The p-value (of the same sidedness) each look's efficacy boundary corresponds to."""
        return tuple(float(self.sided * special.ndtr(-c)) for c in self.efficacy)

    def lower_continuation(self) -> tuple[float, ...]:
        """The lower edge of the region in which a comparison goes on when futility is ignored."""
        if self.sided == 2:
            return tuple(-c for c in self.efficacy)
        return (-math.inf,) * self.looks


def _check_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    values = tuple(float(t) for t in fractions)
    if not values:
        raise ValueError("a design needs at least one look")
    if not all(0.0 < t <= 1.0 for t in values) or any(b <= a for a, b in itertools.pairwise(values)):
        raise ValueError(f"information fractions must increase strictly within (0, 1], got {list(fractions)}")
    return values


def _check_alpha(alpha: float, sided: int) -> None:
    if sided not in (1, 2):
        raise ValueError(f"sided must be 1 or 2, got {sided}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")


def _solve_upper(recursion: Recursion, t: float, target: float, floor: float) -> float:
    """The z at which P(still running, Z >= z at fraction t) equals `target` (not below `floor`)."""
    if target <= 0.0:
        return math.inf
    if recursion.above(t, floor) <= target:  # more error left to spend than the look can use
        return floor
    return float(optimize.brentq(lambda z: recursion.above(t, z) - target, floor, _Z_LIMIT, xtol=1e-10))


def _solve_lower(recursion: Recursion, t: float, target: float, ceiling: float) -> float:
    """The z at which P(still running, Z <= z at fraction t) equals `target` (not above `ceiling`)."""
    if target <= 0.0:
        return -math.inf
    if recursion.below(t, ceiling) <= target:  # the look cannot spend that much below the efficacy boundary
        return ceiling
    return float(optimize.brentq(lambda z: recursion.below(t, z) - target, -_Z_LIMIT, ceiling, xtol=1e-10))


def efficacy_boundaries(
    fractions: Sequence[float],
    *,
    alpha: float = 0.05,
    sided: Sided = 2,
    spending: SpendingFunction = obrien_fleming_spending,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> Boundaries:
    """Efficacy boundaries that spend `spending` at the information fractions reached.

    `fractions` are n_k / n_max for the looks taken so far; a look at fraction 1 spends whatever is left.
    Boundaries of earlier looks never change when a look is added (compute again with one more fraction),
    so looks may be unequal and their number need not be fixed in advance. A two-sided design spends
    `spending(t, alpha / 2)` in each tail.
    """
    _check_alpha(alpha, sided)
    values = _check_fractions(fractions)
    tail_level = alpha / sided
    cumulative = np.maximum.accumulate(spending(np.asarray(values), tail_level))
    recursion = Recursion(0.0, grid_size)
    efficacy: list[float] = []
    previous = 0.0
    for t, spent_by_t in zip(values, cumulative, strict=True):
        # Two-sided: under no effect the surviving density is symmetric, so each tail takes half.
        floor = 0.0 if sided == 2 else -_Z_LIMIT
        c = _solve_upper(recursion, t, float(spent_by_t - previous), floor)
        efficacy.append(c)
        previous = float(spent_by_t)
        recursion.advance(t, -c if sided == 2 else -math.inf, c)
    return Boundaries(
        fractions=values,
        efficacy=tuple(efficacy),
        alpha=alpha,
        sided=sided,
        spent=tuple(float(sided * s) for s in cumulative),
    )


def with_futility(
    design: Boundaries,
    *,
    drift: float,
    beta: float = 0.2,
    spending: SpendingFunction = obrien_fleming_spending,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> Boundaries:
    """Add non-binding beta-spending futility boundaries to a one-sided design.

    Under the effect of interest (E[Z at fraction 1] = `drift`), look k's futility boundary a_k makes
    P(stop for futility at k) equal the beta spent between looks k-1 and k. A boundary that would pass the
    efficacy boundary is set to it; at a look at fraction 1 the two meet, so the last look always decides
    (where the design is underpowered for `drift`, that final boundary spends less than beta: the power
    is then lower than 1 - beta, as `operating_characteristics` reports).
    """
    if design.sided != 1:
        raise ValueError(
            "futility boundaries are defined for one-sided designs (superiority, non-inferiority)"
        )
    if not 0.0 < beta < 0.5:
        raise ValueError(f"beta must lie in (0, 0.5), got {beta}")
    if not math.isfinite(drift):
        raise ValueError(f"drift must be finite, got {drift}")
    cumulative = np.maximum.accumulate(spending(np.asarray(design.fractions), beta))
    recursion = Recursion(drift, grid_size)
    futility: list[float] = []
    previous = 0.0
    for t, spent_by_t, upper in zip(design.fractions, cumulative, design.efficacy, strict=True):
        target = float(spent_by_t - previous)
        previous = float(spent_by_t)
        ceiling = upper if math.isfinite(upper) else _Z_LIMIT
        a = ceiling if t >= 1.0 else _solve_lower(recursion, t, target, ceiling)
        futility.append(a)
        recursion.advance(t, a, upper)
    return Boundaries(
        fractions=design.fractions,
        efficacy=design.efficacy,
        alpha=design.alpha,
        sided=design.sided,
        spent=design.spent,
        futility=tuple(futility),
        beta=beta,
        drift=drift,
    )


ClassicalKind = Literal["pocock", "obrien_fleming"]


def classical_boundaries(
    looks: int,
    kind: ClassicalKind,
    *,
    alpha: float = 0.05,
    sided: Sided = 2,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> tuple[float, Boundaries]:
    """Pocock's (1977) constant boundary C, or O'Brien & Fleming's (1979) C sqrt(K / k), for `looks`
    equally spaced looks, with C chosen so that the whole type I error is `alpha`. Returns (C, boundaries)."""
    _check_alpha(alpha, sided)
    if looks < 1:
        raise ValueError(f"need at least one look, got {looks}")
    fractions = tuple((k + 1) / looks for k in range(looks))
    if kind not in ("pocock", "obrien_fleming"):
        raise ValueError(f"kind must be 'pocock' or 'obrien_fleming', got {kind!r}")
    shape = np.ones(looks) if kind == "pocock" else np.sqrt(looks / np.arange(1.0, looks + 1))

    def exits(constant: float) -> np.ndarray:
        upper = constant * shape
        lower = -upper if sided == 2 else np.full(looks, -math.inf)
        up, down = crossing_probabilities(fractions, upper, lower, drift=0.0, grid_size=grid_size)
        return np.cumsum(up + down)

    constant = float(
        optimize.brentq(lambda c: exits(c)[-1] - alpha, stats.norm.isf(alpha / sided), 10.0, xtol=1e-10)
    )
    return constant, Boundaries(
        fractions=fractions,
        efficacy=tuple(float(c) for c in constant * shape),
        alpha=alpha,
        sided=sided,
        spent=tuple(float(s) for s in exits(constant)),
    )


def critical_values(
    design: Boundaries, degrees_of_freedom: Sequence[float] | None = None
) -> tuple[float, ...]:
    """Each look's efficacy boundary on the scale of a t statistic with the given degrees of freedom.

    With few seeds the variance is estimated, and comparing a t statistic with a z boundary would inflate
    the error; matching nominal levels (Jennison & Turnbull 2000, section 3.8) keeps each look's tail
    probability and so the design's error close to alpha. Without degrees of freedom: the z boundaries.
    """
    if degrees_of_freedom is None:
        return design.efficacy
    if len(degrees_of_freedom) != design.looks:
        raise ValueError(
            f"need one degrees-of-freedom value per look ({design.looks}), got {len(degrees_of_freedom)}"
        )
    return tuple(
        float(stats.t.isf(special.ndtr(-c), df)) if math.isfinite(c) else math.inf
        for c, df in zip(design.efficacy, degrees_of_freedom, strict=True)
    )
