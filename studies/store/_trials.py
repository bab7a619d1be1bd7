"""Trial records: the driver upserts each trial by its trial_key, so re-recording it is harmless."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import case, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult

from studies.numbers import json_safe
from studies.store.errors import InvalidTrialError, StudyNotFoundError, TrialKeyConflictError
from studies.store.status import Phase, TrialStatus, outcome_of_running_trials
from studies.store.tables import Study, Trial, utcnow
from studies.store.views import TrialView

__all__ = ["list_trials", "record_trial"]


def record_trial(
    session: Session,
    *,
    study_id: str,
    trial_key: str,
    phase: Phase | str,
    method: str,
    config: Mapping[str, Any],
    seed: int | None,
    status: TrialStatus | str,
    metrics: Mapping[str, Any],
    metric_value: float | None,
    mlflow_run_id: str | None,
    error: str | None = None,
    group: str | None = None,
) -> TrialView:
    """Insert or update the trial named `trial_key` (last write wins; created_at is kept, and so is a
    recorded `mlflow_run_id` that this write does not know, and the outcome of an ended trial that a
    resumed experiment starts again, until it ends again).

    Non-finite floats (a diverged loss) are stored as null: JSON has no NaN and PostgreSQL refuses it.
    A trial recorded as running for a cancelled or failed study is stored as ended with its study
    (see `outcome_of_running_trials`), so a stopped study never shows running trials.
    """
    phase_value = _domain(Phase, phase, "phase")
    status_value = _domain(TrialStatus, status, "status")
    # FOR SHARE (PostgreSQL): a concurrent set_study_status waits for this write, or this write sees
    # its outcome; SQLite serialises writers with BEGIN IMMEDIATE already.
    study = session.scalars(
        select(Study).where(Study.id == study_id).with_for_update(read=True)
    ).one_or_none()
    if study is None:
        raise StudyNotFoundError(study_id)
    closing = outcome_of_running_trials(study.status, study.error)
    if status_value == TrialStatus.RUNNING.value and closing is not None:
        # A cancelled or failed study's driver may still report a trial start while it is being
        # stopped; the trial ends with its study instead of staying running forever.
        status_value = closing[0].value
        error = closing[1] if closing[1] is not None else error
    now = utcnow()
    values = {
        "study_id": study_id,
        "trial_key": trial_key,
        "phase": phase_value,
        "method": method,
        "group_label": group,
        "config": json_safe(dict(config)),
        "seed": seed,
        "status": status_value,
        "metrics": json_safe(dict(metrics)),
        "metric_value": json_safe(metric_value),
        "mlflow_run_id": mlflow_run_id,
        "error": error,
        "created_at": now,
        "updated_at": now,
    }
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(Trial).values(**values)
    updated: dict[str, Any] = {
        k: statement.excluded[k] for k in values if k not in ("trial_key", "study_id", "created_at")
    }
    # None means "run not known here" (MLflow did not answer, or the trial just started): a known id stays.
    updated["mlflow_run_id"] = func.coalesce(statement.excluded.mlflow_run_id, Trial.mlflow_run_id)
    # A resumed experiment starts again a trial that had ended: one whose end its last snapshot missed, or
    # one that failed (Tune resumes errored trials). Its row keeps that outcome until the trial ends again,
    # so a resume never takes a finished trial back out of the study's progress; the next end replaces it.
    reopened = (statement.excluded.status == TrialStatus.RUNNING.value) & Trial.status.in_(
        [TrialStatus.SUCCEEDED.value, TrialStatus.FAILED.value]
    )
    for column in ("status", "metrics", "metric_value", "error"):
        updated[column] = case((reopened, getattr(Trial, column)), else_=statement.excluded[column])
    statement = statement.on_conflict_do_update(
        index_elements=[Trial.trial_key],
        set_=updated,
        # A key owned by another study is left alone (and reported below), never silently moved.
        where=Trial.study_id == statement.excluded.study_id,
    )
    session.execute(statement)
    row = session.scalars(
        select(Trial).where(Trial.trial_key == trial_key).execution_options(populate_existing=True)
    ).one()
    if row.study_id != study_id:
        raise TrialKeyConflictError(trial_key, row.study_id, study_id)
    return TrialView.from_row(row)


def list_trials(
    session: Session,
    *,
    study_id: str | None = None,
    dataset: str | None = None,
    phase: Phase | str | Sequence[Phase | str] | None = None,
    status: TrialStatus | str | Sequence[TrialStatus | str] | None = None,
) -> list[TrialView]:
    """Trials matching every given filter, oldest first; `phase` and `status` accept one value or several."""
    query = select(Trial)
    if study_id is not None:
        query = query.where(Trial.study_id == study_id)
    if dataset is not None:
        query = query.join(Study, Study.id == Trial.study_id).where(Study.dataset == dataset)
    if phase is not None:
        query = query.where(Trial.phase.in_([_domain(Phase, p, "phase") for p in _many(phase)]))
    if status is not None:
        query = query.where(Trial.status.in_([_domain(TrialStatus, s, "status") for s in _many(status)]))
    query = query.order_by(Trial.created_at, Trial.id)
    return [TrialView.from_row(row) for row in session.scalars(query)]


def _many(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def _domain(enum: type[Enum], value: Any, field: str) -> str:
    try:
        return enum(value).value
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise InvalidTrialError(f"trial {field} must be one of {allowed}, got {value!r}") from None


def fill_trial_mlflow_run(session: Session, *, study_id: str, trial_key: str, mlflow_run_id: str) -> bool:
    """Give a recorded trial the id of its MLflow run where it has none: a trial that ended while MLflow was
    down has its run only once the spool is delivered. Never replaces an id; True when one was set."""
    filled = session.execute(
        update(Trial)
        .where(Trial.study_id == study_id, Trial.trial_key == trial_key, Trial.mlflow_run_id.is_(None))
        .values(mlflow_run_id=mlflow_run_id)
    )
    return bool(cast("CursorResult[Any]", filled).rowcount)  # an UPDATE's result is a cursor result
