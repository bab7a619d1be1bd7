"""`ordering`: several pairwise differences that must all hold (Random Selector above unfrozen AutoNorm
and AutoNorm-S above FrozenLN on CIFAR-10, ...); p-values Holm-adjusted across the pairs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from studies.claims._base import CheckBase
from studies.claims._pairs import PairSpec, describe_pairs, evaluate_pairs
from studies.claims.trials import StudyData
from studies.claims.verdicts import CheckResult, combine_verdicts

__all__ = ["OrderingCheck"]


class OrderingCheck(CheckBase):
    """Every pair holds: supported when all are supported, contradicted when any is contradicted."""

    type: Literal["ordering"] = "ordering"
    pairs: list[PairSpec] = Field(min_length=1)
    metric: str | None = None

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        findings = evaluate_pairs(data, self.pairs, metric=self.metric, alpha=self.alpha, paper=paper)
        return CheckResult(
            check=self.type,
            verdict=combine_verdicts(f.verdict for f in findings),
            summary=describe_pairs(findings),
            findings=tuple(findings),
            confidence=self.confidence,
        )
