"""Cancelling a study: a queued one at once, a running one after its cluster job was stopped.

No request handling here: the route maps the result to its response model, and service.api.errors maps the
errors raised here to HTTP (ClusterUnavailableError is a 503, InvalidStatusTransitionError a 409).
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from service.api.errors import ClusterUnavailableError
from service.orchestration.ports import Dispatcher, DispatchError, JobNotFoundError
from studies.store import StudyStatus, StudyView, get_study, session_scope, set_study_status

__all__ = ["cancel_study"]

_CANCEL_ATTEMPTS = 3  # a study starts at most once, so the second pass settles a cancel; one spare


def cancel_study(engine: Engine, dispatcher: Dispatcher | None, study_id: str) -> StudyView:
    """Cancel `study_id` and return it. A running study's job is stopped first: the study is marked
    cancelled only once the cluster took the stop (or has no such job), so an unreachable cluster leaves
    it running (ClusterUnavailableError). A finished study raises InvalidStatusTransitionError; a
    cancelled one is returned as it is.

    The cluster call runs outside every transaction: a slow or hanging job server must not hold the
    database lock (SQLite) or the study's row (PostgreSQL) that the drivers need to record trials.
    """
    stopped: set[str] = set()
    with session_scope(engine, readonly=True) as session:
        study = get_study(session, study_id=study_id)
    for _ in range(_CANCEL_ATTEMPTS):
        job = _job_to_stop(study)
        if job is not None and job not in stopped:
            _stop_job(dispatcher, job)
            stopped.add(job)
        with session_scope(engine) as session:
            # Re-read under the lock: the background loop may have started the study (new job) since the
            # read above; that job is stopped first, on the next pass.
            study = get_study(session, study_id=study_id, lock=True)
            job = _job_to_stop(study)
            if job is None or job in stopped:
                return set_study_status(session, study_id=study_id, status=StudyStatus.CANCELLED)
    raise ClusterUnavailableError(
        f"study {study_id} kept starting new Ray jobs while being cancelled; it is still running, try again"
    )


def _job_to_stop(study: StudyView) -> str | None:
    return study.ray_job_id if study.status == StudyStatus.RUNNING else None


def _stop_job(dispatcher: Dispatcher | None, job_id: str) -> None:
    if dispatcher is None:
        raise ClusterUnavailableError("this API has no dispatcher configured, so it cannot stop Ray jobs")
    try:
        dispatcher.cancel(job_id)  # returns for a job the cluster no longer has: nothing of it runs
    except JobNotFoundError:
        return  # the same answer, raised: nothing of the job runs, so it is stopped
    except DispatchError as exc:  # ClusterUnreachableError among them: the job may still run
        raise ClusterUnavailableError(
            f"could not stop Ray job {job_id} ({type(exc).__name__}: {exc}); "
            "the study is still running, try again"
        ) from exc
