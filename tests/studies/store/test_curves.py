"""A study's trials with their histories and knobs in one read (study_curves): what the study page's
interactive charts draw."""

from __future__ import annotations

import pytest

from studies.store import StudyNotFoundError, session_scope, study_curves
from tests.factories import add_epochs, add_study, add_trial, digits_spec

TUNED = digits_spec(
    name="curves",
    methods=["autonorm_s", "frozen_ln"],
    num_samples=3,
    method_search={"autonorm_s": {"eps_h": {"type": "uniform", "low": 0.05, "high": 0.2}, "t_freeze": 1}},
    epochs=2,
    batch_size=32,
)
SWEEP = digits_spec(
    name="sweep",
    kind="grid",
    methods=["autonorm_s"],
    method_search={"autonorm_s": {"eps_h": {"type": "grid", "values": [0.05, 0.1]}, "t_freeze": 1}},
    epochs=2,
    batch_size=32,
)


def _curves(engine, study_id):
    with session_scope(engine, readonly=True) as session:
        return study_curves(session, study_id=study_id)


def _tune(engine, study_id, number, *, eps_h, value, lr=0.001):
    key = f"{study_id}/tune/autonorm_s/{number}"
    add_trial(
        engine,
        study_id,
        key,
        phase="tune",
        method="autonorm_s",
        seed=7,
        config={"knobs": {"eps_h": eps_h, "lr": lr, "tau": 0.5}},
        status="succeeded" if value is not None else "failed",
        metric_value=value,
    )
    return key


@pytest.fixture
def tuned(engine) -> str:
    """Three tune trials that vary eps_h only (lr and tau fixed), and a final trial with two epochs."""
    study_id = add_study(engine, TUNED).id
    first = _tune(engine, study_id, 0, eps_h=0.05, value=0.6)
    _tune(engine, study_id, 1, eps_h=0.1, value=0.8)
    _tune(engine, study_id, 2, eps_h=0.2, value=None)
    add_epochs(engine, study_id, first, {1: {"val_accuracy": 0.6, "gate_entropy": 0.3, "note": "text"}})
    final = f"{study_id}/final/frozen_ln/seed0"
    add_trial(engine, study_id, final, phase="final", method="frozen_ln", seed=0, metric_value=0.9)
    add_epochs(
        engine, study_id, final, {2: {"val_accuracy": 0.9}, 1: {"val_accuracy": 0.7, "train_loss": None}}
    )
    return study_id


def test_every_trial_comes_with_its_epochs_in_order_and_who_it_is(engine, tuned):
    curves = _curves(engine, tuned)
    assert curves.study_id == tuned
    assert curves.methods == ("autonorm_s", "frozen_ln")
    assert [t.label for t in curves.trials] == [
        "tune/autonorm_s/0",
        "tune/autonorm_s/1",
        "tune/autonorm_s/2",
        "final/frozen_ln/seed0",
    ]
    final = curves.trials[-1]
    assert (final.phase, final.method, final.seed, final.status, final.objective) == (
        "final",
        "frozen_ln",
        0,
        "succeeded",
        0.9,
    )
    assert [row["epoch"] for row in final.epochs] == [1, 2]
    assert final.epochs[1] == {"epoch": 2, "val_accuracy": 0.9}
    assert curves.trials[1].epochs == ()  # a trial that reported no epoch yet is still a trial


def test_the_metrics_are_every_finite_number_some_trial_reported_per_epoch(engine, tuned):
    curves = _curves(engine, tuned)
    # train_loss was only ever null and `note` is text: neither can be drawn.
    assert curves.metrics == ("gate_entropy", "val_accuracy")
    assert curves.default_metric == "val_accuracy"  # digits' primary metric, on the validation split


def test_the_searched_knobs_are_those_that_take_more_than_one_value_over_the_tuning_trials(engine, tuned):
    curves = _curves(engine, tuned)
    assert curves.tuning_phase == "tune"
    assert [t.label for t in curves.tuning_trials] == [
        "tune/autonorm_s/0",
        "tune/autonorm_s/1",
        "tune/autonorm_s/2",
    ]
    assert curves.searched_knobs == ("eps_h",)  # lr and tau are in every config, with one value each
    assert curves.tuning_trials[0].knobs == {"eps_h": 0.05, "lr": 0.001, "tau": 0.5}
    assert [t.objective for t in curves.tuning_trials] == [0.6, 0.8, None]
    assert (curves.objective, curves.higher_is_better) == ("val_accuracy", True)


def test_a_sweep_is_tuned_on_its_grid_trials_and_scored_on_the_test_split(engine):
    study_id = add_study(engine, SWEEP).id
    for seed, eps_h in ((0, 0.05), (0, 0.1)):
        add_trial(
            engine,
            study_id,
            f"{study_id}/grid/autonorm_s/eps_h={eps_h}/seed{seed}",
            phase="grid",
            method="autonorm_s",
            seed=seed,
            group=f"eps_h={eps_h}",
            config={"knobs": {"eps_h": eps_h}},
            metric_value=0.5 + eps_h,
        )
    curves = _curves(engine, study_id)
    assert curves.tuning_phase == "grid"
    assert curves.searched_knobs == ("eps_h",)
    assert curves.objective == "test_accuracy"
    assert [t.group for t in curves.tuning_trials] == ["eps_h=0.05", "eps_h=0.1"]


def test_epochs_of_a_trial_not_recorded_yet_are_left_out_until_its_row_is(engine, tuned):
    add_epochs(engine, tuned, f"{tuned}/final/dyt/seed0", {1: {"val_accuracy": 0.5}})
    assert f"{tuned}/final/dyt/seed0" not in {t.trial_key for t in _curves(engine, tuned).trials}


def test_a_study_without_trials_has_no_metrics_to_pick(engine):
    curves = _curves(engine, add_study(engine, TUNED).id)
    assert (curves.trials, curves.metrics, curves.default_metric, curves.searched_knobs) == ((), (), None, ())


def test_an_unknown_study_is_not_found(engine):
    with pytest.raises(StudyNotFoundError):
        _curves(engine, "0" * 32)
