"""The seeds a fixed design needs: every method on n seeds, each comparison with the reference decided once,
at the sequential design's test, effect or margin, alpha and power (studies.stats.power).

The family-wise alpha is split Bonferroni's way over the comparisons, the level Holm's step-down starts at,
so n is what the hardest case needs. Non-inferiority and equivalence are one-sided tests at that level
(equivalence: both sides, TOST); the powers are the noncentral t's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from studies.planning.model import Cost, FixedDesignPlan, Spread
from studies.spec import SequentialDesign, StudySpec
from studies.stats.power import (
    DEFAULT_POWER,
    minimum_detectable_effect,
    seeds_for_equivalence,
    seeds_for_power,
)

__all__ = ["MAX_FIXED_SEEDS", "fixed_design", "fixed_seeds"]

MAX_FIXED_SEEDS = 10_000
_DEFAULT_ALPHA = 0.05  # what the results tables test at (a fixed spec states no alpha)


def fixed_seeds(design: SequentialDesign, sd: float, comparisons: int) -> tuple[int | None, str]:
    """(seeds per method, the question in words) for a fixed design of `design`'s test."""
    level = design.alpha / comparisons
    family = f", each at alpha {design.alpha:g}/{comparisons}" if comparisons > 1 else ""
    if design.test == "superiority":
        effect = float(design.effect or 0.0)
        n = seeds_for_power(effect, sd, alpha=level, power=design.power, max_seeds=MAX_FIXED_SEEDS)
        question = f"a true difference of {effect:g} (two-sided paired t{family})"
    elif design.test == "non_inferiority":
        margin = float(design.margin or 0.0)
        # A two-sided test at 2 x level rejects on the side that matters exactly when the one-sided test
        # at level does; the other tail adds nothing at a true difference of 0.
        n = seeds_for_power(margin, sd, alpha=2.0 * level, power=design.power, max_seeds=MAX_FIXED_SEEDS)
        question = f"non-inferiority within {margin:g} when the methods are level (one-sided{family})"
    else:
        margin = float(design.margin or 0.0)
        # equivalence_power tests each side at alpha / 2.
        n = seeds_for_equivalence(
            0.0, sd, margin, alpha=2.0 * level, power=design.power, max_seeds=MAX_FIXED_SEEDS
        )
        question = f"equivalence within ±{margin:g} when the methods are level (TOST{family})"
    return n, question


def fixed_design(spec: StudySpec, spread: Spread, *, cost_at: Callable[[int], Cost]) -> FixedDesignPlan:
    comparisons = spec.sequential_comparisons if spec.sequential is not None else len(spec.methods) - 1
    if (spec.kind == "grid" and spec.sequential is None) or comparisons < 1:
        why = (
            "a grid study is judged point by point"
            if spec.kind == "grid"
            else "one method: nothing to compare"
        )
        return FixedDesignPlan(
            question="",
            comparisons=0,
            seeds_needed=None,
            cost=None,
            detectable_effect=None,
            reason=f"not sized: {why}",
        )
    sd = spread.sd
    if spec.sequential is None:
        seeds = len(spec.seeds)
        level = _DEFAULT_ALPHA / comparisons
        detectable = (
            minimum_detectable_effect(sd / math.sqrt(seeds), seeds - 1, alpha=level, power=DEFAULT_POWER)
            if sd is not None and seeds >= 2
            else None
        )
        found = (
            f"its {seeds} seeds find a true difference of {detectable:.4g} with {DEFAULT_POWER:.0%} power "
            f"(two-sided paired t at {_DEFAULT_ALPHA:g}/{comparisons}, sd {sd:.3g}, {spread.source})"
            if detectable is not None
            else "no detectable difference without a spread and two seeds"
        )
        return FixedDesignPlan(
            question="",
            comparisons=comparisons,
            seeds_needed=None,
            cost=None,
            detectable_effect=detectable,
            reason=f"the spec states no effect of interest (a sequential design does): {found}",
        )
    if sd is None:
        return FixedDesignPlan(
            question="",
            comparisons=comparisons,
            seeds_needed=None,
            cost=None,
            detectable_effect=None,
            reason=f"not sized: {spread.basis}",
        )
    n, question = fixed_seeds(spec.sequential, sd, comparisons)
    if n is None:
        return FixedDesignPlan(
            question=question,
            comparisons=comparisons,
            seeds_needed=None,
            cost=None,
            detectable_effect=None,
            reason=f"more than {MAX_FIXED_SEEDS:,} seeds per method at sd {sd:.3g}",
        )
    design = spec.sequential
    reason = (
        f"{n} seeds per method give {design.power:.0%} power for {question}, at sd {sd:.3g} ({spread.source})"
    )
    return FixedDesignPlan(
        question=question,
        comparisons=comparisons,
        seeds_needed=n,
        cost=cost_at(n),
        detectable_effect=None,
        reason=reason,
    )
