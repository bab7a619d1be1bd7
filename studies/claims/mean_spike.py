"""`mean_spike`: a one-matrix branch with a non-centred activation (ReLU) accumulates a coherent mean
spike with depth; a second matrix, or a centred activation (tanh), avoids it (Transforming Rank).

The measured quantity is each trial's spike growth at initialisation, `init_mean_spike_last −
init_mean_spike_first` (mean-spike ratio of the last residual representation minus the first's). The
findings, Holm-adjusted together: the spiking rows' growth is above 0, and above every control row's
growth, paired by seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from studies.claims._base import CheckBase, against_level, comparison_finding, directional_verdict
from studies.claims.trials import StudyData, describe_selector, select
from studies.claims.verdicts import CheckResult, combine_verdicts
from studies.stats import Comparison, adjust, compare_by_seed

__all__ = ["MeanSpikeCheck"]

FIRST = "init_mean_spike_first"
LAST = "init_mean_spike_last"


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

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
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
        verdict = combine_verdicts(f.verdict for f in findings)
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"{describe_selector(self.spiking)} should grow a mean spike with depth, more than "
            + ", ".join(describe_selector(c) for c in self.controls)
            + f": {verdict}.",
            findings=tuple(findings),
            confidence=self.confidence,
        )

    @staticmethod
    def _growth(data: StudyData, selector: Mapping[str, Any]) -> dict[int, float | None]:
        growth: dict[int, float | None] = {}
        for trial in select(data.completed(), selector):
            first, last = trial.get(FIRST), trial.get(LAST)
            growth[int(trial.seed)] = None if first is None or last is None else last - first
        return growth
