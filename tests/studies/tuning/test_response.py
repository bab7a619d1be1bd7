"""A sweep's response to one knob: within each seed the mean over the other knobs' values, then the mean
and t interval over seeds; the trials behind each value are kept."""

from __future__ import annotations

import pytest

from studies.tuning import TuningTrial
from studies.tuning.response import knob_response
from tests.studies.tuning.synthetic import grid_trials


def test_each_value_is_the_mean_over_seeds_of_the_mean_over_the_other_knobs():
    def objective(knobs, seed):
        return knobs["eps_h"] * 10 + knobs["t_freeze"] / 100 + seed / 10

    trials = grid_trials(objective, {"t_freeze": [5, 10], "eps_h": [0.1, 0.2]}, seeds=(0, 1, 2))
    response = knob_response(trials, "eps_h", [0.1, 0.2], confidence=0.95)
    assert [p.value for p in response.points] == [0.1, 0.2]
    low, high = response.points
    # Per seed: eps_h 0.1 -> 1 + 0.075 + seed / 10; over seeds 0, 1, 2 the mean adds 0.1.
    assert low.objective.mean == pytest.approx(1.175) and high.objective.mean == pytest.approx(2.175)
    assert low.objective.n == 3 and len(low.trials) == 6
    assert low.objective.ci_low < low.objective.mean < low.objective.ci_high


def test_one_seed_gives_a_mean_and_no_interval_and_a_value_without_trials_gives_neither():
    trials = [
        TuningTrial("a", "m", 0, "succeeded", 0.5, {"tau": 0.5}),
        TuningTrial("b", "m", 0, "failed", None, {"tau": 1.0}),
    ]
    response = knob_response(trials, "tau", [0.5, 1.0], confidence=0.95)
    at_half, at_one = response.points
    assert at_half.objective.mean == 0.5 and at_half.objective.ci_low is None
    assert at_one.objective.n == 0 and at_one.objective.mean is None and at_one.trials == ()


def test_true_is_not_one_and_null_is_only_null():
    trials = [
        TuningTrial("a", "m", 0, "succeeded", 0.1, {"k": True}),
        TuningTrial("b", "m", 0, "succeeded", 0.2, {"k": 1}),
        TuningTrial("c", "m", 0, "succeeded", 0.3, {"k": None}),
    ]
    response = knob_response(trials, "k", [True, 1, None], confidence=0.95)
    assert [p.objective.mean for p in response.points] == [0.1, 0.2, 0.3]
