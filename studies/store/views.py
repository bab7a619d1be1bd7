"""Immutable value objects handed out by the store (never ORM rows, which die with their session)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, overload

from studies.store.tables import Study, StudyAttempt, StudySubmitFailure, Trial

__all__ = ["AttemptView", "DeletedStudy", "StudyProgress", "StudyView", "SubmitFailureView", "TrialView"]


@dataclass(frozen=True)
class StudyProgress:
    planned: int  # trials the spec plans, all phases
    running: int
    succeeded: int
    failed: int
    cancelled: int  # lost trials left out
    # Trials cancelled with a dead driver that no later attempt resumed under their key: their work runs
    # again (a tuning trial that missed Tune's last snapshot, as a new trial), so they are not done.
    lost: int = 0

    @property
    def done(self) -> int:
        """Trials that finished, whatever the outcome; never more than planned (a guard: lost trials, the
        one known way to record a planned trial twice, are already left out). It never falls while a study
        runs or resumes: a resumed experiment that starts an ended trial again leaves its stored outcome
        until it ends again (studies.store.record_trial)."""
        return min(self.planned, self.succeeded + self.failed + self.cancelled)

    @property
    def fraction(self) -> float:
        return 1.0 if self.planned == 0 else min(1.0, self.done / self.planned)


@dataclass(frozen=True)
class AttemptView:
    """One submission of the study's driver: its Ray job, and why that driver died (None: it did not)."""

    number: int
    ray_job_id: str
    submitted_at: datetime
    ended_at: datetime | None
    death_reason: str | None
    interrupted: bool

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @classmethod
    def from_row(cls, row: StudyAttempt) -> AttemptView:
        return cls(
            number=row.number,
            ray_job_id=row.ray_job_id,
            submitted_at=_aware(row.submitted_at),
            ended_at=_aware(row.ended_at),
            death_reason=row.death_reason,
            interrupted=bool(row.interrupted),
        )


@dataclass(frozen=True)
class SubmitFailureView:
    """A submission of the study's driver (its attempt `attempt`) that the cluster refused or did not answer."""

    number: int
    attempt: int
    failed_at: datetime
    error: str  # the cluster's words
    retry_at: datetime | None  # when the reconcile loop tries again; None: it gave up (the study failed)

    @classmethod
    def from_row(cls, row: StudySubmitFailure) -> SubmitFailureView:
        return cls(
            number=row.number,
            attempt=row.attempt,
            failed_at=_aware(row.failed_at),
            error=row.error,
            retry_at=_aware(row.retry_at),
        )


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
    attempts: tuple[AttemptView, ...] = ()  # oldest first; the last one is the current driver
    mlflow_closed_at: datetime | None = None
    submit_failures: tuple[SubmitFailureView, ...] = ()  # oldest first
    tags: tuple[str, ...] = ()  # in alphabetical order (studies.store._tags)

    @property
    def current_attempt(self) -> AttemptView | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def seconds_left(self) -> float | None:
        """Time to the study's end at the pace so far: the time since it started per finished trial, times
        the trials still to finish. None before a trial finished and once the study ended. Rough by design:
        tuning trials that ASHA stops early run faster than final ones."""
        return self.seconds_left_at(datetime.now(timezone.utc))

    def seconds_left_at(self, now: datetime) -> float | None:
        progress = self.progress
        if self.status != "running" or self.started_at is None or progress.done == 0:
            return None
        remaining = progress.planned - progress.done
        elapsed = max(0.0, (now - self.started_at).total_seconds())
        return elapsed / progress.done * remaining if remaining > 0 else None

    @property
    def unsubmitted_failures(self) -> tuple[SubmitFailureView, ...]:
        """The failed submissions of a driver attempt that is not running yet (none once it was submitted):
        what keeps the study waiting now."""
        submitted = {attempt.number for attempt in self.attempts}
        pending = [f for f in self.submit_failures if f.attempt not in submitted]
        if not pending:
            return ()
        latest = pending[-1].attempt
        return tuple(f for f in pending if f.attempt == latest)

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
            attempts=tuple(AttemptView.from_row(a) for a in row.attempts),
            mlflow_closed_at=_aware(row.mlflow_closed_at),
            submit_failures=tuple(SubmitFailureView.from_row(f) for f in row.submit_failures),
            tags=tuple(t.tag for t in row.tags),
        )


@dataclass(frozen=True)
class DeletedStudy:
    """What a deletion removed: the study as it was, and how many rows went from each table."""

    id: str
    name: str
    dataset: str
    status: str  # the ended status it had
    mlflow_experiment_id: str | None
    mlflow_parent_run_id: str | None  # the parent run to mark deleted (its runs stay in MLflow)
    rows: dict[str, int]  # table -> rows deleted, `studies` (1) included


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


@overload
def _aware(moment: datetime) -> datetime: ...
@overload
def _aware(moment: datetime | None) -> datetime | None: ...
def _aware(moment: datetime | None) -> datetime | None:
    # SQLite drops the offset; every timestamp the store writes is UTC.
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)
