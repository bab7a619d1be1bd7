"""`rank_vs_depth`: at initialisation, Post-Norm's input-output Jacobian rank collapses with depth while
Pre-Norm's plateaus (Transforming Rank).

Each trial carries its epoch-0 measurement of the full-depth stack (`init_erank_jacobian`: effective
rank / width). The findings, Holm-adjusted together:
- the collapsing rows (default norm_placement=post) end below `collapse_level`: supported only when the
  whole interval lies below it (the note gives the margin);
- the plateauing rows (default norm_placement=pre) stay above `plateau_level`;
- plateauing − collapsing > 0, paired by seed.
"With depth" is judged from the rank at every depth when the trials report it:
- the Jacobian's rank at every depth (`<depth_metric>_<l>`, reported by token-wise stacks such as the
  residual MLP, where d h_l / d h_0 is exact at every l): the collapsing rows' log-log exponent of
  rank over depth is below 0, and the plateauing rows' exponent exceeds the collapsing rows' (paired by
  seed): Post-Norm loses rank with depth faster than Pre-Norm;
- else the representation rank at every depth (`init_erank_repr_<l>`, read by
  studies.evidence.depth_series): the collapsing rows' least-squares slope over depth is below 0.
With `plateau_band`, "plateaus" is tested as a plateau, not as a level: the plateauing rows' log-log
exponent over the deeper part of the stack (l >= `plateau_from` of the deepest) must lie inside
±plateau_band, judged by the interval of the mean exponent over seeds (an equivalence test, outside the
Holm family). A rank still falling as l^-0.2 is not a plateau; an interval wider than the band cannot
tell the two apart and is inconclusive, with the seeds that would.
With `sensitivity`, the verdict is shown per value of a swept knob (studies.claims.sensitivity).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from studies.claims._base import CheckBase, against_level, comparison_finding, directional_verdict
from studies.claims.depth_fits import (
    band_finding,
    fit_window,
    loglog_exponent,
    not_tested_finding,
    per_depth,
    per_seed,
)
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import StudyData, TrialData, describe_selector, select
from studies.claims.verdicts import INCONCLUSIVE, SUPPORTED, CheckResult, Finding, combine_verdicts
from studies.evidence import DEPTH_MEASURE, depth_series
from studies.stats import Comparison, adjust, compare_by_seed

__all__ = ["RankVsDepthCheck"]


class RankVsDepthCheck(CheckBase):
    type: Literal["rank_vs_depth"] = "rank_vs_depth"
    metric: str = "init_erank_jacobian"
    collapsing: dict[str, Any] = Field(default_factory=lambda: {"norm_placement": "post"})
    plateauing: dict[str, Any] = Field(default_factory=lambda: {"norm_placement": "pre"})
    collapse_level: float = Field(0.1, gt=0.0, lt=1.0)  # "toward zero": normalised erank below this
    plateau_level: float = Field(0.2, gt=0.0, lt=1.0)  # "a moderate level": normalised erank above this
    depth_metric: str = "init_erank_jacobian"  # per-depth prefix <depth_metric>_<l> of the rank with depth
    fit_from: float = Field(0.25, ge=0.0, lt=1.0)  # exponents fit depths l >= fit_from * deepest
    # "Plateaus" as a plateau: the plateauing rows' exponent over l >= plateau_from * deepest must lie in
    # ±plateau_band (None: not judged; the level alone then stands for the plateau).
    plateau_band: float | None = Field(None, gt=0.0, lt=1.0)
    plateau_from: float = Field(0.5, ge=0.0, lt=1.0)
    sensitivity: Sensitivity | None = None

    @model_validator(mode="after")
    def _levels_ordered(self) -> RankVsDepthCheck:
        if self.collapse_level > self.plateau_level:
            raise ValueError("collapse_level must not exceed plateau_level")
        return self

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, self._evaluate)

    def _evaluate(self, data: StudyData) -> CheckResult:
        collapsing = data.by_seed(self.collapsing, self.metric)
        plateauing = data.by_seed(self.plateauing, self.metric)
        low = against_level(
            [v for v in collapsing.values() if v is not None], self.collapse_level, self.alpha
        )
        high = against_level(
            [v for v in plateauing.values() if v is not None], self.plateau_level, self.alpha
        )
        gap = compare_by_seed(plateauing, collapsing, confidence=self.confidence)
        tests: list[tuple[str, str, Comparison, int, float]] = [
            (
                f"{describe_selector(self.collapsing)}: {self.metric}",
                f"< {self.collapse_level:g}",
                low,
                -1,
                self.collapse_level,
            ),
            (
                f"{describe_selector(self.plateauing)}: {self.metric}",
                f"> {self.plateau_level:g}",
                high,
                1,
                self.plateau_level,
            ),
            (
                f"{describe_selector(self.plateauing)} − {describe_selector(self.collapsing)}: {self.metric}",
                "> 0",
                gap,
                1,
                0.0,
            ),
        ]
        collapsing_exponents = per_seed(data, self.collapsing, self._exponent)
        plateauing_exponents = per_seed(data, self.plateauing, self._exponent)
        exponents = [v for v in collapsing_exponents.values() if v is not None]
        slopes = [] if exponents else self._depth_slopes(data)
        if exponents:
            prefix = f"{self.depth_metric}_<depth>"
            tests.append(
                (
                    f"{describe_selector(self.collapsing)}: exponent of {prefix} over depth (log-log)",
                    "< 0",
                    against_level(exponents, 0.0, self.alpha),
                    -1,
                    0.0,
                )
            )
            tests.append(
                (
                    f"{describe_selector(self.plateauing)} − {describe_selector(self.collapsing)}: exponent "
                    f"of {prefix} over depth",
                    "> 0",
                    compare_by_seed(plateauing_exponents, collapsing_exponents, confidence=self.confidence),
                    1,
                    0.0,
                )
            )
        elif slopes:
            tests.append(
                (
                    f"{describe_selector(self.collapsing)}: slope of {DEPTH_MEASURE}_<depth> over depth",
                    "< 0",
                    against_level(slopes, 0.0, self.alpha),
                    -1,
                    0.0,
                )
            )
        adjusted = adjust([c.p_value for _, _, c, _, _ in tests], "holm")
        findings = []
        for index, ((label, expected, comparison, sign, level), p_adj) in enumerate(
            zip(tests, adjusted, strict=True)
        ):
            verdict, note = directional_verdict(comparison, p_adj, sign, self.alpha)
            finding = comparison_finding(
                comparison,
                label=label,
                expected=expected,
                verdict=verdict,
                note=note,
                p_adjusted=p_adj,
                level=level,
            )
            findings.append(_against_level(finding, sign, level) if index < 2 else finding)
        if self.plateau_band is not None:
            findings.append(self._plateau_finding(data, self.plateau_band))
        verdict = combine_verdicts(f.verdict for f in findings)
        if exponents:
            notes: tuple[str, ...] = (
                f"'with depth' is judged from {self.depth_metric}_<l>, the Jacobian's rank at every depth l "
                f"(per-seed log-log exponents over depths >= {self.fit_from:g} of the deepest)",
            )
        elif slopes:
            notes = ()
        else:
            notes = (
                f"the trials report no rank at every depth ({DEPTH_MEASURE}_<l>): 'with depth' is judged "
                f"from {self.metric} of the full-depth stack",
            )
        plateau = f"> {self.plateau_level:g}"
        if self.plateau_band is not None:
            plateau += (
                f", and its log-log exponent over l >= {self.plateau_from:g} L within ±{self.plateau_band:g}"
            )
            notes += (
                f"'plateaus' is judged as a plateau: {describe_selector(self.plateauing)}'s log-log exponent "
                f"of {self.depth_metric}_<l> over the deeper part of the stack (l >= {self.plateau_from:g} of "
                f"the deepest) must lie inside ±{self.plateau_band:g} (a rank that loses at most "
                f"{1.0 - 2.0**-self.plateau_band:.0%} per doubling of depth), by the {self.confidence:.0%} "
                "interval of the mean exponent over seeds; an interval wider than the band is inconclusive",
            )
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"at initialisation {describe_selector(self.collapsing)} should collapse "
            f"(< {self.collapse_level:g}) while {describe_selector(self.plateauing)} plateaus "
            f"({plateau}): {verdict}.",
            findings=tuple(findings),
            notes=notes,
            confidence=self.confidence,
        )

    def _exponent(self, trial: TrialData) -> float | None:
        return loglog_exponent(fit_window(per_depth(trial, self.depth_metric), self.fit_from))

    def _plateau_exponent(self, trial: TrialData) -> float | None:
        return loglog_exponent(fit_window(per_depth(trial, self.depth_metric), self.plateau_from))

    def _plateau_finding(self, data: StudyData, band: float) -> Finding:
        """The plateauing rows' exponent over the deeper part of the stack, inside ±band or not."""
        label = (
            f"{describe_selector(self.plateauing)}: exponent of {self.depth_metric}_<depth> over depths "
            f">= {self.plateau_from:g} of the deepest (log-log)"
        )
        exponents = [
            v for v in per_seed(data, self.plateauing, self._plateau_exponent).values() if v is not None
        ]
        if not exponents:
            return not_tested_finding(
                label,
                f"in [{-band:.3g}, {band:.3g}]",
                f"the trials report no rank at every depth ({self.depth_metric}_<l>): a plateau is a "
                "statement about the rank's course over depth, which a full-depth value cannot show",
            )
        return band_finding(
            exponents, label=label, target=0.0, tolerance=band, alpha=self.alpha, resolve=True
        )

    def _depth_slopes(self, data: StudyData) -> list[float]:
        """Per-seed slope of the representation rank over depth, where every depth was reported."""
        slopes = []
        for trial in select(data.completed(), self.collapsing):
            series, per_depth = depth_series(trial.init_metrics(), None)
            if per_depth and len(series) >= 3:
                depths = sorted(series)
                values = [series[d] for d in depths]
                slopes.append(float(np.polyfit(np.asarray(depths, dtype=float), values, 1)[0]))
        return slopes


def _against_level(finding: Finding, sign: int, level: float) -> Finding:
    """A level finding passes only when its whole interval lies on the claimed side of the level; the
    note gives the margin, so a pass by a hair reads as one."""
    edge = finding.ci_high if sign < 0 else finding.ci_low
    if edge is None:
        return finding
    margin = level - edge if sign < 0 else edge - level
    side, where = ("upper", "below") if sign < 0 else ("lower", "above")
    if margin > 0:
        note = f"{finding.note}; the interval's {side} end {edge:.4g} lies {margin:.2g} {where} the level {level:g}"
        return dataclasses.replace(finding, note=note)
    note = f"{finding.note}; the interval's {side} end {edge:.4g} is not {where} the level {level:g}"
    verdict = INCONCLUSIVE if finding.verdict == SUPPORTED else finding.verdict
    return dataclasses.replace(finding, verdict=verdict, note=note)
