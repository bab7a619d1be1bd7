"""`width_threshold`: the branch Jacobian J_f = W_down diag(act'(W_up x)) W_up is full rank only when the
width expansion m/d exceeds 1 / p(act), p = E[act'(z)²] for z ~ N(0, 1) (Transforming Rank): 2 for ReLU,
about 2.19 for GELU.

Which rank. The numerical rank of J_f (`init_branch_rank`) shows ReLU's threshold: ReLU' is 0 or 1, so
J_f has rank min(d, number of active units) almost surely, and about m/2 units are active. It cannot show
GELU's: GELU' never vanishes, so J_f has full numerical rank for every m >= d. The paper's 1/p counts
the hidden units by their squared gain: m * p units' worth of gradient pass, and J_f is full rank once
that count reaches d. So the claims read `init_branch_active_width`, the soft count sum_i act'(z_i)² / d
at the pre-activations each branch really sees (models.rank.branch_active_widths), with full_level 1:
for ReLU it is the active-unit count, whose min(1, ·) equals the numerical rank; for GELU it is the
quantity the paper's 2.19 is about. Because p is E[act'(z)²] for unit-variance z, the GELU threshold
moves with the branch init scale (the pre-activations' spread): a sensitivity table over init_scale shows
for which scales it holds.

Per activation, every grid width outside a band of ±`tolerance` (relative) around the theoretical
threshold is one finding: below the band the mean of `metric` must stay under `full_level`, above it
it must reach `full_level`. Each is judged by the t interval of the mean over seeds: supported when
the whole interval lies on the expected side of `full_level`, contradicted when it lies on the other.
A summary finding per activation sets the width where the mean crosses `full_level` (interpolated
between grid widths) against the theory. A grid that cannot resolve the threshold (`grid_resolves`: no
judged width within `resolution` of it on each side, so any threshold in a wide gap would pass) gives
that activation `not tested`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from functools import cache
from typing import Literal

from pydantic import Field, model_validator
from scipy import integrate, special, stats

from studies.claims._base import CheckBase, against_level, shift
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import StudyData
from studies.claims.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    SUPPORTED,
    CheckResult,
    Finding,
    combine_verdicts,
)

__all__ = [
    "WidthThresholdCheck",
    "activation_survival",
    "crossing",
    "grid_resolves",
    "theoretical_threshold",
]


def _derivative(activation: str, z: float) -> float:
    if activation == "relu":
        return 1.0 if z > 0 else 0.0
    if activation == "gelu":  # exact (erf) GELU, as torch's nn.GELU
        return 0.5 * (1.0 + special.erf(z / math.sqrt(2.0))) + z * stats.norm.pdf(z)
    if activation == "tanh":
        return 1.0 - math.tanh(z) ** 2
    raise ValueError(f"unknown activation {activation!r}; known: relu, gelu, tanh")


@cache
def activation_survival(activation: str) -> float:
    """p(act) = E[act'(z)²] for z ~ N(0, 1): relu 0.5, gelu ~0.456."""
    value, _ = integrate.quad(
        lambda z: _derivative(activation, z) ** 2 * stats.norm.pdf(z), -12.0, 12.0, points=[0.0]
    )
    return float(value)


def theoretical_threshold(activation: str) -> float:
    """The width expansion m/d above which J_f is full rank: 1 / p(act)."""
    return 1.0 / activation_survival(activation)


Activation = Literal["relu", "gelu", "tanh"]
_DEFAULT_ACTIVATIONS: tuple[Activation, ...] = ("relu", "gelu")


class WidthThresholdCheck(CheckBase):
    type: Literal["width_threshold"] = "width_threshold"
    metric: str = "init_branch_rank"
    width_knob: str = "width_expansion"
    activation_knob: str = "activation"
    activations: list[Activation] = Field(default_factory=lambda: list(_DEFAULT_ACTIVATIONS), min_length=1)
    full_level: float = Field(0.99, gt=0.0, le=1.0)
    tolerance: float = Field(0.15, ge=0.0, lt=1.0)  # widths within ±15 % of the threshold are not judged
    # The nearest judged widths on each side must lie within this (relative) distance of the threshold,
    # else any threshold in the gap between them would pass; None: twice the tolerance.
    resolution: float | None = Field(None, gt=0.0, lt=1.0)
    sensitivity: Sensitivity | None = None

    @model_validator(mode="after")
    def _resolution_outside_the_band(self) -> WidthThresholdCheck:
        if self.resolution is not None and self.resolution <= self.tolerance:
            raise ValueError(
                f"resolution ({self.resolution:g}) must exceed tolerance ({self.tolerance:g}): widths within "
                "the tolerance are not judged, so none could lie within the resolution"
            )
        return self

    @property
    def resolution_or_default(self) -> float:
        return self.resolution if self.resolution is not None else 2.0 * self.tolerance

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, lambda subset: self._evaluate(subset, paper))

    def _evaluate(self, data: StudyData, paper: Mapping[str, float] | None) -> CheckResult:
        findings: list[Finding] = []
        for activation in self.activations:
            findings.extend(self._activation_findings(data, activation, (paper or {}).get(activation)))
        if not findings:
            return CheckResult(
                check=self.type,
                verdict=INCONCLUSIVE,
                summary=f"no completed trial carries {self.metric} with a {self.width_knob} and "
                f"{self.activation_knob}: nothing to judge",
                confidence=self.confidence,
            )
        summaries = [f for f in findings if f.label.endswith("threshold")]
        verdict = combine_verdicts(f.verdict for f in summaries)
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary="; ".join(
                f"{f.label}: {self.metric} crosses {self.full_level:g} at m/d "
                f"{'(no crossing)' if f.measured is None else f'{f.measured:.3g}'}, expected {f.expected} "
                f"({f.verdict})"
                for f in summaries
            )
            + ".",
            findings=tuple(findings),
            confidence=self.confidence,
        )

    def _activation_findings(self, data: StudyData, activation: str, paper: float | None) -> list[Finding]:
        by_width: dict[float, list[float]] = defaultdict(list)
        for trial in data.completed():
            if str(trial.knob(self.activation_knob)) != activation:
                continue
            width, value = trial.knob(self.width_knob), trial.get(self.metric)
            try:
                width = float(width)
            except (TypeError, ValueError):
                continue
            if value is not None:
                by_width[width].append(value)
        if not by_width:
            return []
        theory = theoretical_threshold(activation)
        findings = []
        means = {w: sum(values) / len(values) for w, values in by_width.items()}
        reached = [w for w, mean in means.items() if mean >= self.full_level]
        for width in sorted(by_width):
            if abs(width - theory) <= self.tolerance * theory:
                continue
            full_expected = width > theory
            c = against_level(by_width[width], self.full_level, self.alpha)
            low, high = shift(c.diff_ci_low, self.full_level), shift(c.diff_ci_high, self.full_level)
            if low is None or high is None:
                verdict, note = INCONCLUSIVE, f"no interval with n = {c.n}"
            elif (low >= self.full_level) == full_expected and (high < self.full_level) != full_expected:
                verdict, note = SUPPORTED, "the interval lies on the expected side of the full-rank level"
            elif (high < self.full_level) == full_expected and (low >= self.full_level) != full_expected:
                verdict, note = CONTRADICTED, "the interval lies on the wrong side of the full-rank level"
            else:
                verdict, note = INCONCLUSIVE, "the interval straddles the full-rank level"
            findings.append(
                Finding(
                    label=f"{activation}, m/d = {width:g}: {self.metric}",
                    expected=f">= {self.full_level:g}" if full_expected else f"< {self.full_level:g}",
                    verdict=verdict,
                    measured=shift(c.diff_mean, self.full_level),
                    ci_low=low,
                    ci_high=high,
                    n=c.n,
                    mde=c.mde_80,
                    note=note,
                )
            )
        unresolved = _resolution_problem(
            activation, theory, list(by_width), self.tolerance, self.resolution_or_default
        )
        first_full = f"{min(reached):g}" if reached else "none"
        if unresolved is not None:
            # A judged width on the wrong side refutes the claim whatever the grid; otherwise it is untested.
            contradicted = any(f.verdict == CONTRADICTED for f in findings)
            overall = CONTRADICTED if contradicted else NOT_TESTED
            note = f"{'' if contradicted else 'not tested: '}{unresolved}"
        else:
            overall = combine_verdicts(f.verdict for f in findings)
            note = (
                "measured: where the mean over seeds crosses the full level, interpolated between grid "
                f"widths (first grid width at or above it: {first_full})"
            )
        findings.append(
            Finding(
                label=f"{activation}: full-rank width threshold",
                expected=f"≈ {theory:.3g} (1/p, p = {activation_survival(activation):.3f})",
                verdict=overall,
                measured=crossing(means, self.full_level),
                n=len(by_width),
                paper=theory if paper is None else paper,
                note=note,
            )
        )
        return findings


def crossing(means: Mapping[float, float], level: float) -> float | None:
    """The width where a curve of means first reaches `level`, linearly interpolated between the grid
    widths around it; the smallest width when it starts at the level; None when it never reaches it."""
    widths = sorted(means)
    for i, width in enumerate(widths):
        if means[width] >= level:
            if i == 0:
                return width
            below = widths[i - 1]
            rise = means[width] - means[below]
            return width if rise <= 0 else below + (level - means[below]) * (width - below) / rise
    return None


def _resolution_problem(
    activation: str, theory: float, widths: list[float], tolerance: float, resolution: float
) -> str | None:
    below = [w for w in widths if w < theory * (1 - tolerance)]
    above = [w for w in widths if w > theory * (1 + tolerance)]
    band = f"{activation}'s threshold {theory:.3g}"
    if not below or not above:
        side = "below" if not below else "above"
        return f"the grid has no width {side} {band} outside the ±{tolerance:.0%} band it does not judge"
    near_below, near_above = max(below), min(above)
    slack = 1e-9  # 1.9 against 2 * (1 - 0.05) in floating point
    if near_below < theory * (1 - resolution) - slack or near_above > theory * (1 + resolution) + slack:
        return (
            f"the nearest judged widths around {band} are {near_below:g} and {near_above:g}: any threshold "
            f"between them would pass, but the check resolves to ±{resolution:.0%} "
            f"({theory * (1 - resolution):.3g} to {theory * (1 + resolution):.3g})"
        )
    return None


def grid_resolves(check: WidthThresholdCheck, grid_values: list[float]) -> str | None:
    """Why a grid of widths cannot resolve the thresholds the check tests (None when it can): every
    activation's threshold needs a judged width (outside the ±tolerance band) within the check's
    resolution on each side. The catalog test calls it on each spec's width grid."""
    problems = [
        problem
        for activation in check.activations
        if (
            problem := _resolution_problem(
                activation,
                theoretical_threshold(activation),
                [float(w) for w in grid_values],
                check.tolerance,
                check.resolution_or_default,
            )
        )
        is not None
    ]
    return "; ".join(problems) if problems else None
