"""`sweep`: a method's grid of settings, each point against a reference row that shares the `match`
knobs (every AutoNorm-S (T_freeze, eps_H, tau) point against unfrozen AutoNorm at the same tau).

Every point is one paired finding, Holm-adjusted across the sweep. The verdict is that of the `focus`
points (those matching the paper's setting; several when the focus leaves a knob open, combined: all
must hold), and the summary counts the points that are significantly better or worse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from studies.claims._base import CheckBase
from studies.claims._pairs import Expectation, PairSpec, evaluate_pairs
from studies.claims.trials import StudyData, parse_group_label, same_value
from studies.claims.verdicts import CONTRADICTED, INCONCLUSIVE, SUPPORTED, CheckResult, combine_verdicts

__all__ = ["SweepCheck"]


class SweepCheck(CheckBase):
    type: Literal["sweep"] = "sweep"
    method: str = "autonorm_s"
    reference: str = "autonorm"
    match: list[str] = Field(default_factory=lambda: ["tau"])
    focus: dict[str, Any] = Field(
        min_length=1
    )  # the paper's setting, e.g. {t_freeze: 10, eps_h: 0.1, tau: 0.5}
    metric: str | None = None
    expect: Expectation = "better"

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        groups = sorted({t.group for t in data.completed() if t.method == self.method}, key=str)
        pairs: list[PairSpec] = []
        focus_indices: list[int] = []
        for group in groups:
            knobs = parse_group_label(group)
            point = {"method": self.method, **knobs}
            reference = {"method": self.reference, **{k: knobs[k] for k in self.match if k in knobs}}
            if all(same_value(knobs.get(k), v) for k, v in self.focus.items()):
                focus_indices.append(len(pairs))
            pairs.append(PairSpec(method=point, reference=reference, expect=self.expect))
        if not pairs:
            return CheckResult(
                check=self.type,
                verdict=INCONCLUSIVE,
                summary=f"no completed {self.method} sweep points",
                confidence=self.confidence,
            )
        findings = evaluate_pairs(data, pairs, metric=self.metric, alpha=self.alpha, paper=paper)
        better = sum(f.verdict == SUPPORTED for f in findings) if self.expect != "no_difference" else 0
        worse = sum(f.verdict == CONTRADICTED for f in findings)
        counts = (
            f"{better} of {len(findings)} sweep points significantly {self.expect}, {worse} contradict it"
        )
        focus = [findings[i] for i in focus_indices]
        if not focus:
            verdict = INCONCLUSIVE
            summary = f"the sweep lacks the paper's setting {self.focus}; {counts}."
        else:
            verdict = combine_verdicts(f.verdict for f in focus)
            at_focus = "; ".join(f"{f.label}: {f.verdict}" for f in focus)
            summary = f"at the paper's setting {self.focus}: {verdict} ({at_focus}); {counts}."
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=summary,
            findings=tuple(findings),
            confidence=self.confidence,
        )
