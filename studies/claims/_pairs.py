"""Paired comparisons of one row against another on a metric: the building block of `difference`,
`ordering`, `mean_spike` and `sweep`.

Rows are selected by method name or by a selector ({method, knob: value, ...}); seeds pair the rows, the
primary test is studies.stats' paired t-test, and p-values are Holm-adjusted across the pairs of one
check. Directional expectations (better / worse in the metric's direction, higher / lower in raw units)
are supported by a significant difference in the expected direction and contradicted by a significant
one in the other, or by an interval that rules out the claimed margin. `no_difference` is an
equivalence claim: supported when the whole interval lies within ±margin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from studies.claims._base import comparison_finding, directional_verdict, power_note
from studies.claims.sequential import (
    SequentialComparison,
    as_comparison,
    holm_adjusted,
    looks_comparison,
    sequential_note,
)
from studies.claims.trials import StudyData, describe_selector
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_TESTED, SUPPORTED, Finding
from studies.stats import Comparison, adjust, compare_by_seed

__all__ = [
    "Expectation",
    "PairSpec",
    "RowSelector",
    "describe_pairs",
    "evaluate_pairs",
    "judge_comparison",
    "paper_difference",
    "resolved_margin",
]

Expectation = Literal["better", "worse", "higher", "lower", "no_difference"]
RowSelector = str | dict[str, Any]


class PairSpec(BaseModel):
    """`method` compared with `reference` (None: the study's reference method) on `metric`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    method: RowSelector
    reference: RowSelector | None = None
    expect: Expectation = "better"
    # Equivalence (no_difference) needs a margin; for directional claims a margin turns "the interval
    # rules out an effect this large" into a contradiction. Absolute, or relative to the reference mean.
    margin: float | None = Field(None, gt=0.0)
    relative_margin: float | None = Field(None, gt=0.0, lt=1.0)
    paper_difference: float | None = None  # the paper's method − reference, when it states one

    @model_validator(mode="after")
    def _margin_for_equivalence(self) -> PairSpec:
        if self.margin is not None and self.relative_margin is not None:
            raise ValueError("give margin or relative_margin, not both")
        if self.expect == "no_difference" and self.margin is None and self.relative_margin is None:
            raise ValueError("expect: no_difference needs a margin (or relative_margin): equal within what?")
        return self


def _sign(expect: Expectation, higher_is_better: bool) -> int:
    """+1 when the claim expects method − reference > 0, −1 when < 0, 0 for equivalence."""
    if expect == "higher":
        return 1
    if expect == "lower":
        return -1
    if expect == "no_difference":
        return 0
    better = 1 if higher_is_better else -1
    return better if expect == "better" else -better


def _expected_text(sign: int, margin: float | None) -> str:
    if sign == 0:
        return f"within ±{margin:.4g}"
    return "> 0" if sign > 0 else "< 0"


def _reference_mean(data: StudyData, selector: RowSelector, metric: str | None) -> float | None:
    values = [v for v in data.by_seed(selector, metric).values() if v is not None]
    return sum(values) / len(values) if values else None


def resolved_margin(pair: PairSpec, data: StudyData, metric: str | None) -> float | None:
    """The pair's margin in metric units: `margin`, or `relative_margin` times the reference's mean (None
    when the reference has no values)."""
    if pair.relative_margin is None:
        return pair.margin
    reference = pair.reference if pair.reference is not None else data.reference
    reference_mean = _reference_mean(data, reference, metric)
    return None if reference_mean is None else pair.relative_margin * abs(reference_mean)


def judge_comparison(
    comparison: Comparison, p_adjusted: float | None, sign: int, margin: float | None, alpha: float
) -> tuple[str, str]:
    """The verdict on one pair and why: `sign` +1 / −1 for a directional claim, 0 for equivalence
    within ±`margin`."""
    diff, low, high = comparison.diff_mean, comparison.diff_ci_low, comparison.diff_ci_high
    n = comparison.n
    if diff is None:
        return INCONCLUSIVE, "no completed seed pairs to compare"
    if low is None or high is None:
        return INCONCLUSIVE, f"no interval with n = {n}: " + power_note(comparison.mde_80, n)
    interval = f"{diff:+.4g} [{low:+.4g}, {high:+.4g}]"
    if sign == 0:
        assert margin is not None
        if -margin <= low and high <= margin:
            return SUPPORTED, f"the interval {interval} lies within ±{margin:.4g}"
        if low > margin or high < -margin:
            return CONTRADICTED, f"the interval {interval} lies outside ±{margin:.4g}"
        return INCONCLUSIVE, f"the interval {interval} straddles ±{margin:.4g}; " + power_note(
            comparison.mde_80, n
        )
    verdict, note = directional_verdict(comparison, p_adjusted, sign, alpha)
    if verdict == INCONCLUSIVE and margin is not None:
        best_case = high if sign > 0 else -low  # the largest effect in the expected direction the CI allows
        if best_case < margin:
            return (
                CONTRADICTED,
                f"the interval {interval} rules out an effect of {margin:.4g} in the expected direction",
            )
    return verdict, f"{note}; difference {interval}"


def paper_difference(pair: PairSpec, paper: Mapping[str, float]) -> float | None:
    """The paper's method − reference: stated on the pair, else from the paper's per-row numbers."""
    if pair.paper_difference is not None:
        return pair.paper_difference
    method = describe_selector(pair.method)
    reference = describe_selector(pair.reference) if pair.reference is not None else None
    if reference is not None and method in paper and reference in paper:
        return paper[method] - paper[reference]
    return None


def evaluate_pairs(
    data: StudyData,
    pairs: Sequence[PairSpec],
    *,
    metric: str | None,
    alpha: float,
    paper: Mapping[str, float] | None = None,
) -> list[Finding]:
    """One finding per pair, with Holm-adjusted p-values across the pairs."""
    paper = paper or {}
    metric_name = data.metric_name(metric)
    higher_is_better = data.direction(metric)
    resolved = [
        p if p.reference is not None else p.model_copy(update={"reference": data.reference}) for p in pairs
    ]
    comparisons = [
        compare_by_seed(
            data.by_seed(pair.method, metric),
            data.by_seed(pair.reference, metric),  # type: ignore[arg-type]
            confidence=1.0 - alpha,
            higher_is_better=higher_is_better,
        )
        for pair in resolved
    ]
    adjusted = adjust([c.p_value for c in comparisons], "holm")
    findings = []
    for pair, comparison, p_adjusted in zip(resolved, comparisons, adjusted, strict=True):
        sign = _sign(pair.expect, higher_is_better)
        margin = resolved_margin(pair, data, metric)
        looks_note = ""
        if data.sequential is not None:
            # The looks already adjusted for each other (Holm inside the design): their numbers replace
            # the fixed-seed test's, which would overstate the evidence after data-dependent stops.
            outcome = _looks_outcome(data, pair, metric)
            if outcome is None:
                findings.append(_not_answered_by_looks(pair, data, metric_name, sign, margin, paper))
                continue
            comparison = as_comparison(comparison, outcome)
            p_adjusted = holm_adjusted(outcome)
            looks_note = sequential_note(outcome)
        if sign == 0 and margin is None:
            verdict, note = INCONCLUSIVE, "no reference values to scale the relative margin by"
        else:
            verdict, note = judge_comparison(comparison, p_adjusted, sign, margin, alpha)
        # The fixed-seed test's warnings (seed sets that differ, as the looks left them) describe a test
        # the looks' numbers replaced: only its own are kept.
        notes = [looks_note, note] if looks_note else [note, *comparison.warnings]
        findings.append(
            comparison_finding(
                comparison,
                label=f"{describe_selector(pair.method)} − {describe_selector(pair.reference)} ({metric_name})",  # type: ignore[arg-type]
                expected=_expected_text(sign, margin),
                verdict=verdict,
                note="; ".join(dict.fromkeys(n for n in notes if n)),
                p_adjusted=p_adjusted,
                paper=paper_difference(pair, paper),
            )
        )
    return findings


def _looks_outcome(data: StudyData, pair: PairSpec, metric: str | None) -> SequentialComparison | None:
    """The looks' outcome for a pair they decided, on the primary metric: a method with the study's
    reference, or a pair of the design (studies.claims.sequential.looks_comparison)."""
    if data.sequential is None or data.metric_name(metric) != data.metric:
        return None
    method, against = data.arm(pair.method), data.arm(pair.reference or data.reference)
    if method is None or against is None:
        return None
    return looks_comparison(data.sequential, method, against, study_reference=data.reference)


def _not_answered_by_looks(
    pair: PairSpec,
    data: StudyData,
    metric_name: str,
    sign: int,
    margin: float | None,
    paper: Mapping[str, float],
) -> Finding:
    return Finding(
        label=f"{describe_selector(pair.method)} − {describe_selector(pair.reference)} ({metric_name})",  # type: ignore[arg-type]
        expected=_expected_text(sign, margin),
        verdict=NOT_TESTED,
        measured=None,
        ci_low=None,
        ci_high=None,
        n=0,
        p_value=None,
        p_adjusted=None,
        mde=None,
        paper=paper_difference(pair, paper),
        note=(
            f"not tested: this sequential study's looks compared other rows on {data.metric} (each method "
            f"with {data.reference}, or the pairs its design names), and a fixed-seed test of seeds its looks "
            "chose would overstate the evidence"
        ),
    )


def describe_pairs(findings: Sequence[Finding]) -> str:
    """One sentence per finding: label, expectation, verdict and why."""
    return " ".join(f"{f.label}: expected {f.expected}, {f.verdict} ({f.note})." for f in findings)
