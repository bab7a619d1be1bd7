"""Predicted GPU-hours of paper-size studies: computed from the measured H200 step rates, labelled
extrapolated wherever the study differs from what was measured, and absent where nothing was measured."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from studies.catalog import load_catalog_spec, spec_path
from studies.catalog.cost import final_trial_hours, predicted_gpu_cost, tune_phase_hours
from studies.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def _spec(**changes):
    data = yaml.safe_load(spec_path("cifar10_c_robustness", "paper").read_text())
    data.update(changes)
    return load_spec(yaml.safe_dump(data))


def test_a_study_of_the_measured_configuration_is_costed_from_the_measured_rates():
    spec = load_catalog_spec("cifar10_c_robustness", "paper")
    assert spec.methods == ["autonorm_s", "frozen_ln"] and spec.dataset == "cifar10_c_hendrycks"
    cost = predicted_gpu_cost(spec)
    assert cost.measured
    trials = 16 + len(spec.seeds)  # per method: tuning samples, then the final seeds
    seconds = trials * 200 * 50_000 * (1 / 5260 + 1 / 2278)
    assert cost.hours_no_stopping == pytest.approx(seconds / 3600)


def test_asha_shortens_only_the_tuning_trials():
    spec = load_catalog_spec("cifar10_c_robustness", "paper")  # grace 20, factor 3, 200 epochs
    cost = predicted_gpu_cost(spec)
    # rungs at 20, 60, 180: 20 + 40/3 + 120/9 + 20/27 epochs per tuning trial
    tune_epochs = 20 + 40 / 3 + 120 / 9 + 20 / 27
    final = len(spec.seeds) * 200
    expected = (16 * tune_epochs + final) * 50_000 * (1 / 5260 + 1 / 2278) / 3600
    assert cost.hours_with_asha == pytest.approx(expected)


def test_methods_and_sizes_that_were_not_measured_are_labelled_extrapolated():
    assert not predicted_gpu_cost(_spec(methods=["autonorm_s", "frozen_ln", "dyt"])).measured
    deeper = _spec(model={"preset": "vit_lite_paper", "overrides": {"depth": 16}})
    assert not predicted_gpu_cost(deeper).measured
    assert predicted_gpu_cost(deeper).hours_no_stopping == pytest.approx(
        2 * predicted_gpu_cost(_spec()).hours_no_stopping
    )


def test_a_backbone_never_timed_on_a_gpu_gets_no_prediction():
    cost = predicted_gpu_cost(load_catalog_spec("sst2_autonorm_s_beats_frozen_ln", "paper"))
    assert cost.hours_no_stopping is None and not cost.measured
    assert "no GPU step time has been measured" in cost.basis[0]


def test_a_study_costs_its_tune_phase_plus_each_final_seed_at_its_methods_price():
    spec = load_catalog_spec("cifar10_c_robustness", "paper")
    per_seed = final_trial_hours(spec)
    assert per_seed == pytest.approx(
        {"autonorm_s": 200 * 50_000 / 2278 / 3600, "frozen_ln": 200 * 50_000 / 5260 / 3600}
    )
    # What a design that trains fewer seeds of some methods (a sequential one) is priced from.
    whole = tune_phase_hours(spec) + len(spec.seeds) * sum(per_seed.values())
    assert whole == pytest.approx(predicted_gpu_cost(spec).hours_with_asha)


def test_a_grid_study_has_no_tune_phase_and_prices_a_seed_of_every_point():
    spec = load_catalog_spec("autonorm_s_freeze_sweep", "paper")
    assert spec.kind == "grid" and tune_phase_hours(spec) == 0.0
    total = len(spec.seeds) * sum(final_trial_hours(spec).values())
    assert total == pytest.approx(predicted_gpu_cost(spec).hours_no_stopping)


def test_a_backbone_never_timed_has_no_price_per_seed_either():
    spec = load_catalog_spec("sst2_autonorm_s_beats_frozen_ln", "paper")
    assert final_trial_hours(spec) is None and tune_phase_hours(spec) is None


def test_the_committed_cost_table_is_up_to_date():
    module_spec = importlib.util.spec_from_file_location("paper_costs", REPO / "scripts" / "paper_costs.py")
    paper_costs = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(paper_costs)
    assert paper_costs.main(["--check"]) == 0, "run python scripts/paper_costs.py"
