"""Trial processes are reused: a compare study is one Tune experiment that reuses them with every slot in
flight, grid studies reuse them too, and a reused process waits for its previous trial's clean exit
(unit tests of workers.driver)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workers.trials.trainable
from studies.spec import StudySpec
from tests.factories import digits_spec
from tests.workers.driver.conftest import Stop
from workers.driver import study as driver_study
from workers.driver.method_search import StudySearch
from workers.trials import entry as trainable_entry
from workers.trials.plan import TrialPlan

SPEC = digits_spec(
    name="reuse",
    methods=["frozen_ln", "dyt", "autonorm_s"],
    search={"lr": 0.005},
    method_search={
        "dyt": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
        "autonorm_s": {"t_freeze": {"type": "int", "low": 1, "high": 2}},
    },
    num_samples=3,
    epochs=3,
)
CPU_PLAN = TrialPlan(cpu=1.0, gpu=0.0, seeds_per_trial=1, gpu_reason="test")
METRIC = driver_study.MetricInfo(name="accuracy", higher_is_better=True)
CTX = driver_study.DriverContext(
    engine=None, database_url="sqlite://", mlflow_tracking_uri="http://mlflow.test", results_dir=Path("/r")
)


def test_a_compare_study_is_one_experiment_that_reuses_processes_and_fills_every_slot(tuners):
    spec = StudySpec.model_validate(SPEC)
    with pytest.raises(Stop):
        driver_study._run_compare(
            spec, CPU_PLAN, CTX, {"study_id": "s1"}, metric=METRIC, client=None, parent=None
        )
    (tuner,) = tuners
    config = tuner["tune_config"]
    assert tuner["path"] == Path("/r/study")
    assert config.reuse_actors and config.max_concurrent_trials == 2
    assert isinstance(config.search_alg, StudySearch)
    # dyt and autonorm_s tune 3 samples each; frozen_ln has nothing to search: its finals follow at once.
    assert config.num_samples == 3 * 2 + 6
    suggested = [config.search_alg.suggest(f"t{i}") for i in range(8)]
    assert [(s["method"], s["phase"]) for s in suggested] == [("dyt", "tune")] * 3 + [
        ("autonorm_s", "tune")
    ] * 3 + [("frozen_ln", "final")] * 2
    assert tuner["param_space"] == {"study_id": "s1"}  # method, phase, seed and knobs come per trial


def test_a_grid_study_reuses_processes_too(tuners):
    spec = StudySpec.model_validate(SPEC)
    variants = [{"method": "dyt", "group": "lr=0.001", "knobs": {"lr": 1e-3}, "seed": s} for s in spec.seeds]
    with pytest.raises(Stop):
        driver_study._run_variants(
            spec, CPU_PLAN, CTX, {}, variants, phase="grid", metric=METRIC, client=None, parent=None
        )
    assert tuners[0]["tune_config"].reuse_actors


def test_a_seed_batched_compare_study_suggests_one_final_trial_per_seed_batch(tuners):
    spec = StudySpec.model_validate(
        {**SPEC, "methods": ["frozen_ln"], "method_search": {}, "seeds": [0, 1, 2]}
    )
    plan = TrialPlan(cpu=1.0, gpu=0.5, seeds_per_trial=2, gpu_reason="test")
    with pytest.raises(Stop):
        driver_study._run_compare(
            spec, plan, CTX, {"study_id": "s1"}, metric=METRIC, client=None, parent=None
        )
    search = tuners[0]["tune_config"].search_alg
    assert tuners[0]["tune_config"].num_samples == 2
    finals = [search.suggest(f"t{i}") for i in range(2)]
    assert [(c.get("seeds"), c["seed"]) for c in finals] == [([0, 1], 0), (None, 2)]


@pytest.mark.parametrize(
    "resources, cluster, expected",
    [
        ((1, 0), {"CPU": 2.0}, 2),
        ((2, 0), {"CPU": 5.0}, 2),
        ((1, 0.5), {"CPU": 16.0, "GPU": 1.0}, 2),
        ((1, 0.1), {"CPU": 16.0, "GPU": 0.3}, 3),
        ((4, 0), {"CPU": 2.0}, 1),  # never below one (check_cluster_fits refuses what cannot run)
    ],
)
def test_concurrent_trials_is_what_the_cluster_runs_at_once(monkeypatch, resources, cluster, expected):
    monkeypatch.setattr(driver_study.ray, "is_initialized", lambda: True)
    monkeypatch.setattr(driver_study.ray, "cluster_resources", lambda: cluster)
    cpu, gpu = resources
    plan = TrialPlan(cpu=cpu, gpu=gpu, seeds_per_trial=1, gpu_reason="test")
    assert driver_study.concurrent_trials(plan) == expected


def test_concurrent_trials_is_unknown_without_ray(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "is_initialized", lambda: False)
    assert driver_study.concurrent_trials(CPU_PLAN) is None


@pytest.mark.filterwarnings("ignore:`get_trial_id` is meant")  # outside a Tune session: no trial id needed
def test_a_trial_process_waits_for_the_previous_trials_exit_before_tune_hands_it_the_next(monkeypatch):
    monkeypatch.delenv("TUNE_FUNCTION_THREAD_TIMEOUT_S", raising=False)
    seen = {}
    monkeypatch.setattr(workers.trials.trainable, "train_trial", lambda config: seen.update(config))
    config = {"study_id": "s1", "phase": "final", "variant": {"method": "dyt", "seed": 1, "group": None}}
    trainable_entry.study_trial(config)
    assert os.environ["TUNE_FUNCTION_THREAD_TIMEOUT_S"] == str(trainable_entry.REUSE_WAIT_S)
    assert seen["trial_key"] == "s1/final/dyt/seed1" and "group" not in seen
