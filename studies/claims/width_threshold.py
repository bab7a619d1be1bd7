"""`width_threshold`: the branch Jacobian J_f = W_down diag(act'(W_up x)) W_up is full rank only when the
width expansion m/d exceeds 1 / p(act), p = E[act'(z)²] for z ~ N(0, 1) (Transforming Rank): 2 for ReLU,
about 2.19 for GELU.

Per activation, every grid width outside a band of ±`tolerance` (relative) around the theoretical
threshold is one finding: below the band the measured rank fraction (`metric`, default
`init_branch_rank`: numerical rank of J_f / d at initialisation) must stay under `full_level`, above it
the rank must reach `full_level`. Each is judged by the t interval of the mean over seeds: supported when
the whole interval lies on the expected side of `full_level`, contradicted when it lies on the other.
A summary finding per activation sets the smallest width that reached full rank against the theory.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from functools import cache
from typing import Literal

from pydantic import Field
from scipy import integrate, special, stats

from studies.claims._base import CheckBase, against_level, shift
from studies.claims.trials import StudyData
from studies.claims.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    CheckResult,
    Finding,
    combine_verdicts,
)

__all__ = ["WidthThresholdCheck", "activation_survival", "theoretical_threshold"]


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

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
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
                f"{f.label}: first full-rank width {'none' if f.measured is None else f'{f.measured:g}'}, "
                f"expected {f.expected} ({f.verdict})"
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
        reached = [w for w, values in by_width.items() if sum(values) / len(values) >= self.full_level]
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
        judged = [f.verdict for f in findings]
        below = any(w < theory * (1 - self.tolerance) for w in by_width)
        above = any(w > theory * (1 + self.tolerance) for w in by_width)
        overall = (
            combine_verdicts(judged)
            if below and above
            else (CONTRADICTED if CONTRADICTED in judged else INCONCLUSIVE)
        )
        note = "" if below and above else "the grid does not reach both sides of the threshold"
        findings.append(
            Finding(
                label=f"{activation}: full-rank width threshold",
                expected=f"≈ {theory:.3g} (1/p, p = {activation_survival(activation):.3f})",
                verdict=overall,
                measured=min(reached) if reached else None,
                n=len(by_width),
                paper=theory if paper is None else paper,
                note=note or "measured: the smallest grid width whose mean reached the full-rank level",
            )
        )
        return findings
