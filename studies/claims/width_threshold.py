"""`width_threshold`: the branch Jacobian J_f = W_down diag(act'(W_up x)) W_up is full rank only when the
width expansion m/d exceeds 1 / p(act), p = E[act'(z)²] for z ~ N(0, 1) (Transforming Rank): 2 for ReLU,
about 2.19 for GELU.

What is judged: the rank of J_f itself. Each trial reports, over its blocks and a few tokens of the
example, the fraction of branch Jacobians (at the inputs each branch really sees) that are numerically
full rank, `init_branch_jacobian_full_rank` (models.rank.branch_jacobian_summary; numpy's matrix_rank
rule, sigma_min > d eps sigma_max). In the limit of wide layers the claim makes it a step from 0 to 1 at
1/p; at finite width the step is smoothed (for ReLU the k active units are Binomial(m, 1/2), rank(J_f) =
min(d, k)), so `full_level` 0.5 reads "the typical branch is full rank". The same trial reports the
fraction for a Gaussian null model of the same shapes (`<metric>_null`: i.i.d. Gaussian W_up, W_down and
pre-activations of the measured spread), the random-matrix prediction shown beside each finding. For
ReLU it steps at 2; GELU' never vanishes, so J_f and the null are full rank at every m >= d, and GELU's
widths below 2.19 contradict "full rank only above 2.19".

Per activation, every grid width outside a band of ±`tolerance` (relative) around 1/p is one finding:
below the band the mean of `metric` over seeds must stay under `full_level`, above it it must reach it,
judged by the t interval of the mean: supported when the whole interval lies on the expected side,
contradicted when it lies on the other. A summary finding per activation sets the width where the mean
crosses `full_level` (interpolated between grid widths) against 1/p. A grid that cannot resolve the
threshold (`grid_resolves`: no judged width within `resolution` of it on each side) gives that activation
`not tested`, unless a judged width already contradicts it.

Diagnostics, in the notes and not part of the verdict: the conditioning of J_f (d sigma_min / RMS sigma,
`init_branch_jacobian_smin`: J_f is square, so even at full rank its sigma_min sits at the hard edge
~RMS / d, and no Marchenko-Pastur gap opens above a threshold) and its normalised effective rank, each
per width with its interval and the null's value, and the soft count of active units sum_i act'(z_i)² / d
(`init_branch_active_width`), whose mean is (m/d) p by construction and crosses 1 at 1/p for any
activation, whatever J_f does.
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
    """The paper's width expansion m/d above which J_f is full rank: 1 / p(act)."""
    return 1.0 / activation_survival(activation)


Activation = Literal["relu", "gelu", "tanh"]
_DEFAULT_ACTIVATIONS: tuple[Activation, ...] = ("relu", "gelu")


class WidthThresholdCheck(CheckBase):
    type: Literal["width_threshold"] = "width_threshold"
    # The catalog judges `init_branch_jacobian_full_rank` at 0.5 (the fraction of full-rank J_f over blocks
    # and tokens); the defaults read the one-token numerical rank / d, full at 0.99.
    metric: str = "init_branch_rank"
    # The Gaussian null's value of a metric is reported as `<metric><null_suffix>` (models.rank).
    null_suffix: str = "_null"
    # Shown per width in the notes, with the null's value, and never judged.
    diagnostics: list[str] = Field(
        default_factory=lambda: ["init_branch_jacobian_smin", "init_branch_jacobian_erank"]
    )
    # The soft count of active units, (m/d) E[act'(z)²] by construction: its crossing of 1 in the notes.
    count_metric: str | None = "init_branch_active_width"
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
        notes: list[str] = []
        for activation in self.activations:
            findings.extend(self._activation_findings(data, activation, (paper or {}).get(activation)))
            notes.extend(self._diagnostic_notes(data, activation))
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
            notes=tuple(notes),
            confidence=self.confidence,
        )

    def _by_width(self, data: StudyData, activation: str, metric: str) -> dict[float, list[float]]:
        """Per grid width, the metric's value in every completed trial of the activation."""
        by_width: dict[float, list[float]] = defaultdict(list)
        for trial in data.completed():
            if str(trial.knob(self.activation_knob)) != activation:
                continue
            width, value = trial.knob(self.width_knob), trial.get(metric)
            try:
                width = float(width)
            except (TypeError, ValueError):
                continue
            if value is not None:
                by_width[width].append(value)
        return dict(by_width)

    def _null_means(self, data: StudyData, activation: str, metric: str) -> dict[float, float]:
        null = self._by_width(data, activation, metric + self.null_suffix)
        return {w: sum(values) / len(values) for w, values in null.items()}

    def _activation_findings(self, data: StudyData, activation: str, paper: float | None) -> list[Finding]:
        by_width = self._by_width(data, activation, self.metric)
        if not by_width:
            return []
        null = self._null_means(data, activation, self.metric)
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
            if width in null:
                note += f"; Gaussian null model of the same shapes: {null[width]:.3g}"
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
        if null:
            null_crossing = crossing(null, self.full_level)
            at = "(no crossing)" if null_crossing is None else f"{null_crossing:.3g}"
            note += f"; the Gaussian null model of the same shapes crosses at m/d {at}"
            if null_crossing is not None and null_crossing <= min(null):
                note += f" (it is full at the smallest grid width, {min(null):g})"
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

    def _diagnostic_notes(self, data: StudyData, activation: str) -> list[str]:
        """One line per diagnostic metric: its mean [t interval] over seeds at each width, with the null's
        mean; and where the soft count of active units crosses 1. Never part of the verdict."""
        notes = []
        for metric in self.diagnostics:
            by_width = self._by_width(data, activation, metric)
            if not by_width:
                continue
            null = self._null_means(data, activation, metric)
            cells = []
            for width in sorted(by_width):
                c = against_level(by_width[width], 0.0, self.alpha)
                interval = (
                    "no interval"
                    if c.diff_ci_low is None or c.diff_ci_high is None
                    else f"[{c.diff_ci_low:.3g}, {c.diff_ci_high:.3g}]"
                )
                null_text = f", null {null[width]:.3g}" if width in null else ""
                cells.append(f"{width:g}: {c.diff_mean:.3g} {interval} (n = {c.n}{null_text})")
            notes.append(
                f"{activation}, diagnostic (not part of the verdict): {metric} by m/d, mean "
                f"[{self.confidence:.0%} t interval] over seeds: " + "; ".join(cells)
            )
        if self.count_metric is not None:
            counts = self._by_width(data, activation, self.count_metric)
            if counts:
                at = crossing({w: sum(v) / len(v) for w, v in counts.items()}, 1.0)
                notes.append(
                    f"{activation}, diagnostic (not part of the verdict): {self.count_metric}, the soft count "
                    f"sum_i act'(z_i)² / d = (m/d) E[act'(z)²], crosses 1 at m/d "
                    f"{'(no crossing)' if at is None else f'{at:.3g}'} (1/p = {theoretical_threshold(activation):.3g} "
                    "by construction; it does not measure J_f's rank)"
                )
        return notes


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
