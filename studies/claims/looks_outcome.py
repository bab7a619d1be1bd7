"""A sequential study's comparison as its looks left it, and finding one by the arms it compared (either
order where its test reads the same both ways): plain data the claims' study data carries
(studies.claims.trials) and studies.claims.sequential judges on."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SequentialComparison", "looks_comparison", "reversed_comparison"]


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
    # What `method` names: the comparison, "a vs b" for one of the design's pairs; the arms it compared are
    # `arm` (the method, or a grid point's row) and `reference` ("": the study's reference).
    arm: str = ""
    reference: str = ""
    # Whether the comparison read the other way round is the same test: superiority (two-sided) and
    # equivalence are; non-inferiority of a against b says nothing of b against a.
    symmetric: bool = True

    def compares(self, method: str, against: str, *, study_reference: str) -> bool:
        return (self.arm or self.method, self.reference or study_reference) == (method, against)


def reversed_comparison(outcome: SequentialComparison) -> SequentialComparison:
    """The same comparison read the other way round: the difference and its interval change sign."""
    low, high = outcome.interval_low, outcome.interval_high
    return dataclasses.replace(
        outcome,
        arm=outcome.reference,
        reference=outcome.arm or outcome.method,
        estimate=None if outcome.estimate is None else -outcome.estimate,
        interval_low=None if high is None else -high,
        interval_high=None if low is None else -low,
    )


def looks_comparison(
    outcomes: Mapping[str, SequentialComparison], method: str, against: str, *, study_reference: str
) -> SequentialComparison | None:
    """The looks' comparison of arm `method` with arm `against` (an arm is a method, or a grid point as its
    results row names it): one they made, or one of the design's pairs made the other way round where the
    test reads the same both ways (turned round); None where the looks never compared the two."""
    for outcome in outcomes.values():
        if outcome.compares(method, against, study_reference=study_reference):
            return outcome
    for outcome in outcomes.values():
        if outcome.symmetric and outcome.compares(against, method, study_reference=study_reference):
            return reversed_comparison(outcome)
    return None
