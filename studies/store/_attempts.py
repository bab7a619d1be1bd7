"""Driver attempts: every submission of a study's driver as a Ray job, why a driver died, and each
submission the cluster did not take.

A study's first driver is attempt 1; when a driver dies without recording the study's outcome, the
reconcile loop ends its attempt here (with the reason) and may submit the next one, which resumes the
study's Tune experiments from storage. A submission the cluster refuses or does not answer is kept as a
failed submission of the attempt it was to start, with the cluster's words, so that a study the cluster
does not take says so instead of waiting in silence.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from studies.store._studies import _close_running_trials, _get_row, _progress_for
from studies.store.status import TrialStatus, driver_died_error
from studies.store.tables import Study, StudyAttempt, StudySubmitFailure, utcnow
from studies.store.views import StudyView

__all__ = ["end_attempt", "record_attempt", "record_submit_failure"]


def record_attempt(session: Session, *, study_id: str, ray_job_id: str) -> StudyView:
    """The study's driver was submitted as Ray job `ray_job_id`: the next attempt, and the study's job.

    Idempotent: the job of the latest attempt is not recorded again (a retried tick submits the same
    job, since submission ids are derived from the study and the attempt number).
    """
    row = _get_row(session, study_id, for_update=True)
    latest = row.attempts[-1] if row.attempts else None
    now = utcnow()
    if latest is None or latest.ray_job_id != ray_job_id:
        row.attempts.append(
            StudyAttempt(
                study_id=study_id,
                number=latest.number + 1 if latest is not None else 1,
                ray_job_id=ray_job_id,
                submitted_at=now,
                interrupted=False,
            )
        )
    row.ray_job_id = ray_job_id
    row.updated_at = now
    session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def end_attempt(
    session: Session, *, study_id: str, death_reason: str, interrupted: bool = False
) -> StudyView:
    """The current attempt's driver died without recording the study's outcome: keep why.

    Its still-running trials end as cancelled with that reason, since no process is left to finish them;
    a next attempt that resumes one records it again (trial rows are upserts), so only trials the
    resumed experiment does not run again under their own key keep this end: lost trials (a tuning trial
    that missed Tune's last snapshot runs again as a new trial), which study progress does not count as
    done. `interrupted`: the driver was found dead when the
    service started, which does not count against the attempt limit. Ending an attempt whose death is
    already recorded changes nothing.
    """
    row = _get_row(session, study_id, for_update=True)
    attempt = _current_attempt(row)
    # An attempt that ended with its study (set_study_status) has no death reason yet: the driver death
    # found in the same step is recorded on it, keeping its end time.
    if attempt.death_reason is None:
        attempt.ended_at = attempt.ended_at or utcnow()
        attempt.death_reason = death_reason
        attempt.interrupted = interrupted
        row.updated_at = attempt.ended_at
        _close_running_trials(
            session, study_id, TrialStatus.CANCELLED, driver_died_error(attempt.number, death_reason)
        )
        session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def record_submit_failure(
    session: Session, *, study_id: str, attempt: int, error: str, retry_at: datetime | None
) -> StudyView:
    """Submitting the study's driver attempt `attempt` failed with `error` (the cluster's words): keep it,
    with when it is tried again (`retry_at`; None: it is not, the caller fails the study)."""
    if attempt < 1:
        raise ValueError(f"driver attempts are numbered from 1, got {attempt}")
    row = _get_row(session, study_id, for_update=True)
    latest = row.submit_failures[-1] if row.submit_failures else None
    now = utcnow()
    row.submit_failures.append(
        StudySubmitFailure(
            study_id=study_id,
            number=latest.number + 1 if latest is not None else 1,
            attempt=attempt,
            failed_at=now,
            error=error,
            retry_at=retry_at,
        )
    )
    row.updated_at = now
    session.flush()
    return StudyView.from_row(row, _progress_for(session, [row])[row.id])


def _current_attempt(row: Study) -> StudyAttempt:
    """The attempt of the study's current Ray job; one is recorded for a job that has none (a job set with
    set_study_runtime alone, as before attempts were recorded)."""
    latest = row.attempts[-1] if row.attempts else None
    if latest is not None and latest.ray_job_id == row.ray_job_id:
        return latest
    if row.ray_job_id is None:
        raise ValueError(f"study '{row.id}' has no Ray job, so no driver attempt to end")
    attempt = StudyAttempt(
        study_id=row.id,
        number=latest.number + 1 if latest is not None else 1,
        ray_job_id=row.ray_job_id,
        submitted_at=row.started_at or utcnow(),
        interrupted=False,
    )
    row.attempts.append(attempt)
    return attempt
