"""GET /studies/{id} carries the trial plan its driver resolved when it started (CPUs and GPU per trial,
seeds per trial, compile mode, the plan in words); null before the driver planned, and in the listing."""

from __future__ import annotations

from studies.store import session_scope, set_study_trial_plan
from tests.factories import submit
from workers.trials.plan import plan_trials


def _no_gpu(k: int) -> tuple[int, int]:
    raise AssertionError("a cluster without a GPU measures no peak")


def test_a_started_study_says_how_its_driver_planned_its_trials(client, app_engine):
    study_id = submit(client)
    assert client.get(f"/studies/{study_id}").json()["trial_plan"] is None  # its driver has not started

    plan = plan_trials(
        cpu=1.0,
        gpu="auto",
        seeds_per_trial="auto",
        compile_mode="none",
        num_seeds=3,
        cluster_gpus=0.0,
        measure_peak=_no_gpu,
    )
    with session_scope(app_engine) as session:
        set_study_trial_plan(session, study_id=study_id, plan=plan.to_dict())

    trial_plan = client.get(f"/studies/{study_id}").json()["trial_plan"]
    assert trial_plan["cpu"] == 1.0 and trial_plan["gpu"] == 0.0
    assert trial_plan["seeds_per_trial"] == plan.seeds_per_trial and trial_plan["compile"] == "none"
    assert trial_plan["gpu_reason"] == "auto: the cluster has no GPU"
    assert trial_plan["describe"] == plan.describe() and trial_plan["throughput"] is None
    [listed] = client.get("/studies").json()
    assert listed["trial_plan"] is None  # the listing reads no plans
