"""Number formatting shared by the human-readable renderers (markdown, HTML, rich)."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["DASH", "Formatter", "format_p"]

DASH = "—"  # an undefined number (one seed, no reference, ...)


def format_p(p: float | None) -> str:
    if p is None:
        return DASH
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}"


class Formatter:
    """Formats metric values with one number of decimals for the whole table.

    Four significant digits of the largest |mean|: 0.9123 for accuracy as a fraction, 86.35 for
    accuracy in percent, 41.93 for perplexity; differences and intervals use the same decimals so
    columns line up.
    """

    def __init__(self, magnitudes: Iterable[float | None]) -> None:
        finite = [abs(m) for m in magnitudes if m is not None and math.isfinite(m) and m != 0.0]
        largest = max(finite, default=1.0)
        self.decimals = min(6, max(0, 3 - math.floor(math.log10(largest))))

    def value(self, x: float | None) -> str:
        return DASH if x is None else f"{x:.{self.decimals}f}"

    def signed(self, x: float | None) -> str:
        return DASH if x is None else f"{x:+.{self.decimals}f}"

    def interval(self, low: float | None, high: float | None) -> str:
        if low is None or high is None:
            return DASH
        return f"[{self.value(low)}, {self.value(high)}]"

    def signed_interval(self, low: float | None, high: float | None) -> str:
        if low is None or high is None:
            return DASH
        return f"[{self.signed(low)}, {self.signed(high)}]"


def format_ratio(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{x:.{digits}f}"
