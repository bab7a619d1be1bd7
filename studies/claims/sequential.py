"""Judging a claim on a sequential study: the design's own numbers, never a fixed-n test of its seeds.

A sequential study stops each comparison with its reference when its looks decide it, so its arms end
with different seed counts chosen by the data; a paired t interval over those seeds would overstate the
evidence. What its looks give instead, per comparison (`SequentialComparison`): the decision, the
repeated confidence interval (valid whenever the study stopped) and the stage-wise p-value, both at the
level the comparison was tested at under Holm's step-down. A claim is judged on those, so it can only
ask what the looks answered: on the primary metric, a method with the study's reference or a pair the
design names (in either order where the test reads the same both ways; a grid's arms are its points), as
`looks_comparison` finds them (`sequential_problem` says why a check cannot be, and the spec refuses such
a claim beside a design).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from studies.claims.looks_outcome import SequentialComparison, looks_comparison, reversed_comparison
from studies.claims.trials import describe_selector, same_value
from studies.stats import Comparison

__all__ = [
    "SequentialComparison",
    "SequentialStudy",
    "as_comparison",
    "holm_adjusted",
    "looks_comparison",
    "reversed_comparison",
    "sequential_note",
    "sequential_problem",
]

GROUP_SEQUENTIAL_T = "group-sequential paired t"


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


class SequentialStudy(Protocol):
    """What `sequential_problem` reads of a study's spec (studies.spec.StudySpec has it; the claims are
    below the spec, which asks them, so they name no type of it)."""

    kind: str
    methods: list[str]
    sequential: Any  # the spec's SequentialDesign: its pairs and test

    @property
    def reference(self) -> str: ...

    @property
    def sequential_arms(self) -> list[str]: ...

    @property
    def sequential_reference(self) -> str | None: ...

    def grid_points(self, method: str) -> Sequence[Any]: ...

    def arm_of(self, method: str, group: str | None) -> str: ...


def sequential_problem(check: object, spec: SequentialStudy) -> str | None:
    """Why `spec`'s sequential design cannot answer `check` (None: it can). Its looks compare arms on the
    primary metric (each method with the reference, and the design's pairs): a `difference` or `ordering`
    check of such pairs only, each selector naming one arm."""
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
    assert spec.sequential is not None
    reference = spec.sequential_reference
    compared = [
        (arm, reference) for arm in spec.sequential_arms if reference is not None and arm != reference
    ]
    compared += [(method, against) for method, against in spec.sequential.pairs]
    symmetric = spec.sequential.test != "non_inferiority"
    for pair in pairs:
        method = _arm(spec, pair.method)
        against = _arm(spec, pair.reference if pair.reference is not None else spec.reference)
        answered = (method, against) in compared or (symmetric and (against, method) in compared)
        if method is None or against is None or not answered:
            return (
                f"the check compares {describe_selector(pair.method)} with "
                f"{describe_selector(pair.reference or spec.reference)}, rows other than a method with the "
                "reference or a pair of the design, and the looks compare only those"
            )
    return None


def _arm(spec: SequentialStudy, selector: str | Mapping[str, object]) -> str | None:
    """The one arm of `spec` a claim's row selector picks (None: none, or several)."""
    chosen: Mapping[str, object] = {"method": selector} if isinstance(selector, str) else selector
    method = chosen.get("method")
    if not isinstance(method, str) or method not in spec.methods:
        return None
    knobs = {k: v for k, v in chosen.items() if k != "method"}
    if spec.kind != "grid":
        return method if not knobs else None
    arms = [
        spec.arm_of(method, point.label)
        for point in spec.grid_points(method)
        if all(same_value(point.knobs.get(k), v) for k, v in knobs.items())
    ]
    return arms[0] if len(arms) == 1 else None
