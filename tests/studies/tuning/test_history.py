"""The optimisation history: every tune trial in start order with its objective, and the best so far in
the objective's direction; trials with no objective carry the best on; the best is the first on a tie."""

from __future__ import annotations

from studies.tuning import TuningTrial
from studies.tuning.history import optimisation_history


def trial(i: int, value: float | None, status: str = "succeeded") -> TuningTrial:
    return TuningTrial(
        f"t{i}", "autonorm_s", 3, status, value, {"lr": 0.001 * (i + 1), "tau": 0.5}, epochs=i + 1
    )


def test_values_in_start_order_with_the_best_so_far_of_a_higher_is_better_objective():
    history = optimisation_history(
        [trial(0, 0.7), trial(1, 0.6), trial(2, 0.8), trial(3, 0.75)], ["lr"], higher_is_better=True
    )
    assert [p.value for p in history.points] == [0.7, 0.6, 0.8, 0.75]
    assert [p.best_so_far for p in history.points] == [0.7, 0.7, 0.8, 0.8]
    assert history.best_number == 2
    assert history.points[2].params == {"lr": 0.003}  # the swept knobs only
    assert [p.epochs for p in history.points] == [1, 2, 3, 4]


def test_a_lower_is_better_objective_keeps_the_lowest():
    history = optimisation_history(
        [trial(0, 2.0), trial(1, 1.5), trial(2, 1.8)], ["lr"], higher_is_better=False
    )
    assert [p.best_so_far for p in history.points] == [2.0, 1.5, 1.5]
    assert history.best_number == 1


def test_failed_and_running_trials_have_no_value_and_carry_the_best_on():
    history = optimisation_history(
        [trial(0, None, "failed"), trial(1, 0.5, "running"), trial(2, 0.6), trial(3, float("nan"))],
        ["lr"],
        higher_is_better=True,
    )
    assert [p.value for p in history.points] == [None, None, 0.6, None]
    assert [p.best_so_far for p in history.points] == [None, None, 0.6, 0.6]
    assert [p.status for p in history.points] == ["failed", "running", "succeeded", "succeeded"]


def test_the_best_is_the_first_on_a_tie_as_the_driver_picks_it():
    history = optimisation_history(
        [trial(0, 0.5), trial(1, 0.7), trial(2, 0.7)], ["lr"], higher_is_better=True
    )
    assert history.best_number == 1


def test_no_scored_trial_has_no_best():
    history = optimisation_history([trial(0, None, "failed")], ["lr"], higher_is_better=True)
    assert history.best_number is None and history.points[0].best_so_far is None
