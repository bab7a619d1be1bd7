"""A sequential design simulated with SequentialMonitor: it stops early when the effect is there, keeps its
error rate when it is not, never trains more than its maximum, and gives the same answer twice."""

from __future__ import annotations

import pytest

from studies.planning.simulate import simulate, simulations_for
from studies.spec import SequentialDesign

METHODS = ["autonorm_s", "dyt", "frozen_ln"]


def _run(design: SequentialDesign, truth: float, *, simulations: int = 400, seeds_per_trial: int = 1):
    return simulate(
        design,
        methods=METHODS,
        reference="frozen_ln",
        sd=0.01,
        truth=truth,
        seeds_per_trial=seeds_per_trial,
        simulations=simulations,
    )


def test_under_a_large_effect_a_study_stops_early_and_trains_fewer_seeds_than_its_maximum():
    design = SequentialDesign(effect=0.01, max_seeds=20, spending="pocock")
    found = _run(design, 0.02)
    assert design.first_seeds <= min(found.seeds.values())
    assert max(found.seeds.values()) < design.max_seeds - 5
    assert found.stopped_early > 0.8 and found.rejected > 0.9


def test_under_the_stated_effect_the_expected_seeds_are_below_the_maximum_and_the_power_is_near_the_target():
    design = SequentialDesign(effect=0.01, max_seeds=16)
    found = _run(design, 0.01)
    assert found.seeds["autonorm_s"] < design.max_seeds
    assert found.rejected == pytest.approx(0.85, abs=0.12)  # max_seeds 16 gives a little more than 0.8 power


def test_under_no_effect_decisions_are_rare_and_futility_stops_most_comparisons():
    found = _run(SequentialDesign(effect=0.01, max_seeds=16), 0.0)
    assert found.any_rejected < 0.1  # the family-wise alpha is 0.05; 400 studies leave room for noise
    assert found.decisions.get("futility", 0.0) > 0.5


def test_the_reference_trains_while_any_comparison_is_open_so_it_trains_the_most():
    found = _run(SequentialDesign(effect=0.01, max_seeds=16), 0.005)
    assert found.seeds["frozen_ln"] >= max(found.seeds["autonorm_s"], found.seeds["dyt"])


def test_seed_batches_count_tune_trials_per_look():
    design = SequentialDesign(effect=0.01, first_seeds=4, seeds_per_look=4, max_seeds=12)
    one, four = _run(design, 0.01, seeds_per_trial=1), _run(design, 0.01, seeds_per_trial=4)
    assert one.seeds == four.seeds  # the same decisions: batching changes processes, never seeds
    assert four.processes["dyt"] == pytest.approx(one.processes["dyt"] / 4)


def test_the_simulation_is_seeded_and_cached():
    design = SequentialDesign(effect=0.01)
    first, again = _run(design, 0.01, simulations=100), _run(design, 0.01, simulations=100)
    assert first is again  # cached per design, methods and spread
    fresh = simulate(
        design,
        methods=METHODS,
        reference="frozen_ln",
        sd=0.01,
        truth=0.01,
        seeds_per_trial=1,
        simulations=100,
        random_seed=36,
    )
    assert fresh is not first


def test_larger_families_get_fewer_but_never_too_few_studies():
    assert simulations_for(1) == 2000 and simulations_for(2) == 2000
    assert simulations_for(6) < simulations_for(3) < 2000
    assert simulations_for(100) == 500


def test_a_spread_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        simulate(
            SequentialDesign(effect=0.01),
            methods=METHODS,
            reference="frozen_ln",
            sd=0.0,
            truth=0.0,
            seeds_per_trial=1,
        )
