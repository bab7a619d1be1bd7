"""Cancelling a study (service.orchestration.cancel.cancel_study): a running study is marked cancelled only once its job
is stopped or known to be gone; while the cluster does not answer it stays running (on SQLite and
PostgreSQL). The HTTP side of cancel is tested in tests/service/api/routes/test_studies.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from service.api.errors import ClusterUnavailableError
from service.orchestration.cancel import cancel_study
from service.orchestration.ports import ClusterUnreachableError, DispatchError, JobNotFoundError, JobState
from studies.store import (
    InvalidStatusTransitionError,
    StudyStatus,
    get_study,
    session_scope,
    set_study_status,
)
from tests.factories import add_study


@dataclass
class FakeDispatcher:
    """Stands in for the cluster in this unit test only: `missing` jobs are unknown to it, and `error` is
    what every cancel raises."""

    missing: set[str] = field(default_factory=set)
    error: DispatchError | None = None
    cancelled: list[str] = field(default_factory=list)

    def submit(self, study_id: str, spec=None, *, attempt: int = 1) -> str:
        raise AssertionError("cancel never submits")

    def state(self, job_id: str) -> JobState:
        return JobState.MISSING if job_id in self.missing else JobState.RUNNING

    def end_reason(self, job_id: str, state: JobState) -> str:
        return ""

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        return ""

    def cancel(self, job_id: str) -> None:
        if self.error is not None:
            raise self.error
        if job_id in self.missing:
            return  # the contract: a job the cluster has no record of is stopped already
        self.cancelled.append(job_id)


def _study(engine, *, job: str | None = None) -> str:
    """A queued study, or a running one whose driver is the Ray job `job`."""
    status = None if job is None else StudyStatus.RUNNING
    return add_study(engine, ray_job_id=job, status=status).id


def _status(engine, study_id: str) -> str:
    with session_scope(engine, readonly=True) as session:
        return get_study(session, study_id=study_id).status


def test_a_queued_study_is_cancelled_without_asking_the_cluster(engine):
    dispatcher = FakeDispatcher(error=ClusterUnreachableError("down"))  # would fail if asked
    study = cancel_study(engine, dispatcher, _study(engine))
    assert study.status == StudyStatus.CANCELLED and dispatcher.cancelled == []


def test_a_running_study_is_cancelled_after_its_job_was_stopped(engine):
    dispatcher = FakeDispatcher()
    study = cancel_study(engine, dispatcher, _study(engine, job="job-1"))
    assert study.status == StudyStatus.CANCELLED and dispatcher.cancelled == ["job-1"]


def test_a_running_study_whose_job_the_cluster_no_longer_has_is_cancelled(engine):
    # Nothing of the job runs (e.g. the Ray head was replaced): there is nothing left to stop.
    dispatcher = FakeDispatcher(missing={"job-1"})
    assert cancel_study(engine, dispatcher, _study(engine, job="job-1")).status == StudyStatus.CANCELLED


def test_an_unreachable_cluster_leaves_the_study_running_and_says_which_job(engine):
    study_id = _study(engine, job="job-1")
    dispatcher = FakeDispatcher(error=ClusterUnreachableError("connection refused"))
    with pytest.raises(ClusterUnavailableError, match=r"job-1.*still running"):
        cancel_study(engine, dispatcher, study_id)
    assert _status(engine, study_id) == StudyStatus.RUNNING


def test_a_refused_stop_leaves_the_study_running_too(engine):
    study_id = _study(engine, job="job-1")
    with pytest.raises(ClusterUnavailableError):
        cancel_study(engine, FakeDispatcher(error=DispatchError("wrong token")), study_id)
    assert _status(engine, study_id) == StudyStatus.RUNNING


def test_a_job_not_found_error_counts_as_stopped_too(engine):
    # Raised instead of returned, "no such job" still means nothing of the job runs.
    dispatcher = FakeDispatcher(error=JobNotFoundError("job-1"))
    assert cancel_study(engine, dispatcher, _study(engine, job="job-1")).status == StudyStatus.CANCELLED


def test_without_a_dispatcher_a_running_study_cannot_be_cancelled(engine):
    study_id = _study(engine, job="job-1")
    with pytest.raises(ClusterUnavailableError, match="no dispatcher"):
        cancel_study(engine, None, study_id)
    assert _status(engine, study_id) == StudyStatus.RUNNING


def test_a_finished_study_is_a_conflict_and_a_cancelled_one_is_returned_as_it_is(engine):
    finished = _study(engine, job="job-1")
    with session_scope(engine) as session:
        set_study_status(session, study_id=finished, status=StudyStatus.SUCCEEDED)
    with pytest.raises(InvalidStatusTransitionError):
        cancel_study(engine, FakeDispatcher(), finished)
    cancelled = cancel_study(engine, FakeDispatcher(), _study(engine))
    again = cancel_study(engine, FakeDispatcher(), cancelled.id)
    assert again.status == StudyStatus.CANCELLED
