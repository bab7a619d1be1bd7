"""`trend`: one quantity rises (or falls) with another across a grid's points (Transforming Rank: init
Jacobian rank predicts the accuracy a configuration trains to; a larger branch-to-skip ratio lowers the
init rank).

Each grid point (method [group]) contributes the means over its completed seeds of x and y. The test is
Spearman's rank correlation across points, with the exact permutation p-value up to 8 points (the
t approximation above); its interval is Fisher's z with the Fieller-Hartley-Pearson variance
1.06 / (n − 3). The detectable correlation at 80 % power comes from the same noncentral-t power
calculation the results tables use (studies.stats.power), with df = n − 2.

A trend of trained metrics says nothing when nothing trained: with `reference_row`, a named grid point
(e.g. Pre-Norm at skip scale 1) must reach a stated level first, else the check is `not tested`. With
`sensitivity`, the verdict is shown per value of a swept knob (studies.claims.sensitivity).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

from studies.claims._base import CheckBase
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import PRIMARY, StudyData, TrialData, describe_selector, select
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, SUPPORTED, CheckResult, Finding
from studies.stats import DEFAULT_POWER, minimum_detectable_effect

__all__ = ["ReferenceRow", "TrendCheck", "detectable_correlation", "spearman"]

KNOB_PREFIX = "knob."
_EXACT_MAX_POINTS = 8  # 8! = 40,320 permutations: exact and still instant


def _axis_value(trial: TrialData, axis: str) -> float | None:
    if axis.startswith(KNOB_PREFIX):
        raw = trial.knob(axis[len(KNOB_PREFIX) :])
        try:
            return None if raw is None or isinstance(raw, bool) else float(raw)
        except (TypeError, ValueError):
            return None
    return trial.get(axis)


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """Spearman's rho and its two-sided p-value (exact permutation for small n); None when undefined."""
    n = x.size
    if n < 3 or np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        return None, None
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    if n <= _EXACT_MAX_POINTS:
        result = stats.pearsonr(rx, ry, method=stats.PermutationMethod(n_resamples=math.inf))
    else:
        result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def detectable_correlation(n: int, alpha: float) -> float | None:
    """Smallest |rho| a two-sided test on n points finds with 80 % power (t = r sqrt(df / (1 − r²)))."""
    if n < 4:
        return None
    df = n - 2
    noncentrality = minimum_detectable_effect(1.0, df, alpha=alpha, power=DEFAULT_POWER)
    if noncentrality is None:
        return None
    return noncentrality / math.sqrt(df + noncentrality**2)


def _fisher_interval(rho: float, n: int, confidence: float) -> tuple[float | None, float | None]:
    if n <= 3 or abs(rho) >= 1.0:
        return (rho, rho) if abs(rho) >= 1.0 else (None, None)
    z = math.atanh(rho)
    half = stats.norm.ppf(0.5 + confidence / 2.0) * math.sqrt(1.06 / (n - 3))
    return math.tanh(z - half), math.tanh(z + half)


class ReferenceRow(BaseModel):
    """A grid point that must train before a trend of trained metrics is judged."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    row: dict[str, Any] = Field(min_length=1)  # its selector, e.g. {norm_placement: pre, skip_scale: 1.0}
    # The mean of `metric` over its completed seeds must reach this: one level, or one per study dataset
    # (a claim run on digits and on CIFAR-10 needs a level for each).
    at_least: float | dict[str, float]
    metric: str = PRIMARY

    def level(self, dataset: str) -> float | None:
        return self.at_least.get(dataset) if isinstance(self.at_least, dict) else self.at_least


class TrendCheck(CheckBase):
    type: Literal["trend"] = "trend"
    x: str = Field(min_length=1)  # "knob.<name>" for a knob's value, else a metric (init_* or primary)
    y: str = "primary"
    expect: Literal["positive", "negative"] = "positive"
    method: str | None = None  # only this method's points (None: every method)
    reference_row: ReferenceRow | None = None  # must reach its level first, else not tested
    sensitivity: Sensitivity | None = None

    def points(self, data: StudyData) -> list[tuple[str, float, float, int]]:
        """(row label, mean x, mean y, seeds) per grid point with both values."""
        rows: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for trial in data.completed():
            if self.method is not None and trial.method != self.method:
                continue
            x, y = _axis_value(trial, self.x), _axis_value(trial, self.y)
            if x is not None and y is not None:
                rows[trial.label].append((x, y))
        return [
            (label, float(np.mean([p[0] for p in pairs])), float(np.mean([p[1] for p in pairs])), len(pairs))
            for label, pairs in sorted(rows.items())
        ]

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, self._evaluate)

    def _reference_problem(self, data: StudyData) -> tuple[str | None, str]:
        """(why the trend cannot be judged, or None; what the reference row reached)."""
        reference = self.reference_row
        if reference is None:
            return None, ""
        name = describe_selector(reference.row)
        metric = data.metric_name(reference.metric)
        level = reference.level(data.dataset)
        if level is None:
            return f"the check states no level for the reference configuration {name} on {data.dataset}", ""
        values = [
            v for t in select(data.completed(), reference.row) if (v := t.get(reference.metric)) is not None
        ]
        if not values:
            return f"the reference configuration {name} has no completed trial with {metric}", ""
        mean = sum(values) / len(values)
        reached = f"{name} reached {metric} {mean:.4g} over {len(values)} seed(s) (needs >= {level:g})"
        if mean < level:
            return f"the reference configuration did not train: {reached}", reached
        return None, reached

    def _evaluate(self, data: StudyData) -> CheckResult:
        problem, reached = self._reference_problem(data)
        if problem is not None:
            return CheckResult.not_tested(self.type, problem, confidence=self.confidence)
        result = self._trend(data)
        return dataclasses.replace(result, notes=(*result.notes, reached)) if reached else result

    def _trend(self, data: StudyData) -> CheckResult:
        points = self.points(data)
        n = len(points)
        x = np.asarray([p[1] for p in points])
        y = np.asarray([p[2] for p in points])
        rho, p_value = spearman(x, y)
        y_name = data.metric_name(self.y)
        label = f"Spearman rho of {y_name} on {self.x} across {n} grid points"
        sign = 1 if self.expect == "positive" else -1
        mde = detectable_correlation(n, self.alpha)
        if rho is None or p_value is None:
            verdict, note = (
                INCONCLUSIVE,
                (
                    f"{n} point(s) with both values"
                    + (" and no spread" if n >= 3 else "")
                    + ": no correlation to test"
                ),
            )
            low = high = None
        else:
            low, high = _fisher_interval(rho, n, self.confidence)
            if p_value < self.alpha and rho != 0.0:
                verdict = SUPPORTED if (rho > 0) == (sign > 0) else CONTRADICTED
                note = f"rho = {rho:+.3f}, p = {p_value:.3g}"
            else:
                verdict = INCONCLUSIVE
                detectable = "–" if mde is None else f"{mde:.2f}"
                note = f"rho = {rho:+.3f}, p = {p_value:.3g}: not significant; with {n} points the smallest |rho| detectable with 80 % power is {detectable}"
        if n:
            # A rank correlation ignores magnitudes: say how far y actually moves across the points.
            note += f"; {y_name} spans {float(y.min()):.3g} to {float(y.max()):.3g} across the points"
        finding = Finding(
            label=label,
            expected="> 0" if sign > 0 else "< 0",
            verdict=verdict,
            measured=rho,
            ci_low=low,
            ci_high=high,
            n=n,
            p_value=p_value,
            mde=mde,
            note=note,
        )
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"{y_name} should {'rise' if sign > 0 else 'fall'} with {self.x}: {verdict} ({note}).",
            findings=(finding,),
            confidence=self.confidence,
        )
