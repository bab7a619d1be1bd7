"""What the store tells a plan: the trials earlier studies of the same dataset and model finished (and how
long they took), and the paired final values of those that succeeded."""

from __future__ import annotations

from studies.planning import read_history
from studies.spec import validate_spec_data
from studies.store import session_scope
from tests.studies.planning.specs import mnist_cpu
from tests.studies.planning.store_rows import finished_study

VALUES = {"autonorm_s": [0.94, 0.95, 0.93], "frozen_ln": [0.95, 0.95, 0.95]}


def _history(engine, spec):
    with session_scope(engine, readonly=True) as session:
        return read_history(session, spec)


def test_only_studies_of_the_same_dataset_and_model_count(engine):
    same = finished_study(engine, mnist_cpu(name="same"), VALUES)
    finished_study(
        engine, mnist_cpu(name="deeper", model={"preset": "vit_lite_tiny", "overrides": {"depth": 6}}), VALUES
    )
    finished_study(engine, mnist_cpu(name="digits", dataset="digits", model="vit_lite_tiny"), VALUES)
    history = _history(engine, validate_spec_data(mnist_cpu()))
    assert history.timed_studies == [f"same ({same})"]
    assert len(history.timed) == 6 and {t.epochs for t in history.timed} == {20.0}
    assert [p.study for p in history.paired] == [f"same ({same})"]


def test_paired_values_come_from_succeeded_compare_studies_only_newest_first(engine):
    older = finished_study(engine, mnist_cpu(name="older"), VALUES)
    finished_study(engine, mnist_cpu(name="failed"), VALUES, status="failed")
    newer = finished_study(engine, mnist_cpu(name="newer"), VALUES)
    history = _history(engine, validate_spec_data(mnist_cpu()))
    assert [p.study for p in history.paired] == [f"newer ({newer})", f"older ({older})"]
    (first, *_) = history.paired
    assert first.reference == "frozen_ln"
    assert first.values["autonorm_s"] == {0: 0.94, 1: 0.95, 2: 0.93}
    # A failed study's finished trials still time the cluster.
    assert len(history.timed_studies) == 3


def test_a_trials_wall_time_is_from_its_start_to_its_end(engine):
    finished_study(engine, mnist_cpu(), VALUES, seconds_per_trial=75.0)
    history = _history(engine, validate_spec_data(mnist_cpu()))
    assert {t.seconds for t in history.timed} == {75.0}
