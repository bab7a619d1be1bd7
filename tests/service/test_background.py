"""The reconcile loop turns queued studies into Ray jobs and dead drivers into failed studies."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from service.background import StudyReconciler
from service.dispatcher import DispatchError, JobState
from service.store import (
    create_study,
    get_study,
    make_engine,
    session_scope,
    set_study_status,
    upgrade_database,
)

QUICK_SPEC = {
    "name": "reconciler",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["frozen_ln", "dyt"],
    "num_samples": 1,
    "seeds": [0, 1],
    "budget": {"epochs": 1, "batch_size": 64},
}


@dataclass
class FakeDispatcher:
    """Stands in for Ray's job server in this unit test only (the e2e tests use a real cluster)."""

    states: dict[str, JobState] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    reachable: bool = True

    def submit(self, study_id: str, spec=None) -> str:
        if not self.reachable:
            raise DispatchError("cluster down")
        job = f"job-{study_id}"
        self.submitted.append(study_id)
        self.states.setdefault(job, JobState.RUNNING)
        return job

    def state(self, job_id: str) -> JobState:
        if not self.reachable:
            raise DispatchError("cluster down")
        return self.states[job_id]

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        return "Traceback: boom"

    def cancel(self, ray_job_id: str) -> None:
        self.cancelled.append(ray_job_id)


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    return make_engine(url)


def _new_study(engine, name="s") -> str:
    with session_scope(engine) as session:
        return create_study(session, spec={**QUICK_SPEC, "name": name}).id


def _status(engine, study_id):
    with session_scope(engine) as session:
        return get_study(session, study_id=study_id)


def test_a_queued_study_is_submitted_once_and_marked_running_with_its_job_id(engine):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(engine, dispatcher, max_running=1)
    reconciler.tick()
    reconciler.tick()
    study = _status(engine, study_id)
    assert study.status == "running"
    assert study.ray_job_id == f"job-{study_id}"
    assert dispatcher.submitted == [study_id]


def test_studies_beyond_the_running_limit_wait_in_submission_order(engine):
    first, second = _new_study(engine, "first"), _new_study(engine, "second")
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(engine, dispatcher, max_running=1)
    reconciler.tick()
    assert (_status(engine, first).status, _status(engine, second).status) == ("running", "queued")
    dispatcher.states[f"job-{first}"] = JobState.SUCCEEDED
    with session_scope(engine) as session:
        set_study_status(session, study_id=first, status="succeeded")
    reconciler.tick()
    assert _status(engine, second).status == "running"


def test_an_unreachable_cluster_leaves_the_study_queued(engine):
    study_id = _new_study(engine)
    reconciler = StudyReconciler(engine, FakeDispatcher(reachable=False))
    reconciler.tick()
    assert _status(engine, study_id).status == "queued"


def test_a_driver_that_died_without_an_outcome_fails_the_study_with_its_log_tail(engine):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(engine, dispatcher)
    reconciler.tick()
    dispatcher.states[f"job-{study_id}"] = JobState.FAILED
    reconciler.tick()
    study = _status(engine, study_id)
    assert study.status == "failed"
    assert "boom" in study.error


def test_a_job_the_cluster_forgot_fails_the_study_with_a_clear_reason(engine):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(engine, dispatcher)
    reconciler.tick()
    dispatcher.states[f"job-{study_id}"] = JobState.MISSING
    reconciler.tick()
    assert "unknown to the cluster" in _status(engine, study_id).error


def test_a_study_the_driver_finished_is_left_as_the_driver_recorded_it(engine):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(engine, dispatcher)
    reconciler.tick()
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status="succeeded")
    dispatcher.states[f"job-{study_id}"] = JobState.SUCCEEDED
    reconciler.tick()
    assert _status(engine, study_id).status == "succeeded"
