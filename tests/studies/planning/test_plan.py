"""A study's plan, end to end: its trials per phase, a sequential design's first look, maximum and expected
cost, and the earlier study in the store it takes its spread and its cluster's pace from."""

from __future__ import annotations

import statistics

import pytest

from studies.planning import Cluster, plan_study, read_history
from studies.spec import validate_spec_data
from studies.store import session_scope
from tests.studies.planning.specs import cifar10_paper, mnist_cpu, sequential_mnist
from tests.studies.planning.store_rows import finished_study

CPU = Cluster(cpus=2, gpus=0, source="the local Ray head")


def test_a_fixed_plan_counts_every_phase_as_the_spec_does():
    spec = validate_spec_data(mnist_cpu())
    plan = plan_study(spec, cluster=CPU)
    tune, final = plan.phases
    assert (tune.phase, tune.trials, tune.epochs_per_trial) == ("tune", {"autonorm_s": 3, "frozen_ln": 3}, 20)
    assert (final.phase, final.trials, final.seeds_per_method) == (
        "final",
        {"autonorm_s": 8, "frozen_ln": 8},
        8,
    )
    assert plan.planned.trials == spec.planned_trials() == 22
    assert plan.design == "fixed" and plan.sequential is None
    assert plan.planned.wall_hours is not None and plan.wall.source == "cpu_prior"


def test_seed_batches_make_fewer_tune_trials_but_the_same_trials():
    spec = cifar10_paper(resources={"gpu": 1, "seeds_per_trial": 4})
    (_, final) = plan_study(spec).phases
    assert final.trials == {"autonorm_s": 8, "frozen_ln": 8} and final.processes == {
        "autonorm_s": 2,
        "frozen_ln": 2,
    }


def test_a_sequential_plan_expects_fewer_seeds_than_its_maximum_under_the_effect():
    spec = sequential_mnist(effect=0.02, max_seeds=16)
    plan = plan_study(spec, cluster=CPU, simulations=300)
    sequential = plan.sequential
    assert sequential.looks == [3, 5, 7, 9, 11, 13, 15, 16]
    assert sequential.first.seeds_per_method == 3 and sequential.maximum.seeds_per_method == 16
    assert sequential.maximum == plan.planned
    effect, no_effect = sequential.scenarios
    assert (effect.name, effect.truth, no_effect.name, no_effect.truth) == ("effect", 0.02, "no_effect", 0.0)
    for scenario in sequential.scenarios:
        cost = scenario.expected
        assert (
            sequential.first.seeds_per_method <= cost.seeds_per_method < sequential.maximum.seeds_per_method
        )
        assert sequential.first.trials < cost.trials < sequential.maximum.trials
        assert sequential.first.wall_hours < cost.wall_hours < sequential.maximum.wall_hours
    assert effect.rejected > 0.7 > no_effect.rejected
    assert "300 simulated studies per scenario" in sequential.reason


def test_margin_designs_are_simulated_level_and_at_the_margin():
    plan = plan_study(sequential_mnist(test="non_inferiority", margin=0.01), cluster=CPU, simulations=200)
    level, edge = plan.sequential.scenarios
    assert (level.name, edge.name, edge.truth) == ("no_effect", "at_margin", -0.01)
    assert level.rejected > edge.rejected


def test_the_plan_takes_its_spread_and_its_pace_from_the_stored_study_and_names_it(engine):
    pilot = finished_study(
        engine,
        mnist_cpu(name="mnist pilot"),
        {"autonorm_s": [0.94, 0.96, 0.95, 0.93], "frozen_ln": [0.95, 0.95, 0.94, 0.95]},
        seconds_per_trial=90.0,
    )
    spec = sequential_mnist(test="equivalence", margin=0.01)
    with session_scope(engine, readonly=True) as session:
        history = read_history(session, spec)
    plan = plan_study(spec, history=history, cluster=CPU, simulations=200)
    named = f"mnist pilot ({pilot})"
    assert plan.spread.source == "study" and plan.spread.study == named
    assert plan.spread.sd == pytest.approx(statistics.stdev([-0.01, 0.01, 0.01, -0.02]))
    assert plan.wall.source == "history" and plan.wall.studies == [named]
    # 10 seeds per method at 90 s each (20 epochs), 3 tuning trials per method, 2 at a time.
    assert plan.sequential.maximum.wall_hours == pytest.approx((2 * 3 + 2 * 10) * 90 / 2 / 3600)
    assert "sd 0.015 (study)" in plan.fixed.reason
