"""One-word verdict per results-table row, respecting the metric's direction."""

from __future__ import annotations

__all__ = [
    "BETTER",
    "INSUFFICIENT_DATA",
    "NO_SIGNIFICANT_DIFFERENCE",
    "REFERENCE",
    "VERDICTS",
    "WORSE",
    "verdict",
]

BETTER = "better"
WORSE = "worse"
NO_SIGNIFICANT_DIFFERENCE = "no significant difference"
REFERENCE = "reference"
INSUFFICIENT_DATA = "insufficient data"
VERDICTS = (BETTER, WORSE, NO_SIGNIFICANT_DIFFERENCE, REFERENCE, INSUFFICIENT_DATA)


def verdict(diff_mean: float | None, p_value: float | None, *, alpha: float, higher_is_better: bool) -> str:
    """better / worse when `p_value` (normally the adjusted one) is below `alpha`, else no significant
    difference; insufficient data when no test was possible. `diff_mean` is method minus reference."""
    if diff_mean is None or p_value is None:
        return INSUFFICIENT_DATA
    if p_value >= alpha or diff_mean == 0.0:
        return NO_SIGNIFICANT_DIFFERENCE
    improved = diff_mean > 0.0 if higher_is_better else diff_mean < 0.0
    return BETTER if improved else WORSE
