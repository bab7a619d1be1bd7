"""Driver attempts: numbered submissions of a study's driver, each death's reason, what a death does to the
running trials, and which ended studies still have MLflow runs to close (on SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from studies.store import (
    end_attempt,
    get_study,
    list_studies,
    list_studies_with_open_mlflow_runs,
    list_trials,
    mark_mlflow_closed,
    record_attempt,
    session_scope,
    set_study_runtime,
    set_study_status,
)
from tests.factories import add_study, add_trial


def _running_study(engine, job="job-1") -> str:
    return add_study(engine, ray_job_id=job, status="running").id


def _trial(engine, study_id, key, status, phase="final"):
    metric_value = 0.9 if status == "succeeded" else None
    add_trial(engine, study_id, f"{study_id}/{key}", phase=phase, status=status, metric_value=metric_value)


def _trials(engine, study_id):
    with session_scope(engine) as session:
        return {t.trial_key.split("/", 1)[1]: t for t in list_trials(session, study_id=study_id)}


def test_attempts_are_numbered_from_one_and_the_latest_is_the_studys_job(engine):
    study_id = _running_study(engine)
    with session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="killed")
        study = record_attempt(session, study_id=study_id, ray_job_id="job-2")
    assert [(a.number, a.ray_job_id) for a in study.attempts] == [(1, "job-1"), (2, "job-2")]
    assert study.ray_job_id == "job-2" and study.current_attempt.number == 2
    assert study.attempts[0].submitted_at <= study.attempts[1].submitted_at


def test_recording_the_same_job_again_adds_no_attempt(engine):
    study_id = _running_study(engine)
    with session_scope(engine) as session:
        study = record_attempt(session, study_id=study_id, ray_job_id="job-1")
    assert [a.number for a in study.attempts] == [1]


def test_a_death_keeps_its_reason_and_time_and_a_second_report_changes_nothing(engine):
    study_id = _running_study(engine)
    with session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="exit code -9 (SIGKILL)\nlog lines")
    with session_scope(engine) as session:
        study = end_attempt(session, study_id=study_id, death_reason="something else", interrupted=True)
    (attempt,) = study.attempts
    assert attempt.death_reason == "exit code -9 (SIGKILL)\nlog lines"
    assert attempt.ended and not attempt.interrupted
    assert study.status == "running"  # a death alone leaves the study's status to the reconcile loop


def test_a_death_cancels_the_running_trials_with_its_reason_and_leaves_finished_ones(engine):
    study_id = _running_study(engine)
    _trial(engine, study_id, "running", "running")
    _trial(engine, study_id, "done", "succeeded")
    with session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="exit code -9 (SIGKILL)\nmore")
    trials = _trials(engine, study_id)
    assert trials["running"].status == "cancelled"
    assert trials["running"].error == "the study's driver died (attempt 1: exit code -9 (SIGKILL))"
    assert (trials["done"].status, trials["done"].error) == ("succeeded", None)


def test_a_trial_the_next_attempt_resumes_is_running_again_without_the_old_error(engine):
    study_id = _running_study(engine)
    _trial(engine, study_id, "resumed", "running")
    with session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="killed")
        record_attempt(session, study_id=study_id, ray_job_id="job-2")
    _trial(engine, study_id, "resumed", "running")
    resumed = _trials(engine, study_id)["resumed"]
    assert (resumed.status, resumed.error) == ("running", None)


def test_a_job_recorded_without_an_attempt_becomes_attempt_one_when_its_driver_dies(engine):
    study_id = add_study(engine).id
    with session_scope(engine) as session:
        set_study_runtime(session, study_id=study_id, ray_job_id="legacy-job")
        set_study_status(session, study_id=study_id, status="running")
    with session_scope(engine) as session:
        study = end_attempt(session, study_id=study_id, death_reason="lost")
    assert [(a.number, a.ray_job_id, a.death_reason) for a in study.attempts] == [(1, "legacy-job", "lost")]


def test_a_study_without_a_job_has_no_attempt_to_end(engine):
    study_id = add_study(engine).id
    with pytest.raises(ValueError, match="no Ray job"), session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="?")


def test_listings_carry_every_studys_attempts(engine):
    first, second = _running_study(engine, "a-1"), _running_study(engine, "b-1")
    with session_scope(engine) as session:
        end_attempt(session, study_id=first, death_reason="killed")
        record_attempt(session, study_id=first, ray_job_id="a-2")
    with session_scope(engine, readonly=True) as session:
        listed = {s.id: [a.ray_job_id for a in s.attempts] for s in list_studies(session)}
        assert [a.ray_job_id for a in get_study(session, study_id=second).attempts] == ["b-1"]
    assert listed == {first: ["a-1", "a-2"], second: ["b-1"]}


def test_only_ended_studies_wait_for_their_mlflow_runs_to_be_closed(engine):
    running, failed, cancelled = (
        _running_study(engine, "r"),
        _running_study(engine, "f"),
        _running_study(engine, "c"),
    )
    with session_scope(engine) as session:
        set_study_status(session, study_id=failed, status="failed", error="boom")
    with session_scope(engine) as session:
        set_study_status(session, study_id=cancelled, status="cancelled")
    with session_scope(engine, readonly=True) as session:
        assert [s.id for s in list_studies_with_open_mlflow_runs(session, limit=10)] == [failed, cancelled]
        assert len(list_studies_with_open_mlflow_runs(session, limit=1)) == 1
    with session_scope(engine) as session:
        mark_mlflow_closed(session, study_id=failed)
    with session_scope(engine, readonly=True) as session:
        assert [s.id for s in list_studies_with_open_mlflow_runs(session, limit=10)] == [cancelled]
        assert get_study(session, study_id=failed).mlflow_closed_at is not None
    with pytest.raises(ValueError, match="running"), session_scope(engine) as session:
        mark_mlflow_closed(session, study_id=running)


# ------------------------------------------------------------------------------ progress after a death


def _tune_trial(engine, study_id, key, status="succeeded"):
    _trial(engine, study_id, f"tune/dyt/{key}", status, phase="tune")


def test_a_trial_lost_with_its_driver_and_run_again_under_a_new_key_is_not_counted_done_twice(engine):
    # The probe's study: 15 planned (6 tuning + 9 final). A tuning trial that missed Tune's last snapshot
    # is lost with the killed driver (its row cancelled) and runs again under a new trial key.
    study_id = _running_study(engine)
    for n in range(5):
        _tune_trial(engine, study_id, f"t{n}")
    _tune_trial(engine, study_id, "t5", status="running")
    with session_scope(engine) as session:
        end_attempt(session, study_id=study_id, death_reason="exit code -9 (SIGKILL)")
        record_attempt(session, study_id=study_id, ray_job_id="job-2")
    _tune_trial(engine, study_id, "t6")  # the lost sample, run again by attempt 2
    for seed in range(9):
        _trial(engine, study_id, f"final/{seed}", "succeeded")
    with session_scope(engine) as session:
        study = set_study_status(session, study_id=study_id, status="succeeded")
    progress = study.progress
    assert progress.planned == 15
    assert (progress.done, progress.succeeded, progress.cancelled, progress.lost) == (15, 15, 0, 1)
    assert progress.fraction == 1.0
    assert _trials(engine, study_id)["tune/dyt/t5"].status == "cancelled"  # the row itself stays


def test_a_trial_the_next_attempt_resumes_under_its_key_is_not_lost(engine):
    study_id = _running_study(engine)
    _trial(engine, study_id, "resumed", "running")
    with session_scope(engine) as session:
        assert end_attempt(session, study_id=study_id, death_reason="killed").progress.lost == 1
        record_attempt(session, study_id=study_id, ray_job_id="job-2")
    _trial(engine, study_id, "resumed", "succeeded")
    with session_scope(engine) as session:
        progress = get_study(session, study_id=study_id).progress
    assert (progress.succeeded, progress.lost, progress.done) == (1, 0, 1)


def test_trials_cancelled_with_their_study_count_as_cancelled_and_done(engine):
    study_id = _running_study(engine)
    _trial(engine, study_id, "stopped", "running")
    with session_scope(engine) as session:
        progress = set_study_status(session, study_id=study_id, status="cancelled").progress
    assert (progress.cancelled, progress.lost, progress.done) == (1, 0, 1)


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "cancelled"])
def test_an_attempt_ends_with_its_study_without_a_death_reason(engine, outcome):
    study_id = add_study(engine, status="queued").id
    with session_scope(engine) as session:
        record_attempt(session, study_id=study_id, ray_job_id="job-1")
        set_study_status(session, study_id=study_id, status="running")
        (attempt,) = set_study_status(session, study_id=study_id, status=outcome).attempts
    assert attempt.ended_at is not None and attempt.death_reason is None
