"""`difference`: one method against a reference on a metric (AutoNorm-S vs FrozenLN on CIFAR-10, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, model_validator

from studies.claims._base import CheckBase
from studies.claims._pairs import Expectation, PairSpec, RowSelector, describe_pairs, evaluate_pairs
from studies.claims.trials import StudyData
from studies.claims.verdicts import CheckResult

__all__ = ["DifferenceCheck"]


class DifferenceCheck(CheckBase):
    """`method` − `reference` on `metric` (None: the study's primary test metric) is as `expect` says."""

    type: Literal["difference"] = "difference"
    method: RowSelector
    reference: RowSelector | None = None  # None: the study's reference method
    metric: str | None = None
    expect: Expectation = "better"
    margin: float | None = Field(None, gt=0.0)
    relative_margin: float | None = Field(None, gt=0.0, lt=1.0)
    paper_difference: float | None = None

    def pair(self) -> PairSpec:
        return PairSpec(
            method=self.method,
            reference=self.reference,
            expect=self.expect,
            margin=self.margin,
            relative_margin=self.relative_margin,
            paper_difference=self.paper_difference,
        )

    @model_validator(mode="after")
    def _valid_pair(self) -> DifferenceCheck:
        self.pair()  # the pair's own rules (a margin for no_difference) apply here too
        return self

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        (finding,) = evaluate_pairs(data, [self.pair()], metric=self.metric, alpha=self.alpha, paper=paper)
        return CheckResult(
            check=self.type,
            verdict=finding.verdict,
            summary=describe_pairs([finding]),
            findings=(finding,),
            confidence=self.confidence,
        )
