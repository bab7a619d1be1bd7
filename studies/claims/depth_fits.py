"""Laws against depth, fitted per trial and judged over seeds (Transforming Rank).

Each trial reports an init measurement at every depth (`<prefix>_<l>`: models.rank.init_rank_report).
The paper states its depth laws as powers of l: the branch-to-skip ratio ~ l^(-1/2) under Pre-Norm and
~ l^0 under Post-Norm, the Pre-Norm stream ~ l^(1/2), the one-matrix ReLU mean spike ~ l^1. So a law is
tested by the exponent of a least-squares line through (log l, log value), one per seed, and a finding
set against a band around the law's exponent (`band_finding`): supported when the whole interval of
the mean exponent lies inside the band, contradicted when it lies wholly outside, inconclusive when it
straddles an edge.

The fit skips the shallowest depths (`fit_from`, a fraction of the deepest depth reported): the laws
are asymptotic. Under Pre-Norm the stream the l-th branch reads is h_0 plus l branch outputs, so
||h_l||^2 ~ ||h_0||^2 + l b^2, which behaves like l only once l b^2 outweighs the input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from studies.claims._base import against_level, power_note, shift
from studies.claims.trials import Selector, StudyData, TrialData, select
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_TESTED, SUPPORTED, Finding

__all__ = [
    "MIN_FIT_POINTS",
    "band_finding",
    "fit_window",
    "linear_fit",
    "loglog_exponent",
    "not_tested_finding",
    "per_depth",
    "per_seed",
    "seeds_to_resolve",
]

MIN_FIT_POINTS = 3  # a line through two points has no residual: no fit to speak of


def per_depth(trial: TrialData, prefix: str) -> dict[int, float]:
    """{depth: value} of a trial's `<prefix>_<l>` init measurements (finite values only)."""
    pattern = re.compile(rf"^{re.escape(prefix)}_(\d+)$")
    return {int(m.group(1)): v for k, v in trial.init_metrics().items() if (m := pattern.match(k))}


def fit_window(series: Mapping[int, float], fit_from: float, min_depth: int = 1) -> dict[int, float]:
    """The depths a law is fitted on: l >= max(min_depth, ceil(fit_from * deepest depth))."""
    if not series:
        return {}
    first = max(min_depth, math.ceil(fit_from * max(series)))
    return {depth: value for depth, value in series.items() if depth >= first}


def loglog_exponent(series: Mapping[int, float]) -> float | None:
    """Slope of log(value) on log(depth) by least squares; None with fewer than 3 positive points."""
    points = [(d, v) for d, v in series.items() if d > 0 and v > 0]
    if len(points) < MIN_FIT_POINTS:
        return None
    x = np.log([float(d) for d, _ in points])
    y = np.log([v for _, v in points])
    return float(np.polyfit(x, y, 1)[0])


def linear_fit(series: Mapping[int, float]) -> tuple[float, float] | None:
    """(slope, R²) of a least-squares line of value on depth; None with fewer than 3 points or no spread."""
    if len(series) < MIN_FIT_POINTS:
        return None
    x = np.asarray(sorted(series), dtype=float)
    y = np.asarray([series[int(d)] for d in x])
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0.0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(((y - (slope * x + intercept)) ** 2).sum())
    return float(slope), 1.0 - residual / total


def per_seed(
    data: StudyData, selector: Selector, fit: Callable[[TrialData], float | None]
) -> dict[int, float | None]:
    """{seed: fitted value} over the completed trials a selector picks (the last one per seed wins)."""
    return {int(trial.seed): fit(trial) for trial in select(data.completed(), selector)}


def not_tested_finding(label: str, expected: str, why: str) -> Finding:
    return Finding(label=label, expected=expected, verdict=NOT_TESTED, note=f"not tested: {why}")


def seeds_to_resolve(values: Sequence[float], half_width: float, alpha: float) -> int | None:
    """Seeds at which the t interval of the mean (at 1 - alpha, with the spread of `values`) is no wider
    than ±half_width; None when the values show no spread to size it with, or when it would take more
    than 10,000."""
    if len(values) < 2:
        return None
    sd = float(np.std(values, ddof=1))
    if sd == 0.0:
        return None
    for n in range(2, 10_001):
        if stats.t.ppf(1.0 - alpha / 2.0, n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    return None


def band_finding(
    values: Sequence[float],
    *,
    label: str,
    target: float,
    tolerance: float,
    alpha: float,
    inside: bool = True,
    paper: float | None = None,
    resolve: bool = False,
) -> Finding:
    """The mean of per-seed values set against the band [target - tolerance, target + tolerance]:
    `inside` (the law holds) or not (a control must not follow the law). Judged by the t interval of the
    mean at 1 - alpha: wholly inside or wholly outside the band decides, an interval on an edge does not.
    With `resolve`, an interval wider than the band decides nothing either way (the seeds cannot tell the
    band from its surroundings): inconclusive, with the seeds that would narrow it to the band's width."""
    low_edge, high_edge = target - tolerance, target + tolerance
    band = f"[{low_edge:.3g}, {high_edge:.3g}]"
    expected = f"in {band}" if inside else f"outside {band}"
    comparison = against_level(list(values), target, alpha)
    mean = shift(comparison.diff_mean, target)
    low, high = shift(comparison.diff_ci_low, target), shift(comparison.diff_ci_high, target)
    if low is None or high is None:
        verdict, note = INCONCLUSIVE, f"no interval: {power_note(comparison.mde_80, comparison.n)}"
    elif resolve and (high - low) / 2.0 > tolerance:
        needed = seeds_to_resolve(values, tolerance, alpha)
        verdict = INCONCLUSIVE
        note = (
            f"the interval (±{(high - low) / 2.0:.3g}) is wider than the band (±{tolerance:.3g}): "
            f"{comparison.n} seeds cannot tell inside from outside; "
            + ("no spread to size the seeds with" if needed is None else f"about {needed} seeds would")
        )
    else:
        within = low_edge <= low and high <= high_edge
        outside = high < low_edge or low > high_edge
        if within:
            verdict = SUPPORTED if inside else CONTRADICTED
            note = "the interval lies inside the band"
        elif outside:
            verdict = CONTRADICTED if inside else SUPPORTED
            note = "the interval lies outside the band"
        else:
            verdict = INCONCLUSIVE
            note = "the interval straddles an edge of the band; " + power_note(
                comparison.mde_80, comparison.n
            )
    return Finding(
        label=label,
        expected=expected,
        verdict=verdict,
        measured=mean,
        ci_low=low,
        ci_high=high,
        n=comparison.n,
        mde=comparison.mde_80,
        paper=paper,
        note=note,
    )
