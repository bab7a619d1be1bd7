"""What a claim check concludes: supported, contradicted, or inconclusive at the study's power.

A check produces findings (one measured quantity each, with its interval, test and the paper's number)
and one verdict. The verdict of several findings is contradicted when any finding contradicts the
claim, supported when every finding supports it, inconclusive otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "CONTRADICTED",
    "INCONCLUSIVE",
    "SUPPORTED",
    "VERDICTS",
    "CheckResult",
    "Finding",
    "combine_verdicts",
]

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE)


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


def combine_verdicts(verdicts: Iterable[str]) -> str:
    """contradicted if any is, supported if all are (and there is at least one), else inconclusive."""
    verdicts = list(verdicts)
    if any(v == CONTRADICTED for v in verdicts):
        return CONTRADICTED
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    return INCONCLUSIVE
