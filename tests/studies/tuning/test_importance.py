"""Knob importance by Optuna's fANOVA and PED-ANOVA: the knob that drives the objective comes first, the
spread is over what the output says it is over, and too few trials or a knob that never varied give a
reason, never a number."""

from __future__ import annotations

import math

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from studies.tuning import (
    FANOVA_SEEDS,
    MIN_TRIALS,
    PED_ANOVA_MIN_TRIALS,
    TuningTrial,
    method_importance,
)
from tests.studies.tuning.synthetic import grid_trials, tune_trials

SPACE = {
    "lr": FloatDistribution(1e-4, 1e-2, log=True),
    "eps_h": FloatDistribution(0.05, 0.2),
    "t_freeze": IntDistribution(2, 20),
}
DRAWS = {
    "lr": lambda rng: float(10 ** rng.uniform(-4, -2)),
    "eps_h": lambda rng: float(rng.uniform(0.05, 0.2)),
    "t_freeze": lambda rng: int(rng.integers(2, 21)),
}


def lr_drives(knobs) -> float:
    """Accuracy peaks at lr 1e-3 and falls off fast; eps_h and T_freeze do nothing."""
    return 0.9 - 0.2 * abs(math.log10(knobs["lr"]) + 3)


def by_evaluator(importance):
    return {e.evaluator: e for e in importance.evaluators}


def test_the_knob_that_drives_the_objective_gets_most_of_both_evaluators_importance():
    importance = method_importance(tune_trials(lr_drives, DRAWS, 30), SPACE, higher_is_better=True)
    assert importance.reason is None and importance.trials == 30
    assert importance.knobs == ("lr", "eps_h", "t_freeze")
    for evaluator in importance.evaluators:
        first = evaluator.knobs[0]
        assert first.knob == "lr" and first.importance > 0.5, evaluator
        # Each fit's shares sum to 1 over the assessed knobs, so their means do too.
        assert sum(k.importance for k in evaluator.knobs) == pytest.approx(1.0)


def test_a_lower_is_better_objective_reads_the_same_knob():
    trials = tune_trials(lambda k: -lr_drives(k), DRAWS, 30)  # a loss: the same knob, the other way
    importance = method_importance(trials, SPACE, higher_is_better=False)
    assert {e.evaluator: e.knobs[0].knob for e in importance.evaluators} == {
        "fanova": "lr",
        "ped_anova": "lr",
    }


def test_on_one_trial_seed_fanovas_spread_is_over_its_forest_seeds_and_ped_anova_has_none():
    fanova, ped_anova = (
        by_evaluator(method_importance(tune_trials(lr_drives, DRAWS, 12), SPACE, higher_is_better=True))[name]
        for name in ("fanova", "ped_anova")
    )
    assert fanova.fits == len(FANOVA_SEEDS) and "forest seeds" in (fanova.spread_over or "")
    assert fanova.settings["seeds"] == list(FANOVA_SEEDS)
    for knob in fanova.knobs:
        assert knob.low <= knob.importance <= knob.high and knob.sd is not None
    assert ped_anova.fits == 1 and ped_anova.spread_over is None
    assert all(k.sd is None and k.low == k.importance == k.high for k in ped_anova.knobs)
    # Optuna's 10 % of 12 trials is 1: raised so the best trials are at least 2.
    assert ped_anova.settings["target_quantile"] == [round(2 / 12, 4)]


def test_a_sweep_on_several_seeds_spreads_both_evaluators_over_the_trial_seeds():
    def objective(knobs, seed):
        return 0.9 - 20.0 * (knobs["eps_h"] - 0.1) ** 2 + 0.001 * knobs["t_freeze"] + 0.003 * seed

    grid = {"t_freeze": [5, 10, 20], "eps_h": [0.05, 0.1, 0.2]}
    space = {"t_freeze": IntDistribution(5, 20), "eps_h": FloatDistribution(0.05, 0.2)}
    importance = method_importance(
        grid_trials(objective, grid), space, higher_is_better=True, what="grid trials"
    )
    for evaluator in importance.evaluators:
        assert evaluator.fits == 3 and (evaluator.spread_over or "").startswith("trial seeds (0, 1, 2)")
        assert evaluator.knobs[0].knob == "eps_h"


def test_fewer_than_the_minimum_of_completed_trials_is_a_reason_and_no_number():
    trials = tune_trials(lr_drives, DRAWS, MIN_TRIALS)
    trials[0] = TuningTrial("failed", "autonorm_s", 3, "failed", None, trials[0].knobs)
    trials[1] = TuningTrial("running", "autonorm_s", 3, "running", 0.5, trials[1].knobs)
    importance = method_importance(trials, SPACE, higher_is_better=True)
    assert importance.evaluators == () and importance.knobs == ()
    assert importance.trials == MIN_TRIALS - 2
    assert importance.reason == (
        f"not enough tune trials: {MIN_TRIALS - 2} completed with a finite objective "
        f"(knob importance needs at least {MIN_TRIALS})"
    )


def test_a_knob_with_one_value_in_the_spec_or_in_every_trial_is_omitted_with_why():
    space = {
        **SPACE,
        "tau": CategoricalDistribution([0.5]),
        "placement": CategoricalDistribution(["pre", "post"]),
    }
    draws = {**DRAWS, "tau": lambda rng: 0.5, "placement": lambda rng: "pre"}
    importance = method_importance(tune_trials(lr_drives, draws, 12), space, higher_is_better=True)
    assert importance.omitted == {
        "tau": "one value in the spec: nothing to attribute to it",
        "placement": "every completed trial ran with the same value ('pre')",
    }
    assert set(importance.knobs) == {"lr", "eps_h", "t_freeze"}
    assert all({k.knob for k in e.knobs} == set(importance.knobs) for e in importance.evaluators)


def test_one_swept_knob_has_all_the_importance_by_construction_so_no_evaluator_runs():
    importance = method_importance(
        tune_trials(lr_drives, {"lr": DRAWS["lr"]}, 10), {"lr": SPACE["lr"]}, higher_is_better=True
    )
    assert importance.evaluators == ()
    assert importance.reason == "one swept knob (lr): its share of the importance is 1 by construction"


def test_an_objective_that_never_moved_is_a_reason_not_equal_shares():
    importance = method_importance(
        tune_trials(lambda k: 0.5, DRAWS, 10, noise=0.0), SPACE, higher_is_better=True
    )
    assert importance.evaluators == ()
    assert (
        importance.reason
        == "the objective was the same in all 10 completed tune trials: no knob explains any of it"
    )


def test_ped_anova_needs_its_best_trials_and_more_while_fanova_already_reads_three():
    importance = method_importance(
        tune_trials(lr_drives, DRAWS, PED_ANOVA_MIN_TRIALS - 1), SPACE, higher_is_better=True
    )
    fanova, ped_anova = by_evaluator(importance)["fanova"], by_evaluator(importance)["ped_anova"]
    assert len(fanova.knobs) == 3 and fanova.reason is None
    assert ped_anova.knobs == () and ped_anova.fits == 0
    assert ped_anova.reason is not None and f"at least {PED_ANOVA_MIN_TRIALS}" in ped_anova.reason


def test_a_seed_whose_objective_never_moved_is_left_out_of_the_spread_and_the_text_says_so():
    def objective(knobs, seed):
        return 0.5 if seed == 2 else 0.9 - 20.0 * (knobs["eps_h"] - 0.1) ** 2 + 0.001 * knobs["t_freeze"]

    grid = {"t_freeze": [5, 10, 20], "eps_h": [0.05, 0.1, 0.2]}
    space = {"t_freeze": IntDistribution(5, 20), "eps_h": FloatDistribution(0.05, 0.2)}
    fanova = by_evaluator(method_importance(grid_trials(objective, grid), space, higher_is_better=True))[
        "fanova"
    ]
    assert fanova.fits == 2
    assert (fanova.spread_over or "").endswith("; seed 2 left out (no effect found)")


def test_trials_whose_knobs_lie_outside_the_spec_are_counted_and_not_read():
    trials = tune_trials(lr_drives, DRAWS, 10)
    trials.append(
        TuningTrial("edited", "autonorm_s", 3, "succeeded", 0.8, {"lr": 0.5, "eps_h": 0.1, "t_freeze": 4})
    )
    trials.append(TuningTrial("no knob", "autonorm_s", 3, "succeeded", 0.8, {"lr": 1e-3}))
    importance = method_importance(trials, SPACE, higher_is_better=True)
    assert importance.trials == 10 and importance.skipped_trials == 2
