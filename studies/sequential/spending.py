"""Lan-DeMets error-spending functions: how much of a tail's error rate may be used up by information
fraction t (the share of the maximum seeds analysed so far).

Every function takes the fraction(s) t in [0, 1] and the level of ONE tail (a one-sided design's alpha, or
alpha / 2 for each tail of a two-sided design, as gsDesign, rpact and EAST apply them), and returns the
cumulative error spent by t: 0 at t = 0, the whole level at t = 1, never decreasing in between. The same
functions spend beta (the type II error) for futility boundaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special, stats

__all__ = [
    "SPENDING_FUNCTIONS",
    "SpendingFunction",
    "hwang_shih_decani",
    "obrien_fleming_spending",
    "pocock_spending",
    "spending_function",
]

SpendingFunction = Callable[[np.ndarray, float], np.ndarray]


def _fractions(t: np.ndarray | float) -> np.ndarray:
    fractions = np.asarray(t, dtype=np.float64)
    if np.any((fractions < 0.0) | (fractions > 1.0)) or np.any(np.isnan(fractions)):
        raise ValueError(f"information fractions must lie in [0, 1], got {t}")
    return fractions


def obrien_fleming_spending(t: np.ndarray | float, level: float) -> np.ndarray:
    """Lan & DeMets' O'Brien-Fleming-type function 2 - 2 Phi(z_{1 - level/2} / sqrt(t)).

    Spends almost nothing early (at t = 0.2 and level 0.025: 5e-7), so an early stop needs an
    overwhelming effect and the final boundary stays close to the fixed design's.
    """
    fractions = _fractions(t)
    z = stats.norm.isf(level / 2.0)
    with np.errstate(divide="ignore"):
        scaled = np.where(fractions > 0.0, z / np.sqrt(np.maximum(fractions, 1e-300)), np.inf)
    # ndtr(-x) keeps its relative precision far in the tail, where 1 - ndtr(x) rounds to 0.
    return np.asarray(2.0 * special.ndtr(-scaled))


def pocock_spending(t: np.ndarray | float, level: float) -> np.ndarray:
    """Lan & DeMets' Pocock-type function level * ln(1 + (e - 1) t): roughly equal nominal levels."""
    fractions = _fractions(t)
    return np.asarray(level * np.log1p((math.e - 1.0) * fractions))


def hwang_shih_decani(gamma: float) -> SpendingFunction:
    """Hwang, Shih & DeCani's family level * (1 - e^(-gamma t)) / (1 - e^(-gamma)); gamma = 0 spends
    linearly, gamma = -4 behaves like O'Brien-Fleming, gamma = 1 like Pocock."""
    if not math.isfinite(gamma):
        raise ValueError(f"gamma must be finite, got {gamma}")

    def spend(t: np.ndarray | float, level: float) -> np.ndarray:
        fractions = _fractions(t)
        if gamma == 0.0:
            return np.asarray(level * fractions)
        return np.asarray(level * np.expm1(-gamma * fractions) / math.expm1(-gamma))

    return spend


SPENDING_FUNCTIONS: dict[str, SpendingFunction] = {
    "obrien_fleming": obrien_fleming_spending,
    "pocock": pocock_spending,
}


def spending_function(name: str, gamma: float | None = None) -> SpendingFunction:
    """The spending function a spec names: "obrien_fleming", "pocock" or "hwang_shih_decani" (with gamma)."""
    if name == "hwang_shih_decani":
        if gamma is None:
            raise ValueError("the hwang_shih_decani spending function needs gamma")
        return hwang_shih_decani(gamma)
    if gamma is not None:
        raise ValueError(f"gamma applies to hwang_shih_decani only, not {name!r}")
    try:
        return SPENDING_FUNCTIONS[name]
    except KeyError:
        known = (*SPENDING_FUNCTIONS, "hwang_shih_decani")
        raise ValueError(f"unknown spending function {name!r}; choose one of {known}") from None
