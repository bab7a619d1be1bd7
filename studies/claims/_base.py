"""What every check type shares: strict parameter models, tests against a fixed level, and the wording
of an inconclusive verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from studies.claims.trials import StudyData
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, SUPPORTED, CheckResult, Finding
from studies.stats import Comparison, compare

__all__ = ["CheckBase", "against_level", "comparison_finding", "directional_verdict", "power_note", "shift"]


class CheckBase(BaseModel):
    """Parameters of one check; `alpha` is the significance level its tests use."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    alpha: float = Field(0.05, gt=0.0, lt=0.5)

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        raise NotImplementedError


def power_note(mde: float | None, n: int, what: str = "difference") -> str:
    """The sentence every inconclusive verdict carries: what this many replicates could have detected."""
    if mde is None:
        return f"with n = {n} no test had power to speak of (too few replicates or no spread)"
    return f"with n = {n} the smallest {what} detectable with 80 % power is {mde:.4g}"


def against_level(values: Sequence[float], level: float, alpha: float) -> Comparison:
    """Mean of `values` (one per seed) against a constant: a one-sample t-test (with its Wilcoxon check)
    run through studies.stats' paired comparison, so intervals and power come out the same way."""
    return compare(list(values), [level] * len(values), paired=True, confidence=1.0 - alpha)


def directional_verdict(
    comparison: Comparison, p_adjusted: float | None, sign: int, alpha: float
) -> tuple[str, str]:
    """supported / contradicted by a significant difference of sign `sign` (+1 or −1) or the other one;
    inconclusive (with the detectable effect) when not significant."""
    diff = comparison.diff_mean
    if diff is None:
        return INCONCLUSIVE, "no values"
    if p_adjusted is not None and p_adjusted < alpha and diff != 0.0:
        if (diff > 0) == (sign > 0):
            return SUPPORTED, f"significant in the expected direction (p_adj = {p_adjusted:.3g})"
        return CONTRADICTED, f"significant in the opposite direction (p_adj = {p_adjusted:.3g})"
    return INCONCLUSIVE, "not significant; " + power_note(comparison.mde_80, comparison.n)


def shift(value: float | None, by: float) -> float | None:
    """A difference from a level back on the level's scale (None stays None)."""
    return None if value is None else value + by


def comparison_finding(
    comparison: Comparison,
    *,
    label: str,
    expected: str,
    verdict: str,
    note: str,
    p_adjusted: float | None,
    level: float = 0.0,
    paper: float | None = None,
) -> Finding:
    """A finding from a comparison with a reference row (level 0) or with a fixed `level`, whose
    estimate and interval are put back on the level's scale (a mean, not a difference from it)."""
    return Finding(
        label=label,
        expected=expected,
        verdict=verdict,
        measured=shift(comparison.diff_mean, level),
        ci_low=shift(comparison.diff_ci_low, level),
        ci_high=shift(comparison.diff_ci_high, level),
        n=comparison.n,
        p_value=comparison.p_value,
        p_adjusted=p_adjusted,
        mde=comparison.mde_80,
        paper=paper,
        note=note,
    )
