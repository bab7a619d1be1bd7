"""Mean and t interval over seeds, through studies.stats (the same numbers the results table uses)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from studies.stats import summarize

__all__ = ["MeanInterval", "mean_interval", "mean_or_none"]

# Only the t interval is shown; a small bootstrap keeps the (unused) BCa bounds cheap for many layers.
_BOOTSTRAP_RESAMPLES = 199


@dataclass(frozen=True)
class MeanInterval:
    """Mean over seeds with its Student t interval; None where undefined (no values, or one for the CI)."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


def mean_interval(values: Iterable[float | None], confidence: float) -> MeanInterval:
    summary = summarize(list(values), confidence, n_resamples=_BOOTSTRAP_RESAMPLES)
    return MeanInterval(n=summary.n, mean=summary.mean, ci_low=summary.ci_low, ci_high=summary.ci_high)


def mean_or_none(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
