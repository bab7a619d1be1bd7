"""Immutable value objects handed out by the store (never ORM rows, which die with their session)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from service.store.tables import Study, Trial

__all__ = ["StudyProgress", "StudyView", "TrialView"]


@dataclass(frozen=True)
class StudyProgress:
    planned: int  # trials the spec plans, all phases
    running: int
    succeeded: int
    failed: int
    cancelled: int

    @property
    def done(self) -> int:
        """Trials that finished, whatever the outcome."""
        return self.succeeded + self.failed + self.cancelled

    @property
    def fraction(self) -> float:
        return 1.0 if self.planned == 0 else min(1.0, self.done / self.planned)


@dataclass(frozen=True)
class StudyView:
    id: str
    name: str
    dataset: str
    kind: str
    status: str
    spec: dict[str, Any]
    error: str | None
    planned_trials: int
    ray_job_id: str | None
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: StudyProgress

    @classmethod
    def from_row(cls, row: Study, progress: StudyProgress) -> StudyView:
        return cls(
            id=row.id,
            name=row.name,
            dataset=row.dataset,
            kind=row.kind,
            status=row.status,
            spec=copy.deepcopy(row.spec),
            error=row.error,
            planned_trials=row.planned_trials,
            ray_job_id=row.ray_job_id,
            mlflow_experiment_id=row.mlflow_experiment_id,
            mlflow_parent_run_id=row.mlflow_parent_run_id,
            created_at=_aware(row.created_at),
            updated_at=_aware(row.updated_at),
            started_at=_aware(row.started_at),
            finished_at=_aware(row.finished_at),
            progress=progress,
        )


@dataclass(frozen=True)
class TrialView:
    id: int
    study_id: str
    trial_key: str
    phase: str
    method: str
    group: str | None
    config: dict[str, Any]
    seed: int | None
    status: str
    metrics: dict[str, Any]
    metric_value: float | None
    mlflow_run_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Trial) -> TrialView:
        return cls(
            id=row.id,
            study_id=row.study_id,
            trial_key=row.trial_key,
            phase=row.phase,
            method=row.method,
            group=row.group_label,
            config=copy.deepcopy(row.config),
            seed=row.seed,
            status=row.status,
            metrics=copy.deepcopy(row.metrics),
            metric_value=row.metric_value,
            mlflow_run_id=row.mlflow_run_id,
            error=row.error,
            created_at=_aware(row.created_at),
            updated_at=_aware(row.updated_at),
        )


def _aware(moment: datetime | None) -> datetime | None:
    # SQLite drops the offset; every timestamp the store writes is UTC.
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)
