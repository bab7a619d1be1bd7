"""The reconcile loop turns queued studies into Ray jobs, resubmits drivers that died (and fails a study that
has had its attempts), resumes or cancels studies interrupted by a restart, and closes ended studies' MLflow
runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from service.orchestration.dispatcher import (
    ClusterUnreachableError,
    DispatchError,
    JobState,
    submission_id_for,
)
from service.orchestration.reconcile import StudyReconciler
from service.orchestration.study_runs import MlflowUnavailableError
from service.settings import Settings
from service.stack.processes import wait_until
from studies.store import (
    get_study,
    list_trials,
    make_engine,
    session_scope,
    set_study_runtime,
    set_study_status,
    upgrade_database,
)
from tests.factories import add_study, add_trial, digits_spec

QUICK_SPEC = digits_spec(name="reconciler", num_samples=1)


@dataclass
class FakeDispatcher:
    """Stands in for Ray's job server in this unit test only (the e2e tests use a real cluster)."""

    states: dict[str, JobState] = field(default_factory=dict)
    submitted: list[tuple[str, int]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    reachable: bool = True
    on_submit: Callable[[str, int], None] | None = None  # runs before a submission returns
    on_state: Callable[[str], None] | None = None  # runs before a job's state is read (its driver acting)

    def submit(self, study_id: str, spec=None, *, attempt: int = 1) -> str:
        if not self.reachable:
            raise ClusterUnreachableError("cluster down")
        job = submission_id_for(study_id, attempt)
        if self.on_submit is not None:
            self.on_submit(study_id, attempt)
        self.submitted.append((study_id, attempt))
        self.states.setdefault(job, JobState.RUNNING)
        return job

    def state(self, job_id: str) -> JobState:
        if not self.reachable:
            raise ClusterUnreachableError("cluster down")
        if self.on_state is not None:
            self.on_state(job_id)
        return self.states.get(job_id, JobState.MISSING)

    def end_reason(self, job_id: str, state: JobState) -> str:
        return f"Ray job {job_id} ended {state.value}: exit code -9 (killed by SIGKILL)"

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        return "Traceback: boom"

    def cancel(self, ray_job_id: str) -> None:
        self.cancelled.append(ray_job_id)
        self.states[ray_job_id] = JobState.STOPPED


@dataclass
class FakeRuns:
    """Records which studies' MLflow runs the loop closes (the real closer has its own test)."""

    closed: list[tuple[str, str, str]] = field(default_factory=list)
    available: bool = True

    def close(self, *, study_id: str, experiment_id: str, study_status: str) -> dict[str, str]:
        if not self.available:
            raise MlflowUnavailableError("no MLflow server answers")
        self.closed.append((study_id, experiment_id, study_status))
        return {}


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def _settings(tmp_path, **changes) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://127.0.0.1:9", **changes)


@pytest.fixture
def reconciler_for(engine, tmp_path):
    def build(dispatcher, runs=None, **settings) -> StudyReconciler:
        return StudyReconciler(
            engine, dispatcher, settings=_settings(tmp_path, **settings), runs=runs or FakeRuns()
        )

    return build


def _new_study(engine, name="s") -> str:
    return add_study(engine, {**QUICK_SPEC, "name": name}).id


def _study(engine, study_id):
    with session_scope(engine) as session:
        return get_study(session, study_id=study_id)


def _record(engine, study_id, key, status, phase="tune"):
    metric_value = 0.5 if status == "succeeded" else None
    add_trial(engine, study_id, f"{study_id}/{key}", phase=phase, status=status, metric_value=metric_value)


def _trial_statuses(engine, study_id) -> dict[str, tuple[str, str | None]]:
    with session_scope(engine) as session:
        return {
            t.trial_key.split("/", 1)[1]: (t.status, t.error) for t in list_trials(session, study_id=study_id)
        }


def _kill_driver(dispatcher, engine, study_id, state=JobState.FAILED) -> str:
    job = _study(engine, study_id).ray_job_id
    dispatcher.states[job] = state
    return job


# ----------------------------------------------------------------------------------------- submission


def test_a_queued_study_is_submitted_once_and_marked_running_with_its_first_attempt(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "running"
    assert study.ray_job_id == submission_id_for(study_id)
    assert [(a.number, a.ray_job_id, a.ended_at) for a in study.attempts] == [(1, study.ray_job_id, None)]
    assert dispatcher.submitted == [(study_id, 1)]


def test_studies_beyond_the_running_limit_wait_in_submission_order(engine, reconciler_for):
    first, second = _new_study(engine, "first"), _new_study(engine, "second")
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    assert (_study(engine, first).status, _study(engine, second).status) == ("running", "queued")
    dispatcher.states[submission_id_for(first)] = JobState.SUCCEEDED
    with session_scope(engine) as session:
        set_study_status(session, study_id=first, status="succeeded")
    reconciler.tick()
    assert _study(engine, second).status == "running"


def test_an_unreachable_cluster_leaves_the_study_queued_with_the_failed_submission(engine, reconciler_for):
    study_id = _new_study(engine)
    reconciler_for(FakeDispatcher(reachable=False)).tick()
    study = _study(engine, study_id)
    assert study.status == "queued"
    assert [(f.attempt, f.error) for f in study.submit_failures] == [(1, "cluster down")]


# ----------------------------------------------------------------------------------------- dead drivers


def test_a_driver_that_died_is_resubmitted_as_a_new_attempt_with_a_new_ray_job(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_study_attempts=3)
    reconciler.tick()
    first_job = _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "running"
    assert dispatcher.submitted == [(study_id, 1), (study_id, 2)]
    assert study.ray_job_id == submission_id_for(study_id, 2) != first_job
    first, second = study.attempts
    assert (first.number, first.ray_job_id, first.interrupted) == (1, first_job, False)
    assert first.ended_at is not None and "killed by SIGKILL" in first.death_reason
    assert (second.number, second.ended_at, second.death_reason) == (2, None, None)


def test_the_dead_drivers_running_trials_end_with_its_death_and_a_resumed_one_runs_again(
    engine, reconciler_for
):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    _record(engine, study_id, "done", "succeeded")
    _record(engine, study_id, "resumed", "running")
    _record(engine, study_id, "lost", "running")
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    trials = _trial_statuses(engine, study_id)
    assert trials["done"] == ("succeeded", None)
    assert trials["lost"][0] == "cancelled" and "driver died (attempt 1" in trials["lost"][1]
    _record(engine, study_id, "resumed", "running")  # the next attempt's driver restores it
    assert _trial_statuses(engine, study_id)["resumed"] == ("running", None)


def test_a_study_whose_drivers_keep_dying_fails_after_its_last_attempt_with_the_log_tail(
    engine, reconciler_for
):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_study_attempts=3)
    reconciler.tick()
    for _ in range(3):
        _kill_driver(dispatcher, engine, study_id)
        reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "failed"
    assert dispatcher.submitted == [(study_id, 1), (study_id, 2), (study_id, 3)]
    assert "boom" in study.error and "attempt 3 of at most 3" in study.error
    assert [a.number for a in study.attempts] == [1, 2, 3]
    assert all(a.death_reason and a.ended_at for a in study.attempts)


def test_with_one_attempt_a_dead_driver_fails_the_study_at_once(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_study_attempts=1)
    reconciler.tick()
    _record(engine, study_id, "cut", "running")
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "failed" and "boom" in study.error
    assert dispatcher.submitted == [(study_id, 1)]
    assert _trial_statuses(engine, study_id)["cut"][0] == "failed"


def test_a_job_the_cluster_forgot_mid_study_is_a_death_with_a_clear_reason(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_study_attempts=1)
    reconciler.tick()
    _kill_driver(dispatcher, engine, study_id, JobState.MISSING)
    reconciler.tick()
    assert "unknown to the cluster" in _study(engine, study_id).error


def test_a_study_its_driver_failed_itself_is_not_resubmitted(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, max_study_attempts=3)
    reconciler.tick()
    with session_scope(engine) as session:  # what run_study records for a broken study
        set_study_status(session, study_id=study_id, status="failed", error="Traceback: bad spec")
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    study = _study(engine, study_id)
    assert (study.status, study.error) == ("failed", "Traceback: bad spec")
    assert dispatcher.submitted == [(study_id, 1)]
    assert study.attempts[0].death_reason is None


def test_a_cancelled_study_whose_job_stopped_is_not_resubmitted(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    with session_scope(engine) as session:  # what POST /studies/{id}/cancel does after stopping the job
        set_study_status(session, study_id=study_id, status="cancelled")
    _kill_driver(dispatcher, engine, study_id, JobState.STOPPED)
    reconciler.tick()
    assert _study(engine, study_id).status == "cancelled"
    assert dispatcher.submitted == [(study_id, 1)]


def test_a_job_stopped_without_a_cancel_is_a_death(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    _kill_driver(dispatcher, engine, study_id, JobState.STOPPED)  # e.g. `ray job stop` by hand
    reconciler.tick()
    assert dispatcher.submitted == [(study_id, 1), (study_id, 2)]


def test_a_resubmission_the_cluster_refused_is_retried_without_recording_the_death_twice(
    engine, reconciler_for
):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher, submit_backoff_s=0)  # retried at the next tick
    reconciler.tick()
    _kill_driver(dispatcher, engine, study_id)

    def refuse_attempt_2_once(_study_id, attempt):
        if attempt == 2 and dispatcher.on_submit is not None:
            dispatcher.on_submit = None
            raise DispatchError("job server restarting")

    dispatcher.on_submit = refuse_attempt_2_once
    reconciler.tick()
    assert [a.number for a in _study(engine, study_id).attempts] == [1]  # dead, next one not in yet
    reconciler.tick()
    study = _study(engine, study_id)
    assert [(a.number, a.ended_at is not None) for a in study.attempts] == [(1, True), (2, False)]
    assert study.ray_job_id == submission_id_for(study_id, 2)


def test_a_study_cancelled_while_its_next_driver_was_submitted_gets_that_job_stopped(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher = FakeDispatcher()
    reconciler = reconciler_for(dispatcher)
    reconciler.tick()
    _kill_driver(dispatcher, engine, study_id)

    def cancel_meanwhile(_study_id, attempt):
        with session_scope(engine) as session:
            set_study_status(session, study_id=study_id, status="cancelled")

    dispatcher.on_submit = cancel_meanwhile
    reconciler.tick()
    assert _study(engine, study_id).status == "cancelled"
    assert dispatcher.cancelled == [submission_id_for(study_id, 2)]


# ----------------------------------------------------------------------------------------- restarts


def _running_before_the_restart(engine, study_id, job_id="raysubmit_old_head"):
    """A study the previous service started, whose Ray job died with the stack it ran on."""
    from studies.store import record_attempt

    with session_scope(engine) as session:
        record_attempt(session, study_id=study_id, ray_job_id=job_id)
        set_study_status(session, study_id=study_id, status="running")


def test_a_study_interrupted_by_a_restart_resumes_without_using_up_an_attempt(engine, reconciler_for):
    study_id = _new_study(engine)
    _running_before_the_restart(engine, study_id)
    dispatcher = FakeDispatcher()  # the new head has never heard of the old job: MISSING
    reconciler = reconciler_for(dispatcher, max_study_attempts=1, interrupted_studies="resume")
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "running"
    assert dispatcher.submitted == [(study_id, 2)]
    assert study.attempts[0].interrupted and "ended missing" in study.attempts[0].death_reason
    # Its one counted attempt is the resumed driver: a real death of that one ends the study.
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "failed" and not study.attempts[1].interrupted


def test_a_study_interrupted_by_a_restart_is_cancelled_when_so_configured(engine, reconciler_for):
    study_id = _new_study(engine)
    _running_before_the_restart(engine, study_id)
    _record(engine, study_id, "cut", "running")
    dispatcher = FakeDispatcher()
    runs = FakeRuns()
    with session_scope(engine) as session:
        set_study_runtime(session, study_id=study_id, mlflow_experiment_id="7", mlflow_parent_run_id="p")
    reconciler_for(dispatcher, runs, interrupted_studies="cancel").tick()
    study = _study(engine, study_id)
    assert study.status == "cancelled" and "interrupted" in study.error
    assert study.attempts[0].interrupted and study.attempts[0].death_reason
    assert dispatcher.submitted == []
    assert _trial_statuses(engine, study_id)["cut"][0] == "cancelled"
    assert runs.closed == [(study_id, "7", "cancelled")]


def test_a_study_whose_driver_survived_the_restart_keeps_running_and_a_later_death_counts(
    engine, reconciler_for
):
    study_id = _new_study(engine)
    _running_before_the_restart(engine, study_id, job_id="raysubmit_alive")
    dispatcher = FakeDispatcher(states={"raysubmit_alive": JobState.RUNNING})
    reconciler = reconciler_for(dispatcher, max_study_attempts=2)
    reconciler.tick()
    assert dispatcher.submitted == [] and _study(engine, study_id).status == "running"
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    study = _study(engine, study_id)
    assert dispatcher.submitted == [(study_id, 2)]
    assert not study.attempts[0].interrupted


def test_a_study_found_dead_before_the_cluster_answered_is_still_treated_as_interrupted(
    engine, reconciler_for
):
    study_id = _new_study(engine)
    _running_before_the_restart(engine, study_id)
    dispatcher = FakeDispatcher(reachable=False)
    reconciler = reconciler_for(dispatcher, max_study_attempts=1)
    reconciler.tick()  # the head is still starting
    dispatcher.reachable = True
    reconciler.tick()
    study = _study(engine, study_id)
    assert study.status == "running" and study.attempts[0].interrupted


# ----------------------------------------------------------------------------------------- MLflow runs


def _with_experiment(engine, study_id, experiment_id="11"):
    with session_scope(engine) as session:
        set_study_runtime(session, study_id=study_id, mlflow_experiment_id=experiment_id)


def test_a_study_that_failed_after_its_attempts_gets_its_mlflow_runs_closed_once(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher, runs = FakeDispatcher(), FakeRuns()
    reconciler = reconciler_for(dispatcher, runs, max_study_attempts=1)
    reconciler.tick()
    _with_experiment(engine, study_id)
    _kill_driver(dispatcher, engine, study_id)
    reconciler.tick()
    reconciler.tick()
    assert runs.closed == [(study_id, "11", "failed")]
    assert _study(engine, study_id).mlflow_closed_at is not None


def test_a_cancelled_studys_runs_are_closed_once_its_job_has_stopped(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher, runs = FakeDispatcher(), FakeRuns()
    reconciler = reconciler_for(dispatcher, runs)
    reconciler.tick()
    _with_experiment(engine, study_id)
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status="cancelled")
    reconciler.tick()
    assert runs.closed == []  # Ray is still stopping the driver, which closes what it can itself
    dispatcher.states[_study(engine, study_id).ray_job_id] = JobState.STOPPED
    reconciler.tick()
    assert runs.closed == [(study_id, "11", "cancelled")]


def test_a_study_cancelled_in_its_drivers_first_seconds_has_the_runs_its_driver_made_closed(
    engine, reconciler_for
):
    # The driver records its MLflow experiment (before it creates any run in it) while the loop already
    # holds the cancelled study without one: the loop must read it again once the driver has ended.
    study_id = _new_study(engine)
    dispatcher, runs = FakeDispatcher(), FakeRuns()
    reconciler = reconciler_for(dispatcher, runs)
    reconciler.tick()
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status="cancelled")
    job = _study(engine, study_id).ray_job_id

    def driver_records_its_experiment_as_it_stops(job_id: str) -> None:
        if job_id == job and dispatcher.states[job] is JobState.RUNNING:
            _with_experiment(engine, study_id, "12")
            dispatcher.states[job] = JobState.STOPPED

    dispatcher.on_state = driver_records_its_experiment_as_it_stops
    reconciler.tick()
    assert runs.closed == [(study_id, "12", "cancelled")]
    assert _study(engine, study_id).mlflow_closed_at is not None


def test_runs_stay_open_while_mlflow_is_down_and_are_closed_when_it_is_back(engine, reconciler_for):
    study_id = _new_study(engine)
    dispatcher, runs = FakeDispatcher(), FakeRuns(available=False)
    reconciler = reconciler_for(dispatcher, runs)
    reconciler.tick()
    _with_experiment(engine, study_id)
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status="succeeded")
    dispatcher.states[_study(engine, study_id).ray_job_id] = JobState.SUCCEEDED
    reconciler.tick()
    assert _study(engine, study_id).mlflow_closed_at is None
    runs.available = True
    reconciler.tick()
    assert runs.closed == [(study_id, "11", "succeeded")]
    assert _study(engine, study_id).mlflow_closed_at is not None


def test_a_study_cancelled_before_it_ran_has_no_runs_to_close(engine, reconciler_for):
    study_id = _new_study(engine)
    with session_scope(engine) as session:
        set_study_status(session, study_id=study_id, status="cancelled")
    runs = FakeRuns()
    reconciler_for(FakeDispatcher(), runs).tick()
    assert runs.closed == []
    assert _study(engine, study_id).mlflow_closed_at is not None


def test_a_wake_starts_a_queued_study_without_waiting_out_the_interval(engine, tmp_path):
    dispatcher = FakeDispatcher()
    reconciler = StudyReconciler(
        engine, dispatcher, interval_s=600, settings=_settings(tmp_path), runs=FakeRuns()
    )
    reconciler.start()
    try:
        # The first tick (at start) is over once it has noted the running studies: the next is 600 s away.
        assert wait_until(lambda: reconciler._found_at_start is not None, timeout=30, interval=0.05)
        study_id = _new_study(engine)
        reconciler.wake()
        assert wait_until(lambda: dispatcher.submitted == [(study_id, 1)], timeout=30, interval=0.05)
    finally:
        reconciler.stop()
    assert not reconciler._thread.is_alive()  # stop wakes the loop too: no 600 s wait to end it
