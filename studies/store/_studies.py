"""Study records: create, read, list, and the ONE function that changes a study's status."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from sqlalchemy import case, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from studies.spec import StudySpec
from studies.store._search import study_filters
from studies.store._trial_plans import record_spec_fields, spec_fields_set
from studies.store.errors import IdempotencyKeyReusedError, InvalidStatusTransitionError, StudyNotFoundError
from studies.store.status import (
    ALLOWED_TRANSITIONS,
    DRIVER_DIED,
    TERMINAL_STATUSES,
    StudyStatus,
    TrialStatus,
    outcome_of_running_trials,
)
from studies.store.tables import Study, Trial, utcnow
from studies.store.views import StudyProgress, StudyView

__all__ = [
    "create_study",
    "create_study_once",
    "get_study",
    "list_studies",
    "list_studies_with_open_mlflow_runs",
    "mark_mlflow_closed",
    "set_study_runtime",
    "set_study_status",
    "study_progress",
]


def create_study(
    session: Session, *, spec: StudySpec | Mapping[str, Any], idempotency_key: str | None = None
) -> StudyView:
    """Store a validated spec as a new QUEUED study (the background loop picks it up), with the spec fields
    its submitter wrote (studies.store._trial_plans: the stored spec has every default filled in)."""
    if not isinstance(spec, StudySpec):
        spec = StudySpec.model_validate(spec)
    now = utcnow()
    row = Study(
        id=uuid.uuid4().hex,
        name=spec.name,
        dataset=spec.dataset,
        kind=spec.kind,
        spec=spec.model_dump(mode="json"),
        status=StudyStatus.QUEUED.value,
        planned_trials=spec.planned_trials(),
        idempotency_key=idempotency_key,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    record_spec_fields(session, study_id=row.id, fields=spec_fields_set(spec))
    session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def create_study_once(
    session: Session, *, spec: StudySpec | Mapping[str, Any], idempotency_key: str
) -> tuple[StudyView, bool]:
    """The study stored under `idempotency_key`, created now if there is none: (study, created).

    The same key with another spec raises IdempotencyKeyReusedError. Specs compare as validated (defaults
    filled in), so the JSON and the YAML form of one spec are the same submission.
    """
    if not isinstance(spec, StudySpec):
        spec = StudySpec.model_validate(spec)
    existing = _study_with_key(session, spec, idempotency_key)
    if existing is not None:
        return existing, False
    try:
        # A savepoint: on PostgreSQL a concurrent request with the same key may commit first, and then
        # this insert fails on the unique index while the transaction stays usable for the lookup below.
        # (SQLite never gets here twice: BEGIN IMMEDIATE already serialised the two transactions.)
        with session.begin_nested():
            return create_study(session, spec=spec, idempotency_key=idempotency_key), True
    except IntegrityError:
        existing = _study_with_key(session, spec, idempotency_key)
        if existing is None:
            raise
        return existing, False


def _study_with_key(session: Session, spec: StudySpec, idempotency_key: str) -> StudyView | None:
    row = session.scalars(select(Study).where(Study.idempotency_key == idempotency_key)).one_or_none()
    if row is None:
        return None
    if row.spec != spec.model_dump(mode="json"):
        raise IdempotencyKeyReusedError(idempotency_key, row.id)
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def get_study(session: Session, *, study_id: str, lock: bool = False) -> StudyView:
    """One study with its progress; `lock=True` holds its row until the transaction ends (PostgreSQL)."""
    row = _get_row(session, study_id, for_update=lock)
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def list_studies(
    session: Session,
    *,
    status: StudyStatus | str | None = None,
    dataset: str | None = None,
    q: str | None = None,
    method: str | None = None,
    tags: Sequence[str] = (),
    order: Literal["newest", "oldest"] = "newest",
    limit: int | None = None,
) -> list[StudyView]:
    """Studies matching every filter given; `order="oldest"` gives a queue (first submitted first).

    `q`: text in the name or description, any case; `method`: one of the spec's methods; `tags`: tags the
    study carries, all of them (studies.store._search).
    """
    query = select(Study)
    if status is not None:
        query = query.where(Study.status == StudyStatus(status).value)
    if dataset is not None:
        query = query.where(Study.dataset == dataset)
    query = query.where(*study_filters(session.get_bind().dialect.name, q=q, method=method, tags=tags))
    newest = order == "newest"
    query = query.order_by(Study.created_at.desc() if newest else Study.created_at.asc(), Study.id)
    if limit is not None:
        query = query.limit(limit)
    rows = list(session.scalars(query))
    progress = _progress_for(session, rows)
    return [StudyView.from_row(row, progress[row.id]) for row in rows]


def list_studies_with_open_mlflow_runs(session: Session, *, limit: int) -> list[StudyView]:
    """Ended studies whose MLflow runs the reconcile loop has not yet closed, the longest ended first."""
    rows = list(
        session.scalars(
            select(Study)
            .where(Study.status.in_([s.value for s in TERMINAL_STATUSES]), Study.mlflow_closed_at.is_(None))
            .order_by(Study.updated_at.asc(), Study.id)
            .limit(limit)
        )
    )
    progress = _progress_for(session, rows)
    return [StudyView.from_row(row, progress[row.id]) for row in rows]


def mark_mlflow_closed(session: Session, *, study_id: str) -> None:
    """Record that no MLflow run of this ended study is left RUNNING (see service.orchestration.study_runs)."""
    row = _get_row(session, study_id, for_update=True)
    if StudyStatus(row.status) not in TERMINAL_STATUSES:
        raise ValueError(f"study '{study_id}' is {row.status}: only an ended study's runs are closed")
    row.mlflow_closed_at = utcnow()
    session.flush()


def set_study_status(
    session: Session, *, study_id: str, status: StudyStatus | str, error: str | None = None
) -> StudyView:
    """Move a study to `status`: the only place a study's status changes.

    queued -> running | cancelled | failed; running -> succeeded | failed | cancelled; finished states are
    final. Asking for the current status is a no-op (so retries are idempotent); any other move raises
    InvalidStatusTransitionError. `error` is kept with the status change (the reason a study failed).

    A study that stops (cancelled or failed) closes its still-running trials in the same transaction:
    nothing else would, because its driver is gone. Cancelled trials keep their error; failed ones get
    "study failed: <first line of the study's error>". A succeeded study's trials are left as recorded
    (record_trial keeps the rule for trials a dying driver records afterwards).
    """
    target = StudyStatus(status)
    row = _get_row(session, study_id, for_update=True)
    current = StudyStatus(row.status)
    if target != current:
        if target not in ALLOWED_TRANSITIONS[current]:
            raise InvalidStatusTransitionError(study_id, current.value, target.value)
        now = utcnow()
        row.status = target.value
        row.updated_at = now
        if error is not None:
            row.error = error
        if target == StudyStatus.RUNNING:
            row.started_at = now
        if target in TERMINAL_STATUSES:
            row.finished_at = now
            latest = row.attempts[-1] if row.attempts else None
            if latest is not None and latest.ended_at is None:
                latest.ended_at = now  # the attempt ended with its study (no death_reason: it did not die)
        session.flush()
    # Also on a repeated request: a retried cancel closes trials an older version left running.
    outcome = outcome_of_running_trials(target, row.error)
    if outcome is not None:
        _close_running_trials(session, study_id, *outcome)
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def _close_running_trials(session: Session, study_id: str, status: TrialStatus, error: str | None) -> None:
    values: dict[str, Any] = {"status": status.value, "updated_at": utcnow()}
    if error is not None:
        values["error"] = error
    session.execute(
        update(Trial)
        .where(Trial.study_id == study_id, Trial.status == TrialStatus.RUNNING.value)
        .values(**values)
    )


def set_study_runtime(
    session: Session,
    *,
    study_id: str,
    ray_job_id: str | None = None,
    mlflow_experiment_id: str | None = None,
    mlflow_parent_run_id: str | None = None,
) -> StudyView:
    """Record where a study runs (Ray job) and logs (MLflow); None leaves a field as it is."""
    row = _get_row(session, study_id, for_update=True)
    updates = {
        "ray_job_id": ray_job_id,
        "mlflow_experiment_id": mlflow_experiment_id,
        "mlflow_parent_run_id": mlflow_parent_run_id,
    }
    for field, value in updates.items():
        if value is not None:
            setattr(row, field, value)
    row.updated_at = utcnow()
    session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def study_progress(session: Session, *, study_id: str) -> StudyProgress:
    """Trials finished (by outcome) and running, against the trials the spec plans."""
    row = _get_row(session, study_id)
    return _progress_for(session, [row])[row.id]


def _get_row(session: Session, study_id: str, *, for_update: bool = False) -> Study:
    query = select(Study).where(Study.id == study_id)
    if for_update:
        query = query.with_for_update()  # PostgreSQL row lock; SQLite already holds BEGIN IMMEDIATE
    row = session.scalars(query).one_or_none()
    if row is None:
        raise StudyNotFoundError(study_id)
    return row


_LOST = "lost"  # the progress bucket of trials lost with a dead driver (not a trial status)


def _progress_for(session: Session, rows: list[Study]) -> dict[str, StudyProgress]:
    counts: dict[str, dict[str, int]] = {row.id: {} for row in rows}
    if rows:
        # A lost trial's row keeps the error its driver's death gave it (driver_died_error); a resumed one
        # was recorded again since, without it.
        bucket = case(
            (
                (Trial.status == TrialStatus.CANCELLED.value)
                & Trial.error.startswith(DRIVER_DIED, autoescape=True),
                _LOST,
            ),
            else_=Trial.status,
        )
        # Grouped through a subquery: PostgreSQL would not match the CASE of GROUP BY to the selected one
        # (each copy has bind parameters of its own).
        trials = (
            select(Trial.study_id, bucket.label("bucket")).where(Trial.study_id.in_(list(counts))).subquery()
        )
        query = select(trials.c.study_id, trials.c.bucket, func.count()).group_by(
            trials.c.study_id, trials.c.bucket
        )
        for study_id, status, n in session.execute(query):
            counts[study_id][status] = n
    return {
        row.id: StudyProgress(
            planned=row.planned_trials,
            running=counts[row.id].get(TrialStatus.RUNNING.value, 0),
            succeeded=counts[row.id].get(TrialStatus.SUCCEEDED.value, 0),
            failed=counts[row.id].get(TrialStatus.FAILED.value, 0),
            cancelled=counts[row.id].get(TrialStatus.CANCELLED.value, 0),
            lost=counts[row.id].get(_LOST, 0),
        )
        for row in rows
    }
