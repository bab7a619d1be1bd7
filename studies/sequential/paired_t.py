"""Group-sequential boundaries for a paired t statistic, calibrated on the t process itself.

Matching each look's z boundary to a t quantile by its tail probability (`critical_values`) keeps every
look's own error, but not the joint one: with few seeds the variance estimates of successive looks differ,
the t statistics are less correlated than the z statistics they stand in for, and the design's error runs
above alpha (simulated at 3, 5, 7, 9, 10 seeds and two-sided 0.05: 0.056-0.058 for one comparison without
futility). Under no difference the paired t statistics at looks of n_1 < n_2 < ... seeds have a law that
depends on the seed counts alone (the differences' mean and spread cancel), so the boundaries can be
computed on that law exactly, up to simulation error: `PATHS` reference paths of standard normal
differences, drawn once from a fixed generator, give each look's boundary as the quantile that spends the
error the spending function allows by then among the paths still running. Earlier boundaries never change
when a look is added, as with any error-spending design.

The same paths give the numbers after a stop: under any true difference, (mean - difference) / se follows
the same law, so the repeated confidence intervals (estimate -/+ c_k se) cover with the design's level over
all looks together, and the stage-wise-ordering p-value counts the paths more extreme in that ordering. A
p-value is at most the error spent by its look exactly when the statistic crossed the look's boundary.
Each path's statistic at a look is replaced by the exact t quantile of its rank there, so a single look's
boundary is the t quantile itself and simulation error remains only in how the looks depend on each other.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

import numpy as np
from scipy import stats

from studies.sequential.inference import z_from_t
from studies.sequential.spending import spending_function

__all__ = ["PATHS", "PairedTDesign", "paired_t_design"]

Sided = Literal[1, 2]

PATHS = 200_000
_SEED = 20_261_206  # fixed: the same boundaries on every machine and every replay of a study
# Below this many paths' worth of error a quantile among the paths is too coarse to place a boundary or a
# p-value; the exact t tail of the look alone (a bound on the joint one) is used instead.
_FEWEST_PATHS = 50


class _NullPaths:
    """Paired t statistics of the reference paths at any seed count, drawn one seed column at a time so
    the statistic at n seeds is the same whatever larger count was asked for first."""

    def __init__(self, paths: int, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._paths = paths
        self._seed = seed
        self._sum = np.zeros(paths)
        self._sum_of_squares = np.zeros(paths)
        self._drawn = 0
        self._columns: dict[int, np.ndarray] = {}

    def t_at(self, seeds: int) -> np.ndarray:  # (paths,)
        if seeds < 2:
            raise ValueError(f"a paired t needs at least two seeds, got {seeds}")
        if seeds not in self._columns:
            if seeds < self._drawn:
                # A study asks for its counts in increasing order; a smaller one asked later is redrawn.
                self._columns[seeds] = _NullPaths(self._paths, self._seed).t_at(seeds)
            else:
                self._columns[seeds] = self._extend_to(seeds)
        return self._columns[seeds]

    def _extend_to(self, seeds: int) -> np.ndarray:
        while self._drawn < seeds:
            column = self._rng.standard_normal(self._paths)
            self._sum += column
            self._sum_of_squares += column * column
            self._drawn += 1
        mean = self._sum / seeds
        variance = (self._sum_of_squares - seeds * mean * mean) / (seeds - 1)
        simulated = mean / np.sqrt(variance / seeds)
        # Each path keeps its rank but takes the exact t quantile of that rank: every look's own law is
        # then exact, and simulation error is left only in how the looks depend on each other.
        ranks = np.empty(self._paths)
        ranks[np.argsort(simulated, kind="stable")] = np.arange(1, self._paths + 1)
        return stats.t.ppf(ranks / (self._paths + 1), seeds - 1)


_REFERENCE = _NullPaths(PATHS, _SEED)


@dataclass(frozen=True)
class PairedTDesign:
    """Efficacy boundaries on the paired t scale at the looks taken so far.

    A one-sided design rejects at look k when T_k >= efficacy_t[k]; a two-sided one when |T_k| >=
    efficacy_t[k]. An infinite boundary: the look had less error to spend than one reference path in
    PATHS, so it cannot stop there (the error carries over to the next look).
    """

    seeds: tuple[int, ...]  # paired seeds at each look
    max_seeds: int
    level: float  # the whole type I error (both tails when two-sided)
    sided: Sided
    spending: str
    efficacy_t: tuple[float, ...]
    spent: tuple[float, ...]  # cumulative error the reference paths spent by each look

    @property
    def looks(self) -> int:
        return len(self.seeds)

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(min(1.0, n / self.max_seeds) for n in self.seeds)

    @cached_property
    def efficacy_z(self) -> tuple[float, ...]:
        """The boundaries on the z scale (matched by tail probability), where look statistics are drawn."""
        return tuple(
            z_from_t(c, n - 1) if math.isfinite(c) else c
            for c, n in zip(self.efficacy_t, self.seeds, strict=True)
        )

    def interval(self, estimate: float, standard_error: float, look: int) -> tuple[float, float]:
        """The repeated confidence interval at `look` (1 = first): estimate -/+ c_k x standard error.

        Two-sided: the intervals of all looks cover the true difference together with probability
        1 - level. One-sided: each end is a 1 - level bound (a two-sided 1 - 2 level interval).
        """
        self._check_look(look)
        if not (standard_error >= 0.0 and math.isfinite(standard_error)):
            raise ValueError(f"the standard error must be finite and non-negative, got {standard_error}")
        c = self.efficacy_t[look - 1]
        if not math.isfinite(c):
            return (-math.inf, math.inf)
        return (estimate - c * standard_error, estimate + c * standard_error)

    def stagewise_p(self, statistic: float, look: int) -> float:
        """The stage-wise-ordering p-value of a comparison that stopped at `look` with t `statistic`.

        Ordered by the look of the stop (earlier is more extreme), then by the statistic. One-sided: the
        evidence for a positive difference; two-sided: twice the smaller tail. Counted on the reference
        paths; a tail too thin for them to count takes the look's own exact t tail, an upper bound.
        """
        self._check_look(look)
        upper, lower = self._tails(statistic, look)
        return min(1.0, upper if self.sided == 1 else 2.0 * min(upper, lower))

    def _tails(self, statistic: float, look: int) -> tuple[float, float]:
        """P(a more extreme result upwards, downwards) in the stage-wise ordering, on the paths."""
        running = np.ones(PATHS, dtype=bool)
        upper = lower = 0
        for n, c in zip(self.seeds[: look - 1], self.efficacy_t, strict=False):
            t = _REFERENCE.t_at(n)
            up = running & (t >= c)
            down = running & (t <= -c) if self.sided == 2 else np.zeros(PATHS, dtype=bool)
            upper += int(up.sum())
            lower += int(down.sum())
            running &= ~(up | down)
        n = self.seeds[look - 1]
        t = _REFERENCE.t_at(n)
        return (
            upper / PATHS + _piece(int((running & (t >= statistic)).sum()), stats.t.sf(statistic, n - 1)),
            lower / PATHS + _piece(int((running & (t <= statistic)).sum()), stats.t.cdf(statistic, n - 1)),
        )

    def _check_look(self, look: int) -> None:
        if not 1 <= look <= self.looks:
            raise ValueError(f"look must be between 1 and {self.looks} (1 = the first look), got {look}")


def _piece(count: int, exact_tail: float) -> float:
    """P(still running at the look and beyond the statistic there): counted on the paths, or where too
    few reach it, the look's own t tail (a bound) capped at the count's resolution, so that a statistic
    beyond a boundary placed by the paths never gets a p-value above the error spent there."""
    if count >= _FEWEST_PATHS:
        return count / PATHS
    return min(float(exact_tail), _FEWEST_PATHS / PATHS)


@lru_cache(maxsize=8192)
def _calibrated(
    seeds: tuple[int, ...], max_seeds: int, level: float, sided: Sided, spending: str
) -> PairedTDesign:
    fractions = np.minimum(1.0, np.asarray(seeds, dtype=float) / max_seeds)
    tail_level = level / sided
    cumulative = sided * np.maximum.accumulate(spending_function(spending)(fractions, tail_level))
    cumulative[fractions >= 1.0] = level  # the look at the maximum spends whatever is left
    running = np.ones(PATHS, dtype=bool)
    spent_so_far = 0.0
    boundaries: list[float] = []
    spent: list[float] = []
    for n, allowed in zip(seeds, cumulative, strict=True):
        t = _REFERENCE.t_at(n)
        statistic = np.abs(t) if sided == 2 else t
        survivors = statistic[running]
        increment = float(allowed) - spent_so_far
        if increment <= 0.0 or survivors.size == 0:
            c = math.inf
        elif increment * PATHS < _FEWEST_PATHS:
            # Too little to spend for the paths to place: the look's own t quantile at that error, which
            # is exact at the first look and spends at most that later (surviving is a subset).
            c = float(stats.t.isf(increment / sided, n - 1))
            spent_so_far = float(allowed)
        else:
            target = min(math.floor(increment * PATHS + 1e-9), survivors.size)
            c = float(np.partition(survivors, survivors.size - target)[survivors.size - target])
            spent_so_far += target / PATHS
        running &= statistic < c
        boundaries.append(c)
        spent.append(spent_so_far)
    return PairedTDesign(
        seeds=seeds,
        max_seeds=max_seeds,
        level=level,
        sided=sided,
        spending=spending,
        efficacy_t=tuple(boundaries),
        spent=tuple(spent),
    )


def paired_t_design(
    seeds: Sequence[int], *, max_seeds: int, level: float, sided: Sided, spending: str = "obrien_fleming"
) -> PairedTDesign:
    """The design's boundaries at looks of `seeds` paired seeds (strictly increasing, each >= 2 and at most
    `max_seeds`), spending `level` by `spending` at the fractions seeds / max_seeds."""
    counts = tuple(int(n) for n in seeds)
    if not counts:
        raise ValueError("a design needs at least one look")
    if counts[0] < 2 or any(b <= a for a, b in itertools.pairwise(counts)):
        raise ValueError(f"seed counts must increase strictly from at least 2, got {list(seeds)}")
    if counts[-1] > max_seeds:
        raise ValueError(f"a look has {counts[-1]} seeds, above the maximum {max_seeds}")
    if sided not in (1, 2):
        raise ValueError(f"sided must be 1 or 2, got {sided}")
    if not 0.0 < level < 0.5:
        raise ValueError(f"the level must lie in (0, 0.5), got {level}")
    return _calibrated(counts, int(max_seeds), float(level), sided, spending)
