"""`mean_spike`: a one-matrix branch with a non-centred activation (ReLU) accumulates a coherent mean
spike with depth, growing linearly; a second matrix, or a centred activation (tanh), avoids it
(Transforming Rank).

Two parts, each with its findings:

1. The spike grows more than in the controls. The measured quantity is each trial's spike growth at
   initialisation, `init_mean_spike_last − init_mean_spike_first` (mean-spike ratio of the last residual
   representation minus the first's). Findings, Holm-adjusted together: the spiking rows' growth is
   above 0, and above every control row's growth, paired by seed.

2. It grows LINEARLY with depth (`linear`). The mean-spike ratio ||mean|| / ||Z|| is bounded by 1, so
   it cannot grow linearly; what the paper's argument makes linear is the size of the mean itself:
   every one-matrix ReLU branch adds a mean of the same sign in every coordinate (E[relu(z)] > 0), so
   the means add coherently, ~ l, while a second matrix turns each layer's mean in a random direction
   and tanh's is centred: theirs add like a random walk, ~ sqrt(l). The measured quantity is
   `init_mean_drift_<l>`, the RMS of the mean token the blocks have added by depth l
   (models.rank.init_rank_report). Per seed, a log-log line gives the growth exponent and a straight
   line its slope and R²; the findings: the spiking rows' exponent within 1 ± `tolerance`, their
   straight-line R² above `min_r2` and slope above 0, and every control's exponent outside that band.
   The exponent, not R², tells the controls apart: a sqrt(l) curve also fits a line with R² near 0.97.

A part the trials cannot answer (no per-depth drift reported) is a `not tested` finding; a check
without `linear` says in its notes that the linear growth was not tested.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from studies.claims._base import (
    CheckBase,
    against_level,
    comparison_finding,
    directional_verdict,
)
from studies.claims.depth_fits import (
    band_finding,
    fit_window,
    linear_fit,
    loglog_exponent,
    not_tested_finding,
    per_depth,
    per_seed,
)
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import StudyData, TrialData, describe_selector, select
from studies.claims.verdicts import CheckResult, Finding, combine_verdicts
from studies.stats import Comparison, adjust, compare_by_seed

__all__ = ["LinearGrowth", "MeanSpikeCheck"]

FIRST = "init_mean_spike_first"
LAST = "init_mean_spike_last"


class LinearGrowth(BaseModel):
    """How the linear growth of the spike with depth is judged."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    metric: str = "init_mean_drift"  # per-depth prefix: <metric>_<l>
    exponent: float = 1.0  # linear growth
    # Half-width of the exponent band: half-way (0.25) between linear growth (1) and the random walk
    # (1/2) of the controls, so each row is judged by the law it is closer to.
    tolerance: float = Field(0.25, gt=0.0, lt=0.5)
    min_r2: float = Field(0.98, gt=0.0, lt=1.0)  # straight-line fit quality of the spiking rows
    fit_from: float = Field(0.0, ge=0.0, lt=1.0)  # fit depths l >= max(1, fit_from * deepest)


class MeanSpikeCheck(CheckBase):
    type: Literal["mean_spike"] = "mean_spike"
    spiking: dict[str, Any] = Field(default_factory=lambda: {"branch": "one_matrix", "activation": "relu"})
    controls: list[dict[str, Any]] = Field(
        default_factory=lambda: [
            {"branch": "two_matrix", "activation": "relu"},
            {"branch": "one_matrix", "activation": "tanh"},
        ],
        min_length=1,
    )
    linear: LinearGrowth | None = None  # None: the linear growth with depth is not tested
    sensitivity: Sensitivity | None = None

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, self._evaluate)

    def _evaluate(self, data: StudyData) -> CheckResult:
        findings = self._growth_findings(data)
        notes: tuple[str, ...] = ()
        if self.linear is None:
            notes = ("the linear growth with depth is not tested (the check has no `linear` parameters)",)
        else:
            findings.extend(self._linear_findings(data, self.linear))
        verdict = combine_verdicts(f.verdict for f in findings)
        linear = " linearly with depth" if self.linear is not None else " with depth"
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"{describe_selector(self.spiking)} should grow a mean spike{linear}, more than "
            + ", ".join(describe_selector(c) for c in self.controls)
            + f": {verdict}.",
            findings=tuple(findings),
            notes=notes,
            confidence=self.confidence,
        )

    def _growth_findings(self, data: StudyData) -> list[Finding]:
        spiking = self._growth(data, self.spiking)
        tests: list[tuple[str, Comparison]] = [
            (
                f"{describe_selector(self.spiking)}: spike growth (last − first)",
                against_level([v for v in spiking.values() if v is not None], 0.0, self.alpha),
            )
        ]
        for control in self.controls:
            tests.append(
                (
                    f"{describe_selector(self.spiking)} − {describe_selector(control)}: spike growth",
                    compare_by_seed(spiking, self._growth(data, control), confidence=self.confidence),
                )
            )
        adjusted = adjust([c.p_value for _, c in tests], "holm")
        findings = []
        for (label, comparison), p_adj in zip(tests, adjusted, strict=True):
            verdict, note = directional_verdict(comparison, p_adj, 1, self.alpha)
            findings.append(
                comparison_finding(
                    comparison, label=label, expected="> 0", verdict=verdict, note=note, p_adjusted=p_adj
                )
            )
        return findings

    def _linear_findings(self, data: StudyData, linear: LinearGrowth) -> list[Finding]:
        def window(trial: TrialData) -> dict[int, float]:
            return fit_window(per_depth(trial, linear.metric), linear.fit_from)

        def exponent(trial: TrialData) -> float | None:
            return loglog_exponent(window(trial))

        def line(index: int) -> Callable[[TrialData], float | None]:
            def fit(trial: TrialData) -> float | None:
                result = linear_fit(window(trial))
                return None if result is None else result[index]

            return fit

        low, high = linear.exponent - linear.tolerance, linear.exponent + linear.tolerance
        band = f"[{low:.3g}, {high:.3g}]"
        spiking = describe_selector(self.spiking)
        missing = f"no completed trial reports {linear.metric}_<l> at 3 or more depths"
        findings = []
        values = _present(per_seed(data, self.spiking, exponent))
        label = f"{spiking}: growth exponent of {linear.metric}_<l> over depth (linear: {linear.exponent:g})"
        if values:
            findings.append(
                band_finding(
                    values,
                    label=label,
                    target=linear.exponent,
                    tolerance=linear.tolerance,
                    alpha=self.alpha,
                    paper=linear.exponent,
                )
            )
        else:
            findings.append(not_tested_finding(label, f"in {band}", missing))
        for what, index, level in (
            ("R² of a straight line", 1, linear.min_r2),
            ("slope of a straight line", 0, 0.0),
        ):
            label = f"{spiking}: {what} through {linear.metric}_<l> over depth"
            values = _present(per_seed(data, self.spiking, line(index)))
            if not values:
                findings.append(not_tested_finding(label, f"> {level:g}", missing))
                continue
            comparison = against_level(values, level, self.alpha)
            verdict, note = directional_verdict(comparison, comparison.p_value, 1, self.alpha)
            findings.append(
                comparison_finding(
                    comparison,
                    label=label,
                    expected=f"> {level:g}",
                    verdict=verdict,
                    note=note,
                    p_adjusted=None,
                    level=level,
                )
            )
        for control in self.controls:
            label = f"{describe_selector(control)}: growth exponent of {linear.metric}_<l> (not linear)"
            values = _present(per_seed(data, control, exponent))
            if not values:
                findings.append(not_tested_finding(label, f"outside {band}", missing))
                continue
            findings.append(
                band_finding(
                    values,
                    label=label,
                    target=linear.exponent,
                    tolerance=linear.tolerance,
                    alpha=self.alpha,
                    inside=False,
                )
            )
        return findings

    @staticmethod
    def _growth(data: StudyData, selector: Mapping[str, Any]) -> dict[int, float | None]:
        growth: dict[int, float | None] = {}
        for trial in select(data.completed(), selector):
            first, last = trial.get(FIRST), trial.get(LAST)
            growth[int(trial.seed)] = None if first is None or last is None else last - first
        return growth


def _present(values: Mapping[int, float | None]) -> list[float]:
    return [v for v in values.values() if v is not None]
