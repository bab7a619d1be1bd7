"""The mechanism evidence of a results page: gate views and rank views, with one JSON rendering."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from studies.evidence.gates import GateEvidence, gate_evidence
from studies.evidence.ranks import DEFAULT_RANK_KEY, RankEvidence, rank_evidence
from studies.evidence.trials import EvidenceTrial
from studies.stats.summary import check_confidence

__all__ = ["Evidence", "build_evidence", "jsonable"]


@dataclass(frozen=True)
class Evidence:
    """Per-layer and per-depth evidence of one results page; a part is None when no trial reported its data."""

    dataset: str
    metric: str
    higher_is_better: bool
    confidence: float
    gates: GateEvidence | None
    ranks: RankEvidence | None

    @property
    def is_empty(self) -> bool:
        return self.gates is None and self.ranks is None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types (lists, not tuples); None where a number is undefined."""
        return jsonable(dataclasses.asdict(self))


def build_evidence(
    trials: Iterable[EvidenceTrial],
    *,
    dataset: str,
    metric: str,
    higher_is_better: bool,
    confidence: float = 0.95,
    rank_key: str = DEFAULT_RANK_KEY,
) -> Evidence:
    """Gate views (methods with per-layer gates) and rank views (trials with init ranks at epoch 0)."""
    confidence = check_confidence(confidence)
    trials = list(trials)
    return Evidence(
        dataset=dataset,
        metric=metric,
        higher_is_better=higher_is_better,
        confidence=confidence,
        gates=gate_evidence(trials, confidence=confidence),
        ranks=rank_evidence(
            trials,
            metric=metric,
            higher_is_better=higher_is_better,
            rank_key=rank_key,
            confidence=confidence,
        ),
    )


def jsonable(value: Any) -> Any:
    """A dataclasses.asdict result in plain JSON types: string keys, lists for tuples."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
