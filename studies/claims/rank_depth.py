"""`rank_vs_depth`: at initialisation, Post-Norm's input-output Jacobian rank collapses with depth while
Pre-Norm's plateaus (Transforming Rank).

Each trial carries its epoch-0 measurement of the full-depth stack (`init_erank_jacobian`: effective
rank / width). The findings, Holm-adjusted together:
- the collapsing rows (default norm_placement=post) end below `collapse_level`;
- the plateauing rows (default norm_placement=pre) stay above `plateau_level`;
- plateauing − collapsing > 0, paired by seed.
"With depth" is judged from the rank at every depth when the trials report it:
- the Jacobian's rank at every depth (`<depth_metric>_<l>`, reported by token-wise stacks such as the
  residual MLP, where d h_l / d h_0 is exact at every l): the collapsing rows' log-log exponent of
  rank over depth is below 0, and the plateauing rows' exponent exceeds the collapsing rows' (paired by
  seed): Post-Norm loses rank with depth faster than Pre-Norm;
- else the representation rank at every depth (`init_erank_repr_<l>`, read by
  studies.evidence.depth_series): the collapsing rows' least-squares slope over depth is below 0.
With `sensitivity`, the verdict is shown per value of a swept knob (studies.claims.sensitivity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from studies.claims._base import CheckBase, against_level, comparison_finding, directional_verdict
from studies.claims.depth_fits import fit_window, loglog_exponent, per_depth, per_seed
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import StudyData, TrialData, describe_selector, select
from studies.claims.verdicts import CheckResult, combine_verdicts
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
        for (label, expected, comparison, sign, level), p_adj in zip(tests, adjusted, strict=True):
            verdict, note = directional_verdict(comparison, p_adj, sign, self.alpha)
            findings.append(
                comparison_finding(
                    comparison,
                    label=label,
                    expected=expected,
                    verdict=verdict,
                    note=note,
                    p_adjusted=p_adj,
                    level=level,
                )
            )
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
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"at initialisation {describe_selector(self.collapsing)} should collapse "
            f"(< {self.collapse_level:g}) while {describe_selector(self.plateauing)} plateaus "
            f"(> {self.plateau_level:g}): {verdict}.",
            findings=tuple(findings),
            notes=notes,
            confidence=self.confidence,
        )

    def _exponent(self, trial: TrialData) -> float | None:
        return loglog_exponent(fit_window(per_depth(trial, self.depth_metric), self.fit_from))

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
