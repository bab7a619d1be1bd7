"""A grid study (every point x seed) and an ASHA-scheduled compare study, end to end through HTTP."""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from studies.store import list_trials, make_engine, session_scope

pytestmark = pytest.mark.slow

TERMINAL = {"succeeded", "failed", "cancelled"}


def _run_to_end(service, spec: dict) -> dict:
    with service.client() as client:
        created = client.post("/studies", json=spec, headers=service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            study = client.get(f"/studies/{study_id}").json()
            if study["status"] in TERMINAL:
                return study
            time.sleep(2)
    pytest.fail(f"study {spec['name']} did not finish in 10 min:\n{service.log_tail()}")


def _trials(service, study_id):
    with session_scope(make_engine(service.database_url)) as session:
        return list_trials(session, study_id=study_id)


def test_a_grid_study_runs_every_grid_point_on_every_seed_and_reports_a_row_per_point(running_service):
    spec = {
        "name": "skip-scale-grid",
        "dataset": "digits",
        "kind": "grid",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln"],
        "search": {"skip_scale": {"type": "grid", "values": [0.5, 1.0]}, "lr": 0.005},
        "seeds": [0, 1],
        "budget": {"epochs": 2, "batch_size": 64},
    }
    study = _run_to_end(running_service, spec)
    assert study["status"] == "succeeded", study.get("error")
    trials = _trials(running_service, study["id"])
    assert sorted((t.phase, t.group, t.seed) for t in trials) == [
        ("grid", "skip_scale=0.5", 0),
        ("grid", "skip_scale=0.5", 1),
        ("grid", "skip_scale=1.0", 0),
        ("grid", "skip_scale=1.0", 1),
    ]
    assert all(t.config["knobs"]["skip_scale"] in (0.5, 1.0) for t in trials)
    with running_service.client() as client:
        table = client.get("/results/digits", params={"study": study["id"]}).json()
    assert sorted(row["group"] for row in table["rows"]) == ["skip_scale=0.5", "skip_scale=1.0"]
    assert all(row["n"] == 2 for row in table["rows"])


def test_asha_stops_weak_tuning_trials_early_and_their_mlflow_runs_are_still_closed(running_service):
    spec = {
        "name": "asha-compare",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": ["dyt"],
        "search": {"lr": {"type": "loguniform", "low": 1e-5, "high": 2e-2}},
        "num_samples": 4,
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
        # Tune seed 0 (sampler and trials) draws learning rates far enough apart that ASHA stops one.
        "seeds": [1],
        "tune_seeds": [0],
        "budget": {"epochs": 4, "batch_size": 64},
    }
    study = _run_to_end(running_service, spec)
    assert study["status"] == "succeeded", study.get("error")
    trials = _trials(running_service, study["id"])
    tune = [t for t in trials if t.phase == "tune"]
    assert len(tune) == 4 and all(t.status == "succeeded" for t in tune)
    epochs_run = sorted(int(t.metrics["epoch"]) for t in tune)
    assert epochs_run[0] < 4 <= epochs_run[-1], epochs_run  # at least one stopped early, one ran to the end
    runs = MlflowClient(running_service.mlflow_url).search_runs(
        [study["mlflow_experiment_id"]], max_results=100
    )
    children = [r for r in runs if r.data.tags.get("normlab.role") != "parent"]
    assert len(children) == 5  # 4 tuning trials + 1 final seed
    assert all(r.info.status == "FINISHED" for r in children)
    # ASHA may stop a tuning trial after any report: only the final trial trains ahead of Tune.
    configs = running_service.tune_trial_configs(study["id"])
    assert (
        sorted((c["phase"], c["may_stop_early"]) for c in configs)
        == [("final", False)] + [("tune", True)] * 4
    )
