"""`sweep`: a method's grid of settings, each point against a reference row that shares the `match`
knobs (every AutoNorm-S (T_freeze, eps_H, tau) point against unfrozen AutoNorm at the same tau).

Every point is one paired finding, Holm-adjusted across the points that are tested. A point whose
freeze fired in too few of its seeds (studies.claims.preconditions.MIN_FREEZE_FRACTION) ran as unfrozen
AutoNorm there, so it is `not tested` (no difference is offered: AutoNorm against itself would read 0
[0, 0]) and takes no part in the Holm adjustment. The verdict is that of the `focus` points (those
matching the paper's setting; several when the focus leaves a knob open, combined: all must hold), and
the summary counts the points that are significantly better or worse, and those not tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from studies.claims._base import CheckBase
from studies.claims._pairs import Expectation, PairSpec, _expected_text, _sign, evaluate_pairs
from studies.claims.preconditions import FREEZE_NOT_FIRED, freeze_count
from studies.claims.trials import StudyData, describe_selector, parse_group_label, same_value, select
from studies.claims.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTED,
    SUPPORTED,
    CheckResult,
    Finding,
    combine_verdicts,
)
from studies.methods import FREEZING_METHODS

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
        untested: dict[int, Finding] = {}
        for i, pair in enumerate(pairs):
            if (finding := self._not_fired(data, pair)) is not None:
                untested[i] = finding
        tested = [i for i in range(len(pairs)) if i not in untested]
        # Holm over the tested points only: an untested point has no p-value to adjust.
        evaluated = evaluate_pairs(
            data, [pairs[i] for i in tested], metric=self.metric, alpha=self.alpha, paper=paper
        )
        by_index: dict[int, Finding] = {**untested, **dict(zip(tested, evaluated, strict=True))}
        findings = [by_index[i] for i in range(len(pairs))]
        better = sum(f.verdict == SUPPORTED for f in findings) if self.expect != "no_difference" else 0
        worse = sum(f.verdict == CONTRADICTED for f in findings)
        counts = (
            f"{better} of {len(tested)} {'tested ' if untested else ''}sweep points significantly {self.expect}, "
            f"{worse} contradict it"
        )
        if untested:
            counts += f"; {len(untested)} of {len(findings)} points not tested ({FREEZE_NOT_FIRED})"
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

    def _not_fired(self, data: StudyData, pair: PairSpec) -> Finding | None:
        """A `not tested` finding for a point whose freeze fired in too few seeds (None: it fired enough,
        or the swept method has no freeze)."""
        point = pair.method
        if not isinstance(point, dict) or point.get("method") not in FREEZING_METHODS:
            return None
        label = describe_selector(point)
        count = freeze_count(label, select(data.trials, point))
        if count.n == 0 or count.enough():
            return None
        reference = describe_selector(pair.reference) if pair.reference is not None else data.reference
        return Finding(
            label=f"{label} − {reference} ({data.metric_name(self.metric)})",
            expected=_expected_text(_sign(self.expect, data.direction(self.metric)), None),
            verdict=NOT_TESTED,
            n=count.n,
            note=f"{FREEZE_NOT_FIRED}: {count.measured}, needs {count.needed()}; without the freeze the "
            "point ran as unfrozen AutoNorm",
        )
