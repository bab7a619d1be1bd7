"""The reconcile loop while the stack stops: once told to stop it submits nothing more, takes no job that
ends then (Ray reports every job failed as it goes down) for a dead driver, and its stop does not wait
for a tick stuck on the cluster."""

from __future__ import annotations

import threading
import time

import pytest

from service.orchestration.ports import JobState
from service.orchestration.reconcile import StudyReconciler
from studies.store import StudyStatus, get_study, list_studies, make_engine, session_scope, upgrade_database
from tests.service.orchestration.test_reconcile import FakeDispatcher, FakeRuns, _new_study, _settings


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def reconciler_for(engine, tmp_path):
    def build(dispatcher: FakeDispatcher, *, max_running: int = 1) -> StudyReconciler:
        return StudyReconciler(
            engine, dispatcher, max_running=max_running, settings=_settings(tmp_path), runs=FakeRuns()
        )

    return build


def _statuses(engine) -> list[StudyStatus]:
    with session_scope(engine, readonly=True) as session:
        return sorted(study.status for study in list_studies(session))


def test_a_stop_during_a_tick_submits_no_more_queued_studies(engine, reconciler_for):
    for name in ("a", "b", "c"):
        _new_study(engine, name)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_running=3)
    dispatcher.on_submit = lambda study_id, attempt: reconciler.stop(wait_s=0)  # Ctrl-C meanwhile

    reconciler.tick()

    assert len(dispatcher.submitted) == 1  # the one submitted is recorded; the rest wait for the next start
    assert _statuses(engine) == sorted([StudyStatus.RUNNING, StudyStatus.QUEUED, StudyStatus.QUEUED])


def test_a_job_that_ends_as_the_stack_stops_is_not_taken_for_a_dead_driver(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()  # submitted, running
    job = next(iter(dispatcher.states))

    def stack_stops(job_id: str) -> None:
        reconciler.stop(wait_s=0)
        dispatcher.states[job] = JobState.FAILED  # what Ray answers once its head is going down

    dispatcher.on_state = stack_stops
    reconciler.tick()

    with session_scope(engine, readonly=True) as session:
        study = get_study(session, study_id=study_id)
    assert study.status == StudyStatus.RUNNING  # the next start finds it interrupted and resumes it
    assert [attempt.ended for attempt in study.attempts] == [False]
    assert dispatcher.submitted == [(study_id, 1)]


def test_stop_waits_at_most_its_bound_for_a_tick_stuck_on_the_cluster(engine, reconciler_for):
    _new_study(engine)
    unstuck = threading.Event()
    dispatcher = FakeDispatcher(on_submit=lambda study_id, attempt: unstuck.wait(30))  # no answer
    reconciler = reconciler_for(dispatcher)
    reconciler.start()
    try:
        time.sleep(0.3)  # the first tick is in the submission
        started = time.monotonic()
        reconciler.stop(wait_s=0.2)
        assert time.monotonic() - started < 1.0
    finally:
        unstuck.set()
