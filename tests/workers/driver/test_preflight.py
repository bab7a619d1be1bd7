"""Driver preflight: trials must fit on a node, a short tracking outage must not fail a study, and the trial
config gets the study's checkpoint interval."""

from __future__ import annotations

import pytest

from studies.spec import StudySpec
from tests.factories import digits_spec
from workers.driver import study as driver_study
from workers.trials.plan import TrialPlan

SPEC = digits_spec(name="fit", methods=["frozen_ln"], seeds=[0])


def _plan(*, cpu: float, gpu: float) -> TrialPlan:
    return TrialPlan(cpu=cpu, gpu=gpu, seeds_per_trial=1, gpu_reason="test")


def _nodes(*resources):
    return [{"Alive": True, "Resources": r} for r in resources] + [
        {"Alive": False, "Resources": {"GPU": 8.0}}
    ]


def test_a_trial_that_fits_on_one_alive_node_passes(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}, {"CPU": 8.0, "GPU": 1.0}))
    driver_study.check_cluster_fits(_plan(cpu=4, gpu=0.5))


def test_a_gpu_trial_on_a_cpu_only_cluster_fails_naming_the_largest_node_and_the_fix(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}))
    with pytest.raises(RuntimeError, match=r"largest node: 2 CPU, 0 GPU.*lower `resources`"):
        driver_study.check_cluster_fits(_plan(cpu=1, gpu=0.25))


def test_resources_spread_over_two_nodes_do_not_count_as_one_node(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}, {"CPU": 2.0}))
    with pytest.raises(RuntimeError, match="no Ray node can run a trial"):
        driver_study.check_cluster_fits(_plan(cpu=3, gpu=0.0))


def test_a_short_tracking_outage_is_ridden_out_and_a_long_one_fails_with_what_was_attempted(monkeypatch):
    monkeypatch.setattr(driver_study.time, "sleep", lambda s: None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("connection refused")
        return "parent"

    assert driver_study._with_retries(flaky, what="reach MLflow") == "parent" and len(calls) == 3

    def down():
        raise ConnectionError("connection refused")

    with pytest.raises(RuntimeError, match=r"could not reach MLflow after 4 attempts: connection refused"):
        driver_study._with_retries(down, what="reach MLflow", attempts=4)


def test_auto_gpu_measures_a_trial_on_a_gpu_node_and_packs_by_its_peak(monkeypatch):
    spec = StudySpec.model_validate(
        {**SPEC, "methods": ["frozen_ln", "dyt"], "seeds": [0, 1, 2], "resources": {"cpu": 1}}
    )
    monkeypatch.setattr(driver_study.ray, "cluster_resources", lambda: {"CPU": 16.0, "GPU": 1.0})
    probed = []

    class Task:
        def remote(self, config):
            probed.append(config)
            # dyt peaks higher here: the plan packs by the larger of the two.
            return (6 if config["method"] == "dyt" else 2) * 2**30, 140 * 2**30

    monkeypatch.setattr(driver_study.ray, "remote", lambda **resources: lambda fn: Task())
    monkeypatch.setattr(driver_study.ray, "get", lambda refs: refs)
    plan = driver_study.plan_study_trials(spec, {"study_id": "s1", "dataset": "digits"})
    assert [c["method"] for c in probed] == ["frozen_ln", "dyt"]
    assert all(c["seeds"] == [0, 1, 2] for c in probed)  # the seed batch the study will run
    assert plan.seeds_per_trial == 3 and plan.gpu == 0.125  # 6 GiB * 1.25 + context: 8 per GPU, the cap


def test_auto_gpu_on_a_cpu_cluster_is_a_cpu_trial_of_one_seed_without_measuring(monkeypatch):
    spec = StudySpec.model_validate({**SPEC, "seeds": [0, 1, 2]})
    monkeypatch.setattr(driver_study.ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(driver_study.ray, "remote", lambda **resources: pytest.fail("nothing to measure"))
    plan = driver_study.plan_study_trials(spec, {})
    assert (plan.gpu, plan.seeds_per_trial) == (0.0, 1)


def test_a_trials_checkpoint_interval_is_the_study_budgets_else_the_services():
    from workers.settings import WorkerSettings

    service = WorkerSettings.from_env({"NORMLAB_CHECKPOINT_EVERY_S": "30"})
    assert driver_study.checkpoint_interval_s(StudySpec.model_validate(SPEC), service) == 30.0
    every_epoch = StudySpec.model_validate({**SPEC, "budget": {**SPEC["budget"], "checkpoint_every_s": 0}})
    assert driver_study.checkpoint_interval_s(every_epoch, service) == 0.0
