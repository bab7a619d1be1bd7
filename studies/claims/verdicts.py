"""What a claim check concludes: supported, contradicted, inconclusive at the study's power, or not tested.

A check produces findings (one measured quantity each, with its interval, test and the paper's number)
and one verdict. The verdict of several findings is contradicted when any finding contradicts the
claim, supported when every finding supports it, inconclusive otherwise.

`not tested` is the verdict when the experiment cannot answer at all: the reference did not converge,
an arm failed or diverged, the dataset is unavailable or cannot express the claim. It always carries
its reason, and no check result is computed behind it: a study whose reference never trained says
nothing about the methods, in either direction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "CONTRADICTED",
    "INCONCLUSIVE",
    "NOT_TESTED",
    "SUPPORTED",
    "VERDICTS",
    "CheckResult",
    "Finding",
    "combine_verdicts",
]

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_TESTED = "not tested"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_TESTED)


@dataclass(frozen=True)
class Finding:
    """One measured quantity set against what the claim expects of it. Floats are None when undefined."""

    label: str  # what was measured, e.g. "autonorm_s − frozen_ln (test_accuracy)"
    expected: str  # what the claim expects, e.g. "> 0" or "within ±0.01"
    verdict: str
    measured: float | None = None  # the estimate (a mean, a mean difference, a correlation ...)
    ci_low: float | None = None  # its interval at the check's confidence
    ci_high: float | None = None
    n: int = 0  # replicates behind it (seeds, or grid points for a correlation)
    p_value: float | None = None  # raw p of the test behind the verdict
    p_adjusted: float | None = None  # Holm-adjusted across the check's findings
    mde: float | None = None  # smallest true effect this n detects with 80 % power (same units)
    paper: float | None = None  # the paper's number for this quantity, when it reports one
    note: str = ""


@dataclass(frozen=True)
class CheckResult:
    """A check's verdict, the sentence that explains it, and the findings it rests on."""

    check: str  # check type, e.g. "difference"
    verdict: str
    summary: str
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    confidence: float = 0.95
    # Why the claim was not tested as a whole, e.g. "reference did not converge: frozen_ln test_accuracy
    # 0.35 < 0.95" (None for a tested claim, or one whose findings say which part was not tested).
    reason: str | None = None

    @classmethod
    def not_tested(cls, check: str, reason: str, *, confidence: float = 0.95) -> CheckResult:
        return cls(
            check=check,
            verdict=NOT_TESTED,
            summary=f"not tested: {reason}",
            confidence=confidence,
            reason=reason,
        )


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """contradicted if any part is (one refuted part refutes the claim), else not tested if any part is
    (a claim tested only in part is not supported), supported if all are (and there is at least one),
    else inconclusive."""
    verdicts = list(verdicts)
    if any(v == CONTRADICTED for v in verdicts):
        return CONTRADICTED
    if any(v == NOT_TESTED for v in verdicts):
        return NOT_TESTED
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    return INCONCLUSIVE
