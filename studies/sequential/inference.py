"""Honest numbers after a data-dependent stop: repeated confidence intervals (Jennison & Turnbull 1989)
and the stage-wise-ordering p-value (Armitage 1957; Fairbanks & Madsen 1982). A naive t interval or
p-value after stopping at the first look that looks good would overstate the evidence."""

from __future__ import annotations

import math

from scipy import special

from studies.sequential._integration import DEFAULT_GRID_SIZE, Recursion
from studies.sequential.boundaries import Boundaries, critical_values

__all__ = ["repeated_confidence_interval", "stagewise_p_value", "z_from_t"]


def _check_look(design: Boundaries, look: int) -> None:
    if not 1 <= look <= design.looks:
        raise ValueError(f"look must be between 1 and {design.looks} (1 = the first look), got {look}")


def z_from_t(t: float, degrees_of_freedom: float | None) -> float:
    """The z with the same tail probability as a t statistic (the statistic itself without degrees of freedom).

    Matching tail probabilities is how a t test is fitted to z boundaries (Jennison & Turnbull 2000,
    section 3.8); the upper and lower tails are matched separately so precision is kept far out.
    """
    if degrees_of_freedom is None:
        return t
    if not degrees_of_freedom > 0:
        raise ValueError(f"degrees of freedom must be positive, got {degrees_of_freedom}")
    # special.stdtr is the t CDF without scipy.stats' argument handling: this runs at every look of every
    # comparison, thousands of times per simulated benchmark study set.
    if t >= 0.0:
        return float(-special.ndtri(special.stdtr(degrees_of_freedom, -t)))
    return float(special.ndtri(special.stdtr(degrees_of_freedom, t)))


def repeated_confidence_interval(
    estimate: float,
    standard_error: float,
    design: Boundaries,
    look: int,
    *,
    degrees_of_freedom: float | None = None,
) -> tuple[float, float]:
    """The repeated confidence interval at `look` (1 = first): estimate -/+ c_k x standard error.

    c_k is the look's efficacy boundary (on the t scale when `degrees_of_freedom` is given). For a
    two-sided design at alpha the intervals of ALL looks cover the true difference together with
    probability >= 1 - alpha, so the interval stays valid whenever and however the study stopped. For a
    one-sided design at alpha each end is a 1 - alpha bound (a two-sided 1 - 2 alpha interval). An infinite
    boundary (nothing spent at that look) gives an unbounded interval.
    """
    _check_look(design, look)
    if not (standard_error >= 0.0 and math.isfinite(standard_error)):
        raise ValueError(f"the standard error must be finite and non-negative, got {standard_error}")
    dfs = None if degrees_of_freedom is None else [degrees_of_freedom] * design.looks
    c = critical_values(design, dfs)[look - 1]
    if not math.isfinite(c):
        return (-math.inf, math.inf)
    return (estimate - c * standard_error, estimate + c * standard_error)


def _upper_p(design: Boundaries, look: int, z: float, grid_size: int) -> float:
    """P under no effect of a more extreme result upwards in the stage-wise ordering: crossing the efficacy
    boundary at an earlier look, or reaching this look and seeing Z >= z here."""
    lower = design.lower_continuation()  # non-binding futility is ignored, as the boundaries were computed
    recursion = Recursion(0.0, grid_size)
    earlier = 0.0
    for t, a, b in zip(design.fractions[: look - 1], lower, design.efficacy, strict=False):
        earlier += recursion.above(t, b)
        recursion.advance(t, a, b)
    return earlier + recursion.above(design.fractions[look - 1], z)


def stagewise_p_value(
    statistic: float,
    design: Boundaries,
    look: int,
    *,
    degrees_of_freedom: float | None = None,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> float:
    """The stage-wise-ordering p-value for a comparison that stopped at `look` (1 = first) with `statistic`.

    Results are ordered by the look at which they stopped (earlier is more extreme), then by the statistic.
    One-sided designs: evidence for a positive difference. Two-sided designs: twice the smaller tail. It is
    at most the alpha spent by `look` exactly when the statistic crossed that look's boundary, so it agrees
    with the design's decision; a study stopped only at the last look with earlier boundaries out of reach
    gets the fixed design's p-value. With `degrees_of_freedom`, `statistic` is a t statistic, converted
    by its tail probability.
    """
    _check_look(design, look)
    z = z_from_t(statistic, degrees_of_freedom)
    upper = _upper_p(design, look, z, grid_size)
    if design.sided == 1:
        return min(1.0, max(0.0, upper))
    # Under no effect the symmetric design is a mirror image, so the lower tail at z is the upper at -z.
    lower = _upper_p(design, look, -z, grid_size)
    return min(1.0, max(0.0, 2.0 * min(upper, lower)))
