"""Per-epoch trial history: one row per (trial, epoch), upserted, read back in order, per trial or per study."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from studies.store import (
    InvalidTrialError,
    StudyNotFoundError,
    TrialKeyConflictError,
    TrialNotFoundError,
    make_engine,
    record_trial_epoch,
    session_scope,
    study_histories,
    trial_history,
)
from tests.factories import add_study, add_trial, digits_spec

SPEC = digits_spec(name="epochs", epochs=2, batch_size=32)


@pytest.fixture
def study_id(engine) -> str:
    return add_study(engine, SPEC).id


def _epoch(engine, study_id, key, number, **metrics):
    with session_scope(engine) as session:
        record_trial_epoch(session, study_id=study_id, trial_key=key, epoch=number, metrics=metrics)


def _trial(engine, study_id, key, phase="final"):
    add_trial(engine, study_id, key, phase=phase, method="autonorm_s", status="running")


def _history(engine, study_id, key):
    with session_scope(engine, readonly=True) as session:
        return trial_history(session, study_id=study_id, trial_key=key)


def test_every_reported_metric_of_every_epoch_comes_back_in_epoch_order(engine, study_id):
    _trial(engine, study_id, "k")
    _epoch(engine, study_id, "k", 2, val_accuracy=0.8, gate_dyt_weight_0=0.3)
    # A Tune result carries its own (float) epoch entry; the stored epoch number is the one that counts.
    _epoch(engine, study_id, "k", 0, val_accuracy=0.1, init_erank_jacobian=0.7, epoch=0.0)
    _epoch(engine, study_id, "k", 1, val_accuracy=0.6, gate_dyt_weight_0=0.4)
    assert _history(engine, study_id, "k") == [
        {"epoch": 0, "val_accuracy": 0.1, "init_erank_jacobian": 0.7},
        {"epoch": 1, "val_accuracy": 0.6, "gate_dyt_weight_0": 0.4},
        {"epoch": 2, "val_accuracy": 0.8, "gate_dyt_weight_0": 0.3},
    ]


def test_a_re_reported_epoch_replaces_the_old_one_instead_of_adding_a_row(engine, study_id):
    _epoch(engine, study_id, "k", 1, val_accuracy=0.5, train_loss=2.0)
    _epoch(engine, study_id, "k", 1, val_accuracy=0.55)  # the retried trial recomputed epoch 1
    assert _history(engine, study_id, "k") == [{"epoch": 1, "val_accuracy": 0.55}]
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM trial_epochs")).scalar_one() == 1


def test_non_finite_values_are_stored_as_null(engine, study_id):
    _epoch(engine, study_id, "k", 3, train_loss=float("nan"), lr=float("inf"), val_accuracy=0.5)
    assert _history(engine, study_id, "k") == [
        {"epoch": 3, "train_loss": None, "lr": None, "val_accuracy": 0.5}
    ]


@pytest.mark.parametrize("epoch", [-1, 1.5, True, "2"])
def test_an_epoch_that_is_not_a_non_negative_integer_is_refused(engine, study_id, epoch):
    with pytest.raises(InvalidTrialError, match="epoch"):
        _epoch(engine, study_id, "k", epoch, val_accuracy=0.5)


def test_epochs_of_an_unknown_study_are_refused(engine):
    with pytest.raises(StudyNotFoundError):
        _epoch(engine, "f" * 32, "k", 0, val_accuracy=0.5)


def test_an_epoch_key_of_another_study_is_refused_and_left_untouched(engine, study_id):
    other = add_study(engine, SPEC).id
    _epoch(engine, study_id, "shared", 0, val_accuracy=0.5)
    with pytest.raises(TrialKeyConflictError, match="already belongs"):
        _epoch(engine, other, "shared", 0, val_accuracy=0.9)
    assert _history(engine, study_id, "shared") == [{"epoch": 0, "val_accuracy": 0.5}]


def test_a_trial_that_has_not_reported_yet_has_an_empty_history(engine, study_id):
    _trial(engine, study_id, "started")
    assert _history(engine, study_id, "started") == []


def test_an_unknown_trial_or_study_is_not_found_with_a_message_naming_it(engine, study_id):
    with pytest.raises(TrialNotFoundError, match="no trial with key 'nope'"):
        _history(engine, study_id, "nope")
    with pytest.raises(StudyNotFoundError, match="no study"):
        _history(engine, "0" * 32, "k")


def test_study_histories_group_by_trial_and_filter_by_the_trials_phase(engine, study_id):
    _trial(engine, study_id, "final-a", phase="final")
    _trial(engine, study_id, "tune-a", phase="tune")
    for key in ("final-a", "tune-a", "no-row-yet"):
        for epoch in (1, 0):
            _epoch(engine, study_id, key, epoch, objective=epoch / 10)
    with session_scope(engine, readonly=True) as session:
        every = study_histories(session, study_id=study_id)
        final = study_histories(session, study_id=study_id, phase="final")
        both = study_histories(session, study_id=study_id, phase=["final", "tune"])
    assert set(every) == {"final-a", "tune-a", "no-row-yet"}
    assert [row["epoch"] for row in every["final-a"]] == [0, 1]
    assert set(final) == {"final-a"} and set(both) == {"final-a", "tune-a"}


def test_study_histories_of_an_unknown_study_or_phase_are_refused(engine, study_id):
    with session_scope(engine, readonly=True) as session:
        with pytest.raises(StudyNotFoundError):
            study_histories(session, study_id="0" * 32)
        with pytest.raises(InvalidTrialError, match="phase"):
            study_histories(session, study_id=study_id, phase="warmup")


def test_deleting_a_study_deletes_its_histories(engine, study_id):
    _epoch(engine, study_id, "k", 0, val_accuracy=0.5)
    with session_scope(engine) as session:
        session.execute(sa.text("DELETE FROM studies WHERE id = :id"), {"id": study_id})
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM trial_epochs")).scalar_one() == 0


def test_concurrent_epoch_writers_lose_nothing_and_duplicate_nothing(database_url, engine, study_id):
    failures: list[BaseException] = []

    def writer(worker: int) -> None:
        own_engine = make_engine(database_url)
        try:
            for epoch in range(8):
                for _ in range(2):  # every epoch reported twice, as by a retried trial
                    with session_scope(own_engine) as session:
                        record_trial_epoch(
                            session,
                            study_id=study_id,
                            trial_key=f"w{worker}",
                            epoch=epoch,
                            metrics={"objective": epoch},
                        )
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
    with session_scope(engine, readonly=True) as session:
        histories = study_histories(session, study_id=study_id)
    assert {key: [row["epoch"] for row in rows] for key, rows in histories.items()} == {
        f"w{w}": list(range(8)) for w in range(4)
    }
