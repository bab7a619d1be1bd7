"""`ratio_vs_depth`: at initialisation Pre-Norm's branch-to-skip ratio decays like 1/sqrt(l) while
Post-Norm's stays constant; Pre-Norm's residual stream grows like sqrt(l) (Transforming Rank).

Each trial reports, per residual unit, the ratio of what it adds to the stream it reads
(`init_branch_skip_ratio_<l>`, l = depth of that stream) and the stream's RMS at every depth
(`init_stream_rms_<l>`). Per seed, a log-log least-squares line over the deeper depths gives each law's
exponent (studies.claims.depth_fits); the findings:
- decaying rows (default norm_placement=pre): ratio exponent within `decay_exponent` ± `tolerance`;
- constant rows (default norm_placement=post): ratio exponent within 0 ± `tolerance`;
- decaying rows: stream exponent within `stream_exponent` ± `tolerance` (not tested when
  `stream_metric` is null or the trials do not report it).
A part whose measurements the trials do not carry is a `not tested` finding, never silently left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field

from studies.claims._base import CheckBase
from studies.claims.depth_fits import (
    band_finding,
    fit_window,
    loglog_exponent,
    not_tested_finding,
    per_depth,
    per_seed,
)
from studies.claims.sensitivity import Sensitivity, with_sensitivity
from studies.claims.trials import StudyData, TrialData, describe_selector
from studies.claims.verdicts import CheckResult, Finding, combine_verdicts

__all__ = ["RatioVsDepthCheck"]


class RatioVsDepthCheck(CheckBase):
    type: Literal["ratio_vs_depth"] = "ratio_vs_depth"
    metric: str = "init_branch_skip_ratio"  # per-depth prefix: <metric>_<l>
    decaying: dict[str, Any] = Field(default_factory=lambda: {"norm_placement": "pre"})
    constant: dict[str, Any] = Field(default_factory=lambda: {"norm_placement": "post"})
    decay_exponent: float = -0.5  # the paper's 1/sqrt(l)
    stream_metric: str | None = "init_stream_rms"  # per-depth prefix of the stream's size; None: not tested
    stream_exponent: float = 0.5  # the paper's sqrt(l) growth of the Pre-Norm stream
    # Half-width of the band around each exponent. The rival laws are 0 (constant), -1/2 and -1 (1/l):
    # a band narrower than half their spacing (0.25) tells them apart.
    tolerance: float = Field(0.15, gt=0.0, lt=0.5)
    fit_from: float = Field(
        0.25, ge=0.0, lt=1.0
    )  # fit depths l >= fit_from * deepest (the laws are asymptotic)
    sensitivity: Sensitivity | None = None

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        return with_sensitivity(self.sensitivity, data, self._evaluate)

    def _exponent(self, prefix: str) -> Callable[[TrialData], float | None]:
        def fit(trial: TrialData) -> float | None:
            return loglog_exponent(fit_window(per_depth(trial, prefix), self.fit_from))

        return fit

    def _law(
        self, data: StudyData, selector: dict[str, Any], prefix: str, target: float, what: str
    ) -> Finding:
        label = f"{describe_selector(selector)}: exponent of {prefix}_<l> over depth ({what})"
        expected = f"in [{target - self.tolerance:.3g}, {target + self.tolerance:.3g}]"
        values = [v for v in per_seed(data, selector, self._exponent(prefix)).values() if v is not None]
        if not values:
            return not_tested_finding(
                label,
                expected,
                f"no completed trial of {describe_selector(selector)} reports {prefix}_<l> "
                "at 3 or more depths in the fit window",
            )
        return band_finding(
            values, label=label, target=target, tolerance=self.tolerance, alpha=self.alpha, paper=target
        )

    def _evaluate(self, data: StudyData) -> CheckResult:
        findings = [
            self._law(data, self.decaying, self.metric, self.decay_exponent, "ratio ~ l^-1/2"),
            self._law(data, self.constant, self.metric, 0.0, "ratio constant"),
        ]
        stream_label = f"{describe_selector(self.decaying)}: exponent of the stream's size over depth"
        if self.stream_metric is None:
            findings.append(
                not_tested_finding(
                    stream_label, f"≈ {self.stream_exponent:g}", "the check has no stream_metric"
                )
            )
        else:
            findings.append(
                self._law(data, self.decaying, self.stream_metric, self.stream_exponent, "stream ~ l^1/2")
            )
        verdict = combine_verdicts(f.verdict for f in findings)
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"at initialisation the branch-to-skip ratio of {describe_selector(self.decaying)} should "
            f"decay like l^{self.decay_exponent:g} and that of {describe_selector(self.constant)} stay constant "
            f"(exponents ± {self.tolerance:g}, fitted over depths >= {self.fit_from:g} of the deepest): {verdict}.",
            findings=tuple(findings),
            notes=(
                "exponents are per-seed log-log least-squares slopes over the deeper depths; a finding is "
                "judged by whether the interval of their mean lies inside the band (not Holm-adjusted: "
                "each is an interval inclusion, not a test against zero)",
            ),
            confidence=self.confidence,
        )
