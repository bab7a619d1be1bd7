"""Trial records: idempotent upsert by trial_key, filters, and values JSON cannot hold."""

from __future__ import annotations

import numpy as np
import pytest

from studies.store import (
    InvalidTrialError,
    StudyNotFoundError,
    TrialKeyConflictError,
    list_trials,
    session_scope,
)
from tests.factories import add_study, add_trial


@pytest.fixture
def study_id(engine) -> str:
    return add_study(engine).id


def _record(engine, study_id, key="k", **changes):
    fields = dict(
        config={"lr": 1e-3, "seed": 0},
        metrics={"test_accuracy": 0.9},
        metric_value=0.9,
        mlflow_run_id="run-1",
    )
    return add_trial(engine, study_id, key, **{**fields, **changes})


def test_recording_a_trial_returns_it_with_every_field(engine, study_id):
    trial = _record(engine, study_id, group="tau=0.5", error=None)
    assert trial.study_id == study_id and trial.trial_key == "k"
    assert (trial.phase, trial.method, trial.seed, trial.status) == ("final", "dyt", 0, "succeeded")
    assert trial.config == {"lr": 1e-3, "seed": 0}
    assert trial.metrics == {"test_accuracy": 0.9} and trial.metric_value == 0.9
    assert trial.group == "tau=0.5" and trial.mlflow_run_id == "run-1"


def test_recording_the_same_trial_key_twice_keeps_one_row(engine, study_id):
    first = _record(engine, study_id)
    second = _record(engine, study_id)
    with session_scope(engine) as session:
        trials = list_trials(session, study_id=study_id)
    assert len(trials) == 1
    assert second.id == first.id
    assert second.created_at == first.created_at


def test_re_recording_a_trial_updates_it_so_a_retry_can_turn_failed_into_succeeded(engine, study_id):
    _record(engine, study_id, status="failed", metrics={}, metric_value=None, error="CUDA OOM")
    retried = _record(
        engine, study_id, status="succeeded", metric_value=0.93, metrics={"test_accuracy": 0.93}
    )
    assert retried.status == "succeeded" and retried.metric_value == 0.93
    assert retried.error is None
    assert retried.updated_at >= retried.created_at


def test_a_trial_key_of_another_study_is_refused_and_left_untouched(engine, study_id):
    other = add_study(engine).id
    _record(engine, study_id, key="shared")
    with pytest.raises(TrialKeyConflictError, match="already belongs"):
        _record(engine, other, key="shared", metric_value=0.1)
    with session_scope(engine) as session:
        (kept,) = list_trials(session, study_id=study_id)
        assert list_trials(session, study_id=other) == []
    assert kept.metric_value == 0.9


def test_recording_for_an_unknown_study_raises_not_found(engine):
    with pytest.raises(StudyNotFoundError):
        _record(engine, "f" * 32)


@pytest.mark.parametrize(("field", "value"), [("phase", "warmup"), ("status", "queued")])
def test_phase_and_status_outside_their_domain_are_refused(engine, study_id, field, value):
    with pytest.raises(InvalidTrialError, match=field):
        _record(engine, study_id, **{field: value})


def test_non_finite_and_numpy_values_are_stored_as_plain_json(engine, study_id):
    trial = _record(
        engine,
        study_id,
        metrics={"train_loss": float("nan"), "val_accuracy": np.float32(0.5), "curve": [1.0, float("inf")]},
        metric_value=float("nan"),
        seed=2**32 - 1,
    )
    assert trial.metrics == {"train_loss": None, "val_accuracy": 0.5, "curve": [1.0, None]}
    assert trial.metric_value is None
    assert trial.seed == 2**32 - 1


def test_list_trials_filters_by_phase_status_study_and_dataset(engine, study_id):
    _record(engine, study_id, key="t1", phase="tune", seed=None)
    _record(engine, study_id, key="f1", phase="final", status="failed")
    _record(engine, study_id, key="f2", phase="final", status="succeeded")
    _record(engine, study_id, key="g1", phase="grid", group="skip_scale=1.0")
    with session_scope(engine) as session:

        def keys(**filters):
            return [t.trial_key for t in list_trials(session, **filters)]

        assert keys(study_id=study_id) == ["t1", "f1", "f2", "g1"]
        assert keys(phase="final") == ["f1", "f2"]
        assert keys(phase=["final", "grid"], status="succeeded") == ["f2", "g1"]
        assert keys(dataset="digits", phase="tune") == ["t1"]
        assert keys(dataset="cifar10") == []
        assert keys(study_id="0" * 32) == []


def test_concurrent_writers_from_separate_engines_lose_no_trial(database_url, engine, study_id):
    # The API and the study drivers are separate processes with their own engines; none may fail on a lock.
    import threading

    from studies.store import make_engine

    failures: list[BaseException] = []

    def writer(worker: int) -> None:
        own_engine = make_engine(database_url)
        try:
            for i in range(10):
                _record(own_engine, study_id, key=f"w{worker}-{i}", seed=i, metric_value=i / 10)
                _record(own_engine, study_id, key=f"w{worker}-{i}", seed=i, metric_value=i / 10)  # a retry
        except BaseException as exc:
            failures.append(exc)
        finally:
            own_engine.dispose()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with session_scope(engine) as session:
        assert len(list_trials(session, study_id=study_id)) == 40


def test_a_write_that_does_not_know_the_mlflow_run_keeps_the_recorded_one(engine, study_id):
    # The driver records the run id at the trial's first epoch; a later write without it (a resumed trial's
    # start, a finish while MLflow is down) must not erase it.
    _record(engine, study_id, status="running", mlflow_run_id="run-1", metric_value=None)
    later = _record(engine, study_id, mlflow_run_id=None)
    assert (later.status, later.mlflow_run_id) == ("succeeded", "run-1")
    assert _record(engine, study_id, mlflow_run_id="run-2").mlflow_run_id == "run-2"  # a known id is written
