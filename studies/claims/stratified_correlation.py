"""`stratified_spearman`: a rank correlation held within the strata of a confounder, with a stratified
permutation test.

The statistic is the size-weighted mean of the within-stratum Spearman correlations; its two-sided
p-value permutes the second variable within each stratum only, so the contrast between strata never
enters the null. The test is exact when the strata allow at most EXACT_MAX_ARRANGEMENTS arrangements,
else it draws RANDOM_ARRANGEMENTS seeded random ones.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

__all__ = [
    "EXACT_MAX_ARRANGEMENTS",
    "RANDOM_ARRANGEMENTS",
    "StratifiedCorrelation",
    "stratified_spearman",
]

EXACT_MAX_ARRANGEMENTS = 100_000
RANDOM_ARRANGEMENTS = 20_000
_PERMUTATION_SEED = 0  # a fixed seed: the same data always give the same p-value


@dataclasses.dataclass(frozen=True)
class StratifiedCorrelation:
    """The within-stratum Spearman correlations and their combined permutation test."""

    statistic: float  # size-weighted mean of the within-stratum rhos
    p_value: float  # two-sided, from permuting within strata
    exact: bool  # every arrangement enumerated (else seeded random ones)
    n: int  # points in the strata that count
    by_stratum: Mapping[str, tuple[float, int]]  # stratum -> (rho, points)


def _centred_ranks(values: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(values)
    return ranks - ranks.mean()


def _stratum_rhos(x: np.ndarray, y: np.ndarray, arrangements: np.ndarray) -> np.ndarray:
    """Spearman's rho of x with y under each row of index `arrangements` (permutations of y)."""
    rx, ry = _centred_ranks(x), _centred_ranks(y)
    scale = float(np.linalg.norm(rx) * np.linalg.norm(ry))
    return (ry[arrangements] @ rx) / scale


def stratified_spearman(
    x: Sequence[float], y: Sequence[float], strata: Sequence[str]
) -> StratifiedCorrelation | None:
    """The size-weighted mean within-stratum Spearman rho of y on x, with the two-sided p-value of the
    permutation test that shuffles y within strata only; strata with fewer than 3 points, or no spread in
    x or y, do not count. None when no stratum counts."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, stratum in enumerate(strata):
        groups[stratum].append(index)
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    kept = {
        name: (xs[idx], ys[idx])
        for name, idx in sorted(groups.items())
        if len(idx) >= 3 and np.ptp(xs[idx]) > 0.0 and np.ptp(ys[idx]) > 0.0
    }
    if not kept:
        return None
    sizes = {name: len(pair[0]) for name, pair in kept.items()}
    total = sum(sizes.values())
    weights = {name: size / total for name, size in sizes.items()}
    observed = {
        name: float(_stratum_rhos(px, py, np.arange(len(px))[None, :])[0]) for name, (px, py) in kept.items()
    }
    statistic = sum(weights[name] * rho for name, rho in observed.items())
    exact = math.prod(math.factorial(size) for size in sizes.values()) <= EXACT_MAX_ARRANGEMENTS
    if exact:
        # Every arrangement: the null distribution is the sum of independent per-stratum distributions.
        null = np.zeros(1)
        for name, (px, py) in kept.items():
            arrangements = np.array(list(itertools.permutations(range(len(px)))))
            null = np.add.outer(null, weights[name] * _stratum_rhos(px, py, arrangements)).ravel()
        extreme = np.count_nonzero(np.abs(null) >= abs(statistic) - 1e-12)
        p_value = extreme / null.size
    else:
        rng = np.random.default_rng(_PERMUTATION_SEED)
        null = np.zeros(RANDOM_ARRANGEMENTS)
        for name, (px, py) in kept.items():
            arrangements = rng.permuted(np.tile(np.arange(len(px)), (RANDOM_ARRANGEMENTS, 1)), axis=1)
            null += weights[name] * _stratum_rhos(px, py, arrangements)
        extreme = np.count_nonzero(np.abs(null) >= abs(statistic) - 1e-12)
        p_value = (extreme + 1) / (RANDOM_ARRANGEMENTS + 1)
    return StratifiedCorrelation(
        statistic=float(statistic),
        p_value=float(min(1.0, p_value)),
        exact=exact,
        n=total,
        by_stratum={name: (observed[name], sizes[name]) for name in kept},
    )
