"""The alpha each comparison of a study gets, so that the family-wise error over all comparisons and all
looks stays at or below the study's alpha.

Each comparison runs its own group-sequential design at its share of alpha. With Holm's step-down
(Ye, Li, Jiang & Zhang 2013; the group-sequential case of Maurer & Bretz 2013), once j comparisons have
been rejected every open one is tested at alpha / (m - j): its boundaries are recomputed at that level
over all of its looks so far, with the same spending function and fractions, and it is rejected if its
statistic at any look already taken crosses them. Comparisons closed for futility keep their share
(non-binding futility gives nothing back).
"""

from __future__ import annotations

__all__ = ["holm_level"]


def holm_level(alpha: float, comparisons: int, rejected: int = 0) -> float:
    """The level each still-open comparison is tested at when `rejected` of `comparisons` have been rejected.

    With rejected = 0 it is Bonferroni's alpha / m, which alone already controls the family-wise error.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    if comparisons < 1:
        raise ValueError(f"need at least one comparison, got {comparisons}")
    if not 0 <= rejected < comparisons:
        raise ValueError(f"rejected must lie in [0, {comparisons}), got {rejected}")
    return alpha / (comparisons - rejected)
