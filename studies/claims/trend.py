"""`trend`: one quantity rises (or falls) with another across a grid's points (Transforming Rank: init
Jacobian rank predicts the accuracy a configuration trains to; a larger branch-to-skip ratio lowers the
init rank).

Each grid point (method [group]) contributes the means over its completed seeds of x and y. The test is
Spearman's rank correlation across points. Its two-sided p-value is exact where it can be: from the exact
null distribution of sum d² (every permutation counted, by dynamic programming over the ranks used) up
to 12 untied points, by enumerating every permutation up to 9 points with ties, else a Monte Carlo
permutation p (fixed seed), which is never 0 and says so. A perfect ordering of n untied points has
p = 2 / n! (9 points: 5.5e-6). The interval is Fisher's z with the Fieller-Hartley-Pearson variance
1.06 / (n − 3). The detectable correlation at 80 % power comes from the same noncentral-t power
calculation the results tables use (studies.stats.power), with df = n − 2.

A trend of trained metrics says nothing when nothing trained: with `reference_row`, a named grid point
(e.g. Pre-Norm at skip scale 1) must reach a stated level first, else the check is `not tested`.

A trend can be implied by a limit rather than by the claim: as the skip scale beta -> 0 a residual stack
tends to the identity, so the rank of any grid that starts near 0 falls with beta whatever the branch
does. With `judged_where`, only the points whose measured quantity (e.g. the mean branch-to-skip ratio)
reaches a stated level are judged; the full-grid trend is shown in the notes as a diagnostic. Parts of
the paper's statement that the check does not test are listed in `untested` and reported as
"not tested: ..." notes. With `sensitivity`, the verdict is shown per value of a swept knob
(studies.claims.sensitivity).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

from studies.claims._base import CheckBase
from studies.claims.depth_fits import per_depth
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import PRIMARY, StudyData, TrialData, describe_selector, select
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, SUPPORTED, CheckResult, Finding
from studies.stats import DEFAULT_POWER, minimum_detectable_effect, varies_beyond_noise

__all__ = ["JudgedRange", "ReferenceRow", "SpearmanTest", "TrendCheck", "detectable_correlation", "spearman"]

KNOB_PREFIX = "knob."
EXACT_MAX_POINTS = 12  # the sum-d² distribution of 12 ranks: 4,096 subsets x 287 sums, instant
EXACT_TIED_MAX_POINTS = 9  # with ties, every one of 9! = 362,880 orderings is enumerated
MONTE_CARLO_RESAMPLES = 99_999  # two-sided p >= 2 / 100,000: never 0
MONTE_CARLO_SEED = 0


def _axis_value(trial: TrialData, axis: str) -> float | None:
    if axis.startswith(KNOB_PREFIX):
        raw = trial.knob(axis[len(KNOB_PREFIX) :])
        try:
            return None if raw is None or isinstance(raw, bool) else float(raw)
        except (TypeError, ValueError):
            return None
    return trial.get(axis)


@dataclasses.dataclass(frozen=True)
class SpearmanTest:
    """Spearman's rho, its two-sided p-value and how that p was obtained."""

    rho: float
    p_value: float
    method: str  # "exact", "exact (ties: every ordering enumerated)" or "Monte Carlo permutation ..."


@functools.cache
def _rank_distance_counts(n: int) -> tuple[int, ...]:
    """counts[D]: how many permutations p of 0..n-1 have sum_i (i − p(i))² = D, for D = 0 .. (n³ − n) / 3.

    Positions are filled in order; a state is the set of ranks already used (a bit mask) and the partial
    sum, so the table has 2^n rows instead of n! permutations."""
    top = (n**3 - n) // 3
    counts = np.zeros((1 << n, top + 1), dtype=np.int64)
    counts[0, 0] = 1
    masks = np.arange(1 << n)
    used = np.asarray([m.bit_count() for m in range(1 << n)])
    for position in range(n):
        layer = masks[used == position]
        for rank in range(n):
            free = layer[(layer >> rank) & 1 == 0]
            step = (position - rank) ** 2
            counts[free | (1 << rank), step:] += counts[free, : top + 1 - step]
    return tuple(int(c) for c in counts[-1])


def _exact_untied_p(rx: np.ndarray, ry: np.ndarray) -> float:
    """Two-sided exact p of Spearman's rho for untied ranks: the share of permutations whose |rho| is at
    least the observed one (rho = 1 − 6 D / (n³ − n), and the null is symmetric about D_max / 2)."""
    n = rx.size
    counts = _rank_distance_counts(n)
    top = len(counts) - 1
    observed = round(float(((rx - ry) ** 2).sum()))
    low = min(observed, top - observed)
    extreme = sum(c for d, c in enumerate(counts) if d <= low or d >= top - low)
    return extreme / math.factorial(n)


@functools.cache
def _all_orderings(n: int) -> np.ndarray:
    """Every permutation of 0..n-1, one per row: (n!, n)."""
    flat = itertools.chain.from_iterable(itertools.permutations(range(n)))
    return np.fromiter(flat, dtype=np.int8, count=math.factorial(n) * n).reshape(-1, n)


def _exact_tied_p(rx: np.ndarray, ry: np.ndarray) -> float:
    """Two-sided exact p with tied (mid)ranks: the share of all n! orderings of ry whose rank covariance
    with rx is at least as large in size as the observed one (the ranks' mean and spread never change)."""
    centre = (rx.size + 1) / 2.0
    covariances = (ry[_all_orderings(rx.size)] - centre) @ (rx - centre)
    observed = abs(float((ry - centre) @ (rx - centre)))
    return float(np.mean(np.abs(covariances) >= observed * (1.0 - 1e-12)))


def spearman_test(x: np.ndarray, y: np.ndarray) -> SpearmanTest | None:
    """Spearman's rho with its two-sided p, exact where it can be (see the module docstring); None when
    undefined (fewer than 3 points, no spread in y, or x spread by no more than round-off, whose order is
    noise: `x_is_noise`)."""
    n = x.size
    if n < 3 or x_is_noise(x) or np.ptp(y) == 0.0:
        return None
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rho = float(stats.spearmanr(x, y).statistic)
    tied = np.unique(rx).size < n or np.unique(ry).size < n
    if not tied and n <= EXACT_MAX_POINTS:
        return SpearmanTest(rho, _exact_untied_p(rx, ry), "exact")
    if tied and n <= EXACT_TIED_MAX_POINTS:
        return SpearmanTest(rho, _exact_tied_p(rx, ry), "exact (ties: every ordering enumerated)")
    result = stats.pearsonr(
        rx,
        ry,
        method=stats.PermutationMethod(
            n_resamples=MONTE_CARLO_RESAMPLES, rng=np.random.default_rng(MONTE_CARLO_SEED)
        ),
    )
    # scipy counts the observed ordering among the resamples and doubles the smaller tail: p >= 2 / (B + 1).
    floor = 2 / (MONTE_CARLO_RESAMPLES + 1)
    method = f"Monte Carlo permutation, {MONTE_CARLO_RESAMPLES:,} resamples: p >= {floor:.0e}, not exact"
    return SpearmanTest(rho, float(result.pvalue), method)


def x_is_noise(x: np.ndarray) -> bool:
    """Whether x's values differ by no more than round-off (studies.stats.varies_beyond_noise)."""
    return not varies_beyond_noise(x)


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """Spearman's rho and its two-sided p-value (spearman_test); None when undefined."""
    test = spearman_test(x, y)
    return (None, None) if test is None else (test.rho, test.p_value)


def smallest_attainable_p(n: int) -> float:
    """The smallest two-sided p any ordering of n untied points can reach: 2 / n! (a perfect ordering)."""
    return min(1.0, 2.0 / math.factorial(n))


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


class JudgedRange(BaseModel):
    """The grid points a trend is judged on: those whose `metric`, averaged over the point's seeds,
    reaches `at_least` (e.g. a mean branch-to-skip ratio of 0.1: below it the stack is the identity to
    first order and the trend is implied by that limit). The other points are a diagnostic only."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # A per-trial metric (init_* or trained), or the prefix of a per-unit series `<metric>_<k>` (e.g.
    # init_branch_skip_ratio_0 .. _31), averaged over its units.
    metric: str = Field(min_length=1)
    at_least: float = Field(gt=0.0)

    def value(self, trial: TrialData) -> float | None:
        """The trial's value: the metric itself, else the mean of its per-unit series."""
        direct = trial.get(self.metric)
        if direct is not None:
            return direct
        units = per_depth(trial, self.metric)
        return float(np.mean(list(units.values()))) if units else None

    def describe(self) -> str:
        return f"mean {self.metric} >= {self.at_least:g}"


class TrendCheck(CheckBase):
    type: Literal["trend"] = "trend"
    x: str = Field(min_length=1)  # "knob.<name>" for a knob's value, else a metric (init_* or primary)
    y: str = "primary"
    expect: Literal["positive", "negative"] = "positive"
    method: str | None = None  # only this method's points (None: every method)
    reference_row: ReferenceRow | None = None  # must reach its level first, else not tested
    judged_where: JudgedRange | None = None  # only these points are judged (None: every point)
    # Parts of the paper's statement this check does not test, each with its reason ("not tested" notes).
    untested: tuple[str, ...] = ()
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
        points = self.points(data)
        if self.judged_where is None:
            result = self._trend(data, points, what="grid points")
        else:
            result = self._judged_trend(data, points, self.judged_where)
        untested = tuple(f"not tested: {part}" for part in self.untested)
        extra = (*((reached,) if reached else ()), *untested)
        return dataclasses.replace(result, notes=(*result.notes, *extra)) if extra else result

    def _range_values(self, data: StudyData, judged: JudgedRange) -> dict[str, float]:
        """{row label: mean over seeds of the judged range's metric} for the points that report it."""
        rows: dict[str, list[float]] = defaultdict(list)
        for trial in data.completed():
            if self.method is None or trial.method == self.method:
                value = judged.value(trial)
                if value is not None:
                    rows[trial.label].append(value)
        return {label: float(np.mean(values)) for label, values in rows.items()}

    def _judged_trend(
        self, data: StudyData, points: list[tuple[str, float, float, int]], judged: JudgedRange
    ) -> CheckResult:
        levels = self._range_values(data, judged)
        if not levels:
            return CheckResult.not_tested(
                self.type,
                f"the trials report no {judged.metric}: the range where the trend is not implied by a limit "
                f"({judged.describe()}) cannot be found",
                confidence=self.confidence,
            )
        inside = [p for p in points if levels.get(p[0], -math.inf) >= judged.at_least]
        where = f"grid points with {judged.describe()} (of {len(points)})"
        n, floor = len(inside), smallest_attainable_p(len(inside))
        if n < 3 or floor >= self.alpha:
            reason = (
                f"only {n} of {len(points)} grid points have {judged.describe()}; no ordering of {n} points "
                f"reaches p < {self.alpha:g} (a perfect one has p = {floor:.3g}): the grid cannot answer "
                "where the trend is not implied by a limit"
            )
            result = CheckResult.not_tested(self.type, reason, confidence=self.confidence)
        else:
            result = self._trend(data, inside, what=where)
        xs = sorted(p[1] for p in inside)
        span = f" ({self.x} {xs[0]:g} to {xs[-1]:g})" if xs else ""
        notes = [f"judged on the {n} {where}{span}; the other points are a diagnostic only"]
        full = spearman_test(np.asarray([p[1] for p in points]), np.asarray([p[2] for p in points]))
        if full is not None:
            notes.append(
                f"diagnostic, not judged: over all {len(points)} grid points rho = {full.rho:+.3f}, "
                f"p = {full.p_value:.3g} ({full.method}), including points where {judged.describe()} "
                "fails, whose order the limit implies"
            )
        return dataclasses.replace(result, notes=(*result.notes, *notes))

    def _trend(
        self, data: StudyData, points: list[tuple[str, float, float, int]], *, what: str
    ) -> CheckResult:
        n = len(points)
        x = np.asarray([p[1] for p in points])
        y = np.asarray([p[2] for p in points])
        test = spearman_test(x, y)
        y_name = data.metric_name(self.y)
        label = f"Spearman rho of {y_name} on {self.x} across {n} {what}"
        sign = 1 if self.expect == "positive" else -1
        mde = detectable_correlation(n, self.alpha)
        if test is None:
            spread = (
                f"{self.x} {x.min():.10g} to {x.max():.10g}, round-off"
                if x.size and x_is_noise(x)
                else "no spread"
            )
            verdict, note = (
                INCONCLUSIVE,
                f"{n} point(s) with both values"
                + (f" and {spread}" if n >= 3 else "")
                + ": no correlation to test",
            )
            rho = p_value = low = high = None
        else:
            rho, p_value = test.rho, test.p_value
            low, high = _fisher_interval(rho, n, self.confidence)
            if p_value < self.alpha and rho != 0.0:
                verdict = SUPPORTED if (rho > 0) == (sign > 0) else CONTRADICTED
                note = f"rho = {rho:+.3f}, p = {p_value:.3g} ({test.method})"
            else:
                verdict = INCONCLUSIVE
                detectable = "–" if mde is None else f"{mde:.2f}"
                note = (
                    f"rho = {rho:+.3f}, p = {p_value:.3g} ({test.method}): not significant; with {n} points "
                    f"the smallest |rho| detectable with 80 % power is {detectable}"
                )
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
