"""GPU-hours: a plan prices a study as studies/catalog/cost.py does, divides by a speed-up only where
BENCHMARKS.md measured the spec's way of running trials, and says so either way."""

from __future__ import annotations

import pytest

from studies.catalog import cost
from studies.planning import plan_study
from studies.planning.gpu_price import gpu_price
from studies.planning.speedups import GATED_METHODS, MEASURED_SPEEDUPS, speedup, trials_per_gpu
from studies.spec import validate_spec_data
from tests.studies.planning.specs import cifar10_paper, mnist_cpu


def test_the_rate_families_are_the_cost_models():
    assert frozenset(cost._GATED) == GATED_METHODS


def test_one_eager_trial_at_a_time_the_plan_costs_what_the_cost_model_predicts():
    spec = cifar10_paper(resources={"gpu": 1, "seeds_per_trial": 1})
    planned = plan_study(spec).planned
    assert planned.gpu_hours == pytest.approx(cost.predicted_gpu_cost(spec).hours_with_asha)
    without_asha = cifar10_paper(scheduler="none", resources={"gpu": 1, "seeds_per_trial": 1})
    assert plan_study(without_asha).planned.gpu_hours == pytest.approx(
        cost.predicted_gpu_cost(without_asha).hours_no_stopping
    )


def test_a_measured_seed_batch_divides_the_final_phase_and_leaves_tuning_alone():
    eager = cifar10_paper(resources={"gpu": 1, "seeds_per_trial": 1})
    stacked = cifar10_paper(resources={"gpu": 1, "seeds_per_trial": 8})  # its 8 seeds in one trial
    eager_price, stacked_price = gpu_price(eager, final_stacked=1), gpu_price(stacked, final_stacked=8)
    for method, family in (("frozen_ln", "frozen_ln"), ("autonorm_s", "autonorm_s")):
        factor = MEASURED_SPEEDUPS[(family, 8, "none", 1)]
        assert stacked_price.per_seed_epoch[("final", method)] == pytest.approx(
            eager_price.per_seed_epoch[("final", method)] / factor
        )
        assert stacked_price.per_seed_epoch[("tune", method)] == eager_price.per_seed_epoch[("tune", method)]
    assert stacked_price.pricing.provenance == "measured"  # the benchmark's own model, images and batch
    assert any("2.7x one eager trial (measured as is)" in line for line in stacked_price.pricing.basis)


def test_an_unmeasured_way_of_running_trials_is_priced_as_one_eager_trial_and_says_so():
    spec = cifar10_paper(resources={"gpu": 0.5, "seeds_per_trial": 5})
    found = speedup(spec, "frozen_ln", stacked=5, phase="final")
    assert found.factor == 1.0 and "not measured" in found.note and "2 per GPU" in found.note


def test_packing_follows_the_gpu_share_and_is_unknown_under_auto_outside_the_benchmark():
    assert trials_per_gpu(cifar10_paper(resources={"gpu": 0.25}), stacked=1) == 4
    assert trials_per_gpu(cifar10_paper(resources={"gpu": "auto"}), stacked=8) == 8  # as measured
    other_model = cifar10_paper(model={"preset": "vit_lite_paper", "overrides": {"depth": 4}})
    assert trials_per_gpu(other_model, stacked=8) is None


def test_extrapolated_rates_are_labelled_extrapolated():
    deeper = cifar10_paper(model={"preset": "vit_lite_paper", "overrides": {"depth": 12}})
    pricing = plan_study(deeper).gpu
    assert pricing.provenance == "extrapolated" and pricing.gpu == "NVIDIA H200"


def test_without_a_measured_rate_there_is_no_prediction_and_the_plan_says_why():
    plan = plan_study(validate_spec_data(mnist_cpu()))
    assert plan.planned.gpu_hours is None and plan.gpu.provenance == "none"
    assert plan.gpu.basis == [
        "no GPU step time has been measured for vit_lite_tiny on mnist_5k: no prediction"
    ]
