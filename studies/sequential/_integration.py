"""Armitage, McPherson & Rowe's recursive numerical integration for group-sequential z statistics.

The z statistics Z_1, ..., Z_K at information fractions t_1 < ... < t_K have the canonical joint
distribution (Jennison & Turnbull 2000, ch. 3): Z_k sqrt(t_k) is a Brownian motion with drift `drift`
observed at t_k, so Z_k ~ N(drift sqrt(t_k), 1) and the increments between looks are independent. The
sub-density of Z_k on the paths that have not stopped before k is carried on a grid over the continuation
region and pushed through the normal increment to the next look; the probability of leaving at the next
look is then a closed-form normal tail integrated against it. The grid and the Simpson weights are Jennison
& Turnbull's (2000, section 19.2), also used by gsDesign: 6r - 1 points around the look's mean, denser
near it, trimmed to the continuation region; r = 18 gives probabilities to about 1e-6 relative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

__all__ = ["DEFAULT_GRID_SIZE", "Recursion", "crossing_probabilities"]

DEFAULT_GRID_SIZE = 18  # Jennison & Turnbull's r; error falls fast with r, cost grows as r^2 per look


def _grid(mean: float, lower: float, upper: float, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Simpson nodes and weights over (lower, upper), following the density centred on `mean`."""
    i = np.arange(1, 6 * r, dtype=np.float64)
    offsets = np.where(
        i < r,
        -3.0 - 4.0 * np.log(r / i),
        np.where(
            i <= 5 * r, -3.0 + 3.0 * (i - r) / (2.0 * r), 3.0 + 4.0 * np.log(r / np.maximum(6 * r - i, 1))
        ),
    )
    x = mean + offsets
    inside = x[(x > lower) & (x < upper)]
    # The boundaries themselves become end nodes, so the integral stops exactly at them.
    start = [lower] if lower > x[0] else []
    end = [upper] if upper < x[-1] else []
    odd = np.concatenate([start, inside, end])
    if odd.size < 2:
        return np.empty(0), np.empty(0)
    nodes = np.empty(2 * odd.size - 1)
    nodes[0::2] = odd
    nodes[1::2] = (odd[:-1] + odd[1:]) / 2.0
    weights = np.zeros_like(nodes)
    widths = np.diff(odd)  # one Simpson panel per pair of neighbouring odd nodes
    weights[0:-1:2] += widths / 6.0
    weights[2::2] += widths / 6.0
    weights[1::2] = 4.0 * widths / 6.0
    return nodes, weights


class Recursion:
    """The paths still running after the looks so far, for one drift.

    Call `above` / `below` for the probability of leaving across a candidate boundary at the next look,
    then `advance` with the boundaries that look actually used.
    """

    def __init__(self, drift: float = 0.0, grid_size: int = DEFAULT_GRID_SIZE) -> None:
        self.drift = drift
        self.grid_size = grid_size
        self.fraction = 0.0  # information fraction of the last look taken (0: none yet)
        self.nodes = np.empty(0)
        self.mass = np.empty(0)  # Simpson weight x sub-density at each node
        self.exhausted = False  # every path has stopped: nothing is left to cross later

    def _standardised(self, t: float, z: float) -> np.ndarray | float:
        """(z sqrt(t) - Z_prev sqrt(t_prev) - drift (t - t_prev)) / sqrt(t - t_prev) for every node."""
        if t <= self.fraction:
            raise ValueError(f"information fractions must increase, got {t} after {self.fraction}")
        if self.fraction == 0.0:
            return z - self.drift * math.sqrt(t)
        step = t - self.fraction
        return (z * math.sqrt(t) - self.nodes * math.sqrt(self.fraction) - self.drift * step) / math.sqrt(
            step
        )

    def above(self, t: float, z: float) -> float:
        """P(still running, and Z >= z at the next look, at fraction t)."""
        if self.exhausted or z == math.inf:
            return 0.0
        tail = special.ndtr(-self._standardised(t, z))
        return float(tail if self.fraction == 0.0 else np.dot(self.mass, tail))

    def below(self, t: float, z: float) -> float:
        """P(still running, and Z <= z at the next look, at fraction t)."""
        if self.exhausted or z == -math.inf:
            return 0.0
        tail = special.ndtr(self._standardised(t, z))
        return float(tail if self.fraction == 0.0 else np.dot(self.mass, tail))

    def advance(self, t: float, lower: float, upper: float) -> None:
        """Take the look at fraction t: the paths with lower < Z < upper go on."""
        mean = self.drift * math.sqrt(t)
        nodes, weights = _grid(mean, lower, upper, self.grid_size)
        if self.exhausted or nodes.size == 0:
            self.fraction, self.exhausted = t, True
            return
        if self.fraction == 0.0:
            density = np.exp(-0.5 * (nodes - mean) ** 2) / math.sqrt(2.0 * math.pi)
        else:
            step = t - self.fraction
            # (new nodes, old nodes): the normal increment's density, in the z scale of the new look.
            shift = nodes[:, None] * math.sqrt(t) - self.nodes[None, :] * math.sqrt(self.fraction)
            kernel = np.exp(-0.5 * (shift - self.drift * step) ** 2 / step) / math.sqrt(2.0 * math.pi * step)
            density = kernel @ self.mass * math.sqrt(t)
        self.nodes, self.mass, self.fraction = nodes, weights * density, t


def crossing_probabilities(
    fractions: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    lower: Sequence[float] | np.ndarray,
    *,
    drift: float = 0.0,
    grid_size: int = DEFAULT_GRID_SIZE,
) -> tuple[np.ndarray, np.ndarray]:
    """P(first leaving above `upper`) and P(first leaving below `lower`) at each look, under `drift`."""
    values = tuple(float(t) for t in fractions)
    recursion = Recursion(drift, grid_size)
    up = np.zeros(len(values))
    down = np.zeros(len(values))
    for k, (t, a, b) in enumerate(zip(values, lower, upper, strict=True)):
        up[k] = recursion.above(t, b)
        down[k] = recursion.below(t, a)
        recursion.advance(t, a, b)
    return up, down
