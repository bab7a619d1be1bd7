"""`rank_vs_depth`: at initialisation, Post-Norm's input-output Jacobian rank collapses with depth while
Pre-Norm's plateaus (Transforming Rank).

Each trial carries its epoch-0 measurement of the full-depth stack (`init_erank_jacobian`: effective
rank / width). The findings, Holm-adjusted together:
- the collapsing rows (default norm_placement=post) end below `collapse_level`;
- the plateauing rows (default norm_placement=pre) stay above `plateau_level`;
- plateauing − collapsing > 0, paired by seed.
When the trials also report the representation rank at every depth (`init_erank_repr_<l>`, read by
studies.evidence.depth_series), a fourth finding tests that the collapsing rows' rank falls with depth
(per-seed least-squares slope over depth < 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from studies.claims._base import CheckBase, against_level, comparison_finding, directional_verdict
from studies.claims.trials import StudyData, describe_selector, select
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

    @model_validator(mode="after")
    def _levels_ordered(self) -> RankVsDepthCheck:
        if self.collapse_level > self.plateau_level:
            raise ValueError("collapse_level must not exceed plateau_level")
        return self

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
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
        slopes = self._depth_slopes(data)
        if slopes:
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
        notes = (
            ()
            if slopes
            else (
                f"the trials report no rank at every depth ({DEPTH_MEASURE}_<l>): 'with depth' is judged "
                f"from {self.metric} of the full-depth stack",
            )
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
