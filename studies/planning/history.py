"""What earlier studies of the same dataset and model left in the store: how long their trials took on this
cluster, and the final-phase values their comparisons paired.

Plain SQLAlchemy selects on the store's tables (studies.store owns them; nothing here writes). A trial's
row is written when it starts (`created_at`) and again when it ends (`updated_at`), so a finished trial's
wall time is the difference. A seed-batched trial is one row per seed, each spanning the whole batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from studies.spec import StudySpec
from studies.store import Phase, Study, StudyStatus, Trial, TrialStatus

__all__ = [
    "MAX_STUDIES",
    "History",
    "PairedValues",
    "TimedTrial",
    "read_history",
    "study_label",
    "without_study",
]

MAX_STUDIES = 10  # the newest matching studies read: enough to time a cluster, bounded for the query
_CANDIDATES = 200  # studies of the dataset looked at for a matching model, newest first


@dataclass(frozen=True)
class TimedTrial:
    study: str  # "name (id)"
    method: str
    phase: str
    started: datetime
    ended: datetime
    epochs: float

    @property
    def seconds(self) -> float:
        return (self.ended - self.started).total_seconds()


@dataclass(frozen=True)
class PairedValues:
    """A finished compare study's final-phase values: method -> seed -> the dataset's primary metric."""

    study: str
    reference: str
    values: dict[str, dict[int, float]]


@dataclass(frozen=True)
class History:
    timed: tuple[TimedTrial, ...] = ()  # succeeded trials, oldest first
    paired: tuple[PairedValues, ...] = ()  # succeeded compare studies, newest first

    @property
    def timed_studies(self) -> list[str]:
        """The studies whose trials were timed, newest first."""
        seen: dict[str, None] = {}
        for trial in reversed(self.timed):
            seen.setdefault(trial.study)
        return list(seen)


def study_label(name: str, study_id: str) -> str:
    return f"{name} ({study_id})"


def _same_model(stored: dict[str, Any], spec: StudySpec) -> bool:
    return stored.get("model") == spec.model.model_dump(mode="json")


def _reference(stored: dict[str, Any]) -> str:
    methods = list(stored.get("methods") or [])
    if stored.get("reference_method"):
        return str(stored["reference_method"])
    return "frozen_ln" if "frozen_ln" in methods else (methods[0] if methods else "")


def _epochs(metrics: dict[str, Any], config: dict[str, Any]) -> float | None:
    # The last epoch it reported (an ASHA-stopped trial trained fewer than the budget), else the budget.
    for value in (metrics.get("epoch"), config.get("epochs")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1:
            return float(value)
    return None


def read_history(session: Session, spec: StudySpec) -> History:
    """Earlier studies of `spec`'s dataset with the same model (preset and overrides), the newest
    MAX_STUDIES: their succeeded trials' times, and the paired final values of those that succeeded."""
    rows = session.execute(
        select(Study.id, Study.name, Study.kind, Study.status, Study.spec)
        .where(Study.dataset == spec.dataset)
        .order_by(Study.created_at.desc(), Study.id)
        .limit(_CANDIDATES)
    ).all()
    studies = [row for row in rows if _same_model(row.spec or {}, spec)][:MAX_STUDIES]
    if not studies:
        return History()
    labels = {row.id: study_label(row.name, row.id) for row in studies}
    trials = session.execute(
        select(
            Trial.study_id,
            Trial.method,
            Trial.phase,
            Trial.seed,
            Trial.metric_value,
            Trial.metrics,
            Trial.config,
            Trial.created_at,
            Trial.updated_at,
        )
        .where(Trial.study_id.in_(list(labels)), Trial.status == TrialStatus.SUCCEEDED.value)
        .order_by(Trial.created_at, Trial.id)
    ).all()
    timed = []
    finals: dict[str, dict[str, dict[int, float]]] = {}
    for trial in trials:
        epochs = _epochs(trial.metrics or {}, trial.config or {})
        if epochs is not None and trial.updated_at > trial.created_at:
            timed.append(
                TimedTrial(
                    labels[trial.study_id],
                    trial.method,
                    trial.phase,
                    trial.created_at,
                    trial.updated_at,
                    epochs,
                )
            )
        value = trial.metric_value
        if (
            trial.phase == Phase.FINAL.value
            and trial.seed is not None
            and value is not None
            and math.isfinite(value)
        ):
            finals.setdefault(trial.study_id, {}).setdefault(trial.method, {})[int(trial.seed)] = float(value)
    paired = tuple(
        PairedValues(labels[row.id], _reference(row.spec), finals[row.id])
        for row in studies
        if row.status == StudyStatus.SUCCEEDED.value and row.kind == "compare" and row.id in finals
    )
    return History(tuple(timed), paired)


def without_study(history: History, study_id: str) -> History:
    """`history` less one study's trials and values: the plan a study had before it ran, priced from the
    others (its own trials would predict it perfectly)."""
    mine = f"({study_id})"
    return History(
        timed=tuple(t for t in history.timed if not t.study.endswith(mine)),
        paired=tuple(p for p in history.paired if not p.study.endswith(mine)),
    )
