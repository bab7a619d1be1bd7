"""Study records: creation, listing, progress, and the status-transition rules (on SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from studies.store import (
    InvalidStatusTransitionError,
    StudyNotFoundError,
    StudyProgress,
    StudyView,
    Trial,
    create_study,
    get_study,
    list_studies,
    list_trials,
    session_scope,
    set_study_runtime,
    set_study_status,
    study_progress,
)
from tests.factories import add_study, add_trial, quick_spec


def _new_study(engine, **changes):
    return add_study(engine, quick_spec(**changes))


def _move(engine, study_id, *statuses):
    for status in statuses:
        with session_scope(engine) as session:
            study = set_study_status(session, study_id=study_id, status=status)
    return study


def test_a_new_study_is_queued_with_its_spec_and_planned_trial_count(engine):
    study = _new_study(engine)
    assert study.status == "queued"
    assert len(study.id) == 32 and int(study.id, 16) >= 0
    assert study.dataset == "digits" and study.kind == "compare"
    assert study.planned_trials == 2 * 3 + 3 * 3  # tune 2 per method + final 3 methods x 3 seeds
    assert study.spec["methods"] == ["autonorm_s", "frozen_ln", "dyt"]
    assert study.spec["budget"]["warmup_epochs"] == 0  # defaults are filled in before storing
    assert study.created_at.tzinfo is not None


def test_create_study_accepts_a_plain_mapping_and_validates_it(engine):
    with session_scope(engine) as session:
        study = create_study(session, spec={"name": "m", "dataset": "digits", "methods": ["dyt"]})
    assert study.spec["seeds"] == [0, 1, 2]


def test_get_study_returns_what_was_stored_and_unknown_ids_raise(engine):
    created = _new_study(engine)
    with session_scope(engine) as session:
        assert get_study(session, study_id=created.id).spec == created.spec
        with pytest.raises(StudyNotFoundError, match="no study with id 'nope'"):
            get_study(session, study_id="nope")


def test_list_studies_filters_by_status_and_dataset_and_orders_newest_first(engine):
    first = _new_study(engine)
    second = _new_study(engine, dataset="mnist_5k")
    _move(engine, first.id, "running")
    with session_scope(engine) as session:
        assert [s.id for s in list_studies(session)] == [second.id, first.id]
        assert [s.id for s in list_studies(session, order="oldest")] == [first.id, second.id]
        assert [s.id for s in list_studies(session, status="running")] == [first.id]
        assert [s.id for s in list_studies(session, dataset="mnist_5k")] == [second.id]
        assert list_studies(session, status="failed") == []


@pytest.mark.parametrize(
    "path",
    [
        ("running",),
        ("cancelled",),
        ("failed",),
        ("running", "succeeded"),
        ("running", "failed"),
        ("running", "cancelled"),
    ],
)
def test_allowed_transitions_succeed(engine, path):
    study = _new_study(engine)
    assert _move(engine, study.id, *path).status == path[-1]


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ((), "succeeded"),  # queued studies have not run
        (("running",), "queued"),  # no way back to the queue
        (("running", "succeeded"), "running"),
        (("running", "succeeded"), "failed"),
        (("running", "failed"), "succeeded"),
        (("cancelled",), "running"),
        (("running", "cancelled"), "succeeded"),
    ],
)
def test_disallowed_transitions_raise_and_leave_the_status_unchanged(engine, path, refused):
    study = _new_study(engine)
    before = _move(engine, study.id, *path) if path else study
    with pytest.raises(InvalidStatusTransitionError, match=f"cannot become {refused}"):
        _move(engine, study.id, refused)
    with session_scope(engine) as session:
        assert get_study(session, study_id=study.id).status == before.status


def test_asking_for_the_current_status_is_an_idempotent_no_op(engine):
    study = _new_study(engine)
    running = _move(engine, study.id, "running")
    again = _move(engine, study.id, "running")
    assert again.status == "running"
    assert again.started_at == running.started_at
    done = _move(engine, study.id, "succeeded", "succeeded")
    assert done.status == "succeeded"


def test_status_changes_stamp_start_and_finish_times_and_keep_the_error(engine):
    study = _new_study(engine)
    assert study.started_at is None and study.finished_at is None
    running = _move(engine, study.id, "running")
    assert running.started_at is not None and running.finished_at is None
    with session_scope(engine) as session:
        failed = set_study_status(session, study_id=study.id, status="failed", error="driver crashed: OOM")
    assert failed.error == "driver crashed: OOM"
    assert failed.finished_at >= failed.started_at


def test_unknown_status_names_are_rejected(engine):
    study = _new_study(engine)
    with session_scope(engine) as session, pytest.raises(ValueError):
        set_study_status(session, study_id=study.id, status="paused")


def test_set_study_status_on_an_unknown_study_raises_not_found(engine):
    with session_scope(engine) as session, pytest.raises(StudyNotFoundError):
        set_study_status(session, study_id="0" * 32, status="running")


def test_set_study_runtime_records_job_and_mlflow_ids_and_none_keeps_old_values(engine):
    study = _new_study(engine)
    with session_scope(engine) as session:
        set_study_runtime(session, study_id=study.id, ray_job_id="raysubmit_1")
        updated = set_study_runtime(
            session, study_id=study.id, mlflow_experiment_id="7", mlflow_parent_run_id="abc"
        )
    assert (updated.ray_job_id, updated.mlflow_experiment_id, updated.mlflow_parent_run_id) == (
        "raysubmit_1",
        "7",
        "abc",
    )
    assert updated.status == "queued"  # runtime facts never change the status


def test_progress_counts_trials_by_outcome_against_the_plan(engine):
    study = _new_study(engine)
    outcomes = ["succeeded", "succeeded", "failed", "running", "cancelled"]
    with session_scope(engine) as session:
        for i, status in enumerate(outcomes):
            add_trial(session, study.id, f"{study.id}-tune-{i}", phase="tune", status=status)
    with session_scope(engine) as session:
        progress = study_progress(session, study_id=study.id)
        listed = list_studies(session)[0].progress
    assert (progress.succeeded, progress.failed, progress.running, progress.cancelled) == (2, 1, 1, 1)
    assert progress.done == 4
    assert progress.fraction == pytest.approx(4 / 15)
    assert listed == progress


def test_progress_never_counts_more_done_than_planned():
    # A guard only: the one known way to record a planned trial twice (a trial lost with its driver and
    # run again under a new key) is counted as lost, not done (tests/studies/store/test_attempts.py).
    progress = StudyProgress(planned=3, running=0, succeeded=3, failed=1, cancelled=0)
    assert (progress.done, progress.fraction) == (3, 1.0)


def _view(status: str, done: int, *, started_minutes_ago: float = 10.0) -> StudyView:
    now = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    progress = StudyProgress(planned=10, running=1, succeeded=done, failed=0, cancelled=0)
    return StudyView(
        id="s", name="s", dataset="digits", kind="compare", status=status, spec={}, error=None,
        planned_trials=10, ray_job_id=None, mlflow_experiment_id=None, mlflow_parent_run_id=None,
        created_at=now, updated_at=now,
        started_at=now - timedelta(minutes=started_minutes_ago), finished_at=None, progress=progress,
    )  # fmt: skip


def test_the_time_left_is_the_pace_so_far_times_the_trials_still_to_finish():
    now = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    # 4 of 10 trials in 10 minutes: 2.5 minutes a trial, 6 to go.
    assert _view("running", 4).seconds_left_at(now) == pytest.approx(15 * 60)
    assert _view("running", 0).seconds_left_at(now) is None  # no pace before a trial finished
    assert _view("succeeded", 4).seconds_left_at(now) is None


# -------------------------------------------------------- a stopped study's trials end with it


def _record_trials(engine, study_id, **statuses):
    """One tune trial per keyword: trial key suffix -> status."""
    with session_scope(engine) as session:
        for suffix, status in statuses.items():
            error = "diverged" if status == "failed" else None
            add_trial(session, study_id, f"{study_id}-{suffix}", phase="tune", status=status, error=error)


def _trials(engine, study_id):
    with session_scope(engine, readonly=True) as session:
        return {t.trial_key.removeprefix(f"{study_id}-"): t for t in list_trials(session, study_id=study_id)}


def test_cancelling_a_study_cancels_its_running_trials_and_keeps_finished_ones(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running")
    _record_trials(engine, study.id, a="running", b="running", c="succeeded", d="failed")
    cancelled = _move(engine, study.id, "cancelled")
    trials = _trials(engine, study.id)
    assert {k: t.status for k, t in trials.items()} == {
        "a": "cancelled",
        "b": "cancelled",
        "c": "succeeded",
        "d": "failed",
    }
    assert trials["a"].error is None and trials["d"].error == "diverged"
    assert (cancelled.progress.running, cancelled.progress.cancelled) == (0, 2)


def test_failing_a_study_fails_its_running_trials_with_the_first_line_of_its_error(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running")
    _record_trials(engine, study.id, a="running", c="succeeded", d="failed")
    with session_scope(engine) as session:
        failed = set_study_status(
            session, study_id=study.id, status="failed", error="driver died (OOM)\nTraceback ..."
        )
    trials = _trials(engine, study.id)
    assert (trials["a"].status, trials["a"].error) == ("failed", "study failed: driver died (OOM)")
    assert (trials["d"].status, trials["d"].error) == ("failed", "diverged")  # its own reason is kept
    assert trials["c"].status == "succeeded"
    assert (failed.progress.running, failed.progress.failed) == (0, 2)


def test_a_study_failed_without_an_error_still_fails_its_running_trials(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running")
    _record_trials(engine, study.id, a="running")
    _move(engine, study.id, "failed")
    assert (_trials(engine, study.id)["a"].status, _trials(engine, study.id)["a"].error) == (
        "failed",
        "study failed",
    )


def test_a_succeeded_study_leaves_its_trials_as_recorded(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running")
    _record_trials(engine, study.id, a="running", c="succeeded")
    _move(engine, study.id, "succeeded")
    assert {k: t.status for k, t in _trials(engine, study.id).items()} == {"a": "running", "c": "succeeded"}


def test_only_the_stopped_studys_trials_are_touched(engine):
    stopped, other = _new_study(engine), _new_study(engine)
    for study in (stopped, other):
        _move(engine, study.id, "running")
        _record_trials(engine, study.id, a="running")
    _move(engine, stopped.id, "cancelled")
    assert _trials(engine, other.id)["a"].status == "running"


def test_the_trials_end_in_the_same_transaction_as_the_study(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running")
    _record_trials(engine, study.id, a="running")
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        set_study_status(session, study_id=study.id, status="cancelled")
        raise RuntimeError("the unit of work fails after the status change")
    assert _trials(engine, study.id)["a"].status == "running"
    with session_scope(engine) as session:
        assert get_study(session, study_id=study.id).status == "running"


def test_a_trial_start_a_stopping_driver_records_late_ends_with_its_study(engine):
    cancelled, failed = _new_study(engine), _new_study(engine)
    _move(engine, cancelled.id, "running", "cancelled")
    _move(engine, failed.id, "running")
    with session_scope(engine) as session:
        set_study_status(session, study_id=failed.id, status="failed", error="Ray job lost")
    _record_trials(engine, cancelled.id, late="running", done="succeeded")
    _record_trials(engine, failed.id, late="running")
    assert {k: t.status for k, t in _trials(engine, cancelled.id).items()} == {
        "late": "cancelled",
        "done": "succeeded",  # a trial that really finished is recorded as it finished
    }
    late = _trials(engine, failed.id)["late"]
    assert (late.status, late.error) == ("failed", "study failed: Ray job lost")
    with session_scope(engine) as session:
        assert get_study(session, study_id=cancelled.id).progress.running == 0


def test_repeating_a_cancel_closes_trials_left_running_by_an_older_version(engine):
    study = _new_study(engine)
    _move(engine, study.id, "running", "cancelled")
    _record_trials(engine, study.id, a="succeeded")
    with session_scope(engine) as session:  # what a database written before this rule can hold
        session.execute(sa.update(Trial).where(Trial.study_id == study.id).values(status="running"))
    again = _move(engine, study.id, "cancelled")
    assert again.status == "cancelled" and again.progress.running == 0
    assert _trials(engine, study.id)["a"].status == "cancelled"


def test_a_failed_unit_of_work_rolls_back_everything_in_it(engine):
    with pytest.raises(InvalidStatusTransitionError), session_scope(engine) as session:
        study = add_study(session)
        set_study_status(session, study_id=study.id, status="succeeded")
    with session_scope(engine) as session:
        assert list_studies(session) == []


def test_study_views_are_immutable_copies(engine):
    study = _new_study(engine)
    with pytest.raises(AttributeError):
        study.status = "running"  # type: ignore[misc]
    study.spec["name"] = "mutated"
    with session_scope(engine) as session:
        assert get_study(session, study_id=study.id).spec["name"] == "tiny"
