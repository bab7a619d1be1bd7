"""Judging a claim on a sequential study: the design's own numbers, never a fixed-n test of its seeds.

A sequential study stops each comparison with its reference when its looks decide it, so its arms end
with different seed counts chosen by the data; a paired t interval over those seeds would overstate the
evidence. What its looks give instead, per comparison (`SequentialComparison`): the decision, the
repeated confidence interval (valid whenever the study stopped) and the stage-wise p-value, both at the
level the comparison was tested at under Holm's step-down. A claim is judged on those, so it can only
ask what the looks answered: pairs of a method with the study's reference on the primary metric
(`sequential_problem` says why a check cannot be, and the spec refuses such a claim beside a design).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from studies.stats import Comparison

__all__ = ["SequentialComparison", "as_comparison", "holm_adjusted", "sequential_note", "sequential_problem"]

GROUP_SEQUENTIAL_T = "group-sequential paired t"


@dataclass(frozen=True)
class SequentialComparison:
    """One comparison with the reference as the looks left it, in metric units (method - reference)."""

    method: str
    decision: str  # a key of studies.sequential.DECISIONS
    decision_text: str
    seeds: int  # paired seeds at its last look
    look: int | None  # the look its numbers come from; None before it had one
    estimate: float | None
    interval_low: float | None  # repeated confidence interval at `tested_at_level`
    interval_high: float | None
    interval_level: float | None  # its coverage
    p_value: float | None  # stage-wise ordering; None while open
    tested_at_level: float | None  # Holm's level at its last look
    alpha: float  # the design's family-wise alpha


def as_comparison(fixed: Comparison, outcome: SequentialComparison) -> Comparison:
    """The fixed-seed comparison of the same rows with the looks' numbers in place of the t test's: the
    interval is the repeated one and p the stage-wise one; the effect size and power note stay descriptive."""
    return dataclasses.replace(
        fixed,
        n=outcome.seeds,
        n_reference=outcome.seeds,
        test=GROUP_SEQUENTIAL_T,
        p_value=outcome.p_value,
        diff_mean=outcome.estimate,
        diff_ci_low=outcome.interval_low,
        diff_ci_high=outcome.interval_high,
        confidence=outcome.interval_level if outcome.interval_level is not None else fixed.confidence,
        p_t=outcome.p_value,
        p_wilcoxon=None,
        wilcoxon_method=None,
    )


def holm_adjusted(outcome: SequentialComparison) -> float | None:
    """The stage-wise p on the scale of the design's alpha: p x alpha / the level it was tested at (Holm's
    adjusted p), so that it is below alpha exactly when the looks rejected the comparison."""
    if outcome.p_value is None or not outcome.tested_at_level:
        return None
    return min(1.0, outcome.p_value * outcome.alpha / outcome.tested_at_level)


def sequential_note(outcome: SequentialComparison) -> str:
    where = f" at look {outcome.look}" if outcome.look is not None else ""
    level = (
        f"; repeated {outcome.interval_level:.1%} interval and stage-wise p at Holm's level "
        f"{outcome.tested_at_level:.4g}"
        if outcome.interval_level is not None and outcome.tested_at_level is not None
        else ""
    )
    return f"sequential design: {outcome.decision_text}{where} with {outcome.seeds} paired seeds{level}"


def sequential_problem(check: object, reference: str) -> str | None:
    """Why a sequential design's looks cannot answer `check` (None: they can). Its looks compare each method
    with `reference` on the primary metric: a `difference` or `ordering` check of such pairs only."""
    kind = getattr(check, "type", None)
    if kind == "difference":
        pairs = [check.pair()]  # type: ignore[attr-defined]
    elif kind == "ordering":
        pairs = list(check.pairs)  # type: ignore[attr-defined]
    else:
        return f"a {kind} check reads every seed of every row, and the looks stop arms early"
    metric = getattr(check, "metric", None)
    if metric not in (None, "primary"):
        return f"the check reads {metric}, and the looks test the primary metric only"
    for pair in pairs:
        if not isinstance(pair.method, str) or pair.reference not in (None, reference):
            return (
                "the check compares rows other than a method with the reference "
                f"({pair.method} against {pair.reference or reference}), and the looks compare only those"
            )
    return None
