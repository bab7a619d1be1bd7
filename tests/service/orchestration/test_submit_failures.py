"""A driver submission the cluster refuses or does not answer is never silent: it is recorded on the study in
Ray's words, tried again with a backoff that doubles per failure, and after NORMLAB_MAX_SUBMIT_FAILURES the
study fails with Ray's last words (service.orchestration.reconcile)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from service.orchestration.dispatcher import (
    ClusterUnreachableError,
    DispatchError,
    JobState,
    submission_id_for,
)
from service.orchestration.reconcile import StudyReconciler, submit_backoff_s
from service.settings import Settings
from studies.store import get_study, session_scope, set_study_status
from tests.factories import add_study, digits_spec
from tests.service.orchestration.test_reconcile import FakeDispatcher, FakeRuns

NO_AGENT = (
    "Ray refused the job for study s: the Ray job server did not answer (RuntimeError: Request failed with "
    "status code 500: No available agent to submit job, please try again later..)"
)
# How Ray's job server answers a submission its agent failed on: its own traceback in a 500's body.
RAY_TRACEBACK = (
    "Ray refused the job for study s: Request failed with status code 500: Traceback (most recent call last):\n"
    '  File "job_head.py", line 419, in submit_job\n'
    "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
    "RuntimeError: Request failed with status code 400: runtime_env: pip is not allowed here.\n"
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class RefusingDispatcher(FakeDispatcher):
    """Ray's job server refusing every submission with `error` until `error` is None."""

    def __init__(self, error: Exception | None) -> None:
        super().__init__()
        self.error = error
        self.tries: list[tuple[str, int]] = []

    def submit(self, study_id: str, spec=None, *, attempt: int = 1) -> str:
        self.tries.append((study_id, attempt))
        if self.error is not None:
            raise self.error
        return super().submit(study_id, spec, attempt=attempt)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reconciler_for(engine, tmp_path, clock):
    def build(dispatcher, **settings) -> StudyReconciler:
        settings = {
            "submit_backoff_s": 5.0,
            "submit_backoff_max_s": 60.0,
            "max_submit_failures": 4,
            **settings,
        }
        return StudyReconciler(
            engine,
            dispatcher,
            settings=Settings(
                _env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://127.0.0.1:9", **settings
            ),
            runs=FakeRuns(),
            clock=clock,
        )

    return build


def _new_study(engine, name="s") -> str:
    return add_study(engine, digits_spec(name=name, num_samples=1)).id


def _study(engine, study_id):
    with session_scope(engine, readonly=True) as session:
        return get_study(session, study_id=study_id)


def test_the_backoff_doubles_per_failure_up_to_its_cap():
    waits = [submit_backoff_s(n, first_s=5, max_s=60) for n in range(1, 7)]
    assert waits == [5, 10, 20, 40, 60, 60]


def test_a_refused_submission_is_recorded_in_rays_words_and_the_study_stays_queued(
    engine, reconciler_for, clock
):
    study_id = _new_study(engine)
    reconciler_for(RefusingDispatcher(ClusterUnreachableError(NO_AGENT))).tick()
    study = _study(engine, study_id)
    assert study.status == "queued" and study.attempts == () and study.error is None
    [failure] = study.submit_failures
    assert (failure.number, failure.attempt, failure.error) == (1, 1, NO_AGENT)
    assert failure.failed_at is not None and failure.retry_at == clock.now + timedelta(seconds=5)
    assert study.unsubmitted_failures == (failure,)


def test_a_refused_submission_is_tried_again_only_once_its_backoff_is_over(engine, reconciler_for, clock):
    study_id = _new_study(engine)
    dispatcher = RefusingDispatcher(DispatchError("job server restarting"))
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    clock.advance(4.9)
    reconciler.tick()  # still backing off: Ray is not asked
    assert len(dispatcher.tries) == 1
    clock.advance(0.1)
    reconciler.tick()
    assert len(dispatcher.tries) == 2
    retries = [f.retry_at - f.failed_at for f in _study(engine, study_id).submit_failures]
    assert len(retries) == 2 and retries[1] > retries[0]  # 10 s after the second failure


def test_a_submission_that_goes_through_after_failures_runs_the_study_and_keeps_the_failures(
    engine, reconciler_for, clock
):
    study_id = _new_study(engine)
    dispatcher = RefusingDispatcher(DispatchError("job server restarting"))
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    dispatcher.error = None
    clock.advance(5)
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "running" and study.ray_job_id == submission_id_for(study_id, 1)
    assert [f.attempt for f in study.submit_failures] == [1]  # the history stays
    assert study.unsubmitted_failures == ()  # nothing keeps it waiting any more


def test_after_its_last_allowed_failure_the_study_fails_with_rays_words(engine, reconciler_for, clock):
    study_id = _new_study(engine)
    dispatcher = RefusingDispatcher(ClusterUnreachableError(NO_AGENT))
    reconciler = reconciler_for(dispatcher, max_submit_failures=3)
    for _ in range(5):
        reconciler.tick()
        clock.advance(3600)
    study = _study(engine, study_id)
    assert len(dispatcher.tries) == 3  # never asked again once it gave up
    assert study.status == "failed" and study.finished_at is not None
    assert study.error == (
        "Ray did not take the study's driver (attempt 1): 3 submissions failed (NORMLAB_MAX_SUBMIT_FAILURES=3); "
        f"the last one: {NO_AGENT}"
    )
    assert [f.retry_at is None for f in study.submit_failures] == [False, False, True]


def test_rays_traceback_is_kept_as_its_last_line(engine, reconciler_for):
    study_id = _new_study(engine)
    reconciler_for(RefusingDispatcher(DispatchError(RAY_TRACEBACK))).tick()
    [failure] = _study(engine, study_id).submit_failures
    assert failure.error == (
        "Ray refused the job for study s: Request failed with status code 500: RuntimeError: Request failed "
        "with status code 400: runtime_env: pip is not allowed here."
    )


def test_the_queue_waits_behind_its_oldest_study_while_it_backs_off(engine, reconciler_for, clock):
    first, second = _new_study(engine, "first"), _new_study(engine, "second")
    dispatcher = RefusingDispatcher(DispatchError("refused"))
    reconciler = reconciler_for(dispatcher, max_running_studies=2)
    reconciler.tick()
    reconciler.tick()
    assert dispatcher.tries == [(first, 1)]  # studies start in submission order
    with session_scope(engine) as session:
        set_study_status(session, study_id=first, status="cancelled")
    dispatcher.error = None
    reconciler.tick()
    assert _study(engine, second).status == "running"


def test_a_next_driver_that_is_not_taken_is_retried_and_then_fails_the_running_study(
    engine, reconciler_for, clock
):
    study_id = _new_study(engine)
    dispatcher = RefusingDispatcher(None)
    reconciler = reconciler_for(dispatcher, max_submit_failures=2, max_study_attempts=3)
    reconciler.tick()
    dispatcher.states[submission_id_for(study_id, 1)] = JobState.FAILED  # the driver died
    dispatcher.error = ClusterUnreachableError(NO_AGENT)
    reconciler.tick()  # the driver died: its death is recorded, attempt 2 is not taken
    study = _study(engine, study_id)
    assert study.status == "running" and study.attempts[0].ended_at is not None
    assert [(f.attempt, f.error) for f in study.unsubmitted_failures] == [(2, NO_AGENT)]
    reconciler.tick()  # backing off: not asked
    assert dispatcher.tries.count((study_id, 2)) == 1
    clock.advance(5)
    reconciler.tick()
    study = _study(engine, study_id)
    assert dispatcher.tries.count((study_id, 2)) == 2
    assert study.status == "failed" and "(attempt 2): 2 submissions failed" in str(study.error)


def test_a_submission_that_fails_as_the_stack_stops_is_not_held_against_the_study(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = RefusingDispatcher(ClusterUnreachableError("connection refused"))
    reconciler = reconciler_for(dispatcher)
    original = dispatcher.submit

    def stop_then_fail(study_id, spec=None, *, attempt=1):
        reconciler.stop(wait_s=0)
        return original(study_id, spec, attempt=attempt)

    dispatcher.submit = stop_then_fail  # type: ignore[method-assign]
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "queued" and study.submit_failures == ()
