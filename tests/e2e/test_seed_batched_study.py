"""resources.seeds_per_trial end to end: seeds trained together in one trial are still one trial each in
the database, in MLflow and in /results."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from studies.store import make_engine, session_scope, study_histories
from tests.e2e.test_grid_and_asha_studies import _run_to_end, _trials

pytestmark = pytest.mark.slow


def test_seed_batched_final_trials_give_every_seed_its_own_row_history_run_and_result(running_service):
    spec = {
        "name": "seed-batched",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln", "dyt"],
        "search": {"lr": 0.005},
        "seeds": [0, 1, 2],
        "budget": {"epochs": 2, "batch_size": 64},
        "resources": {"seeds_per_trial": 2},  # per method: seeds 0+1 in one trial, seed 2 in another
    }
    study = _run_to_end(running_service, spec)
    assert study["status"] == "succeeded", study.get("error")
    trials = _trials(running_service, study["id"])
    assert sorted((t.method, t.seed) for t in trials) == [
        (m, s) for m in ("dyt", "frozen_ln") for s in (0, 1, 2)
    ]
    assert all(t.status == "succeeded" and t.trial_key.endswith(f"/seed{t.seed}") for t in trials)
    assert all(t.config["seed"] == t.seed for t in trials)
    batched = {t.seed: t for t in trials if t.method == "dyt"}
    assert batched[0].metric_value != batched[1].metric_value  # each seed's own metric, not the batch mean

    with session_scope(make_engine(running_service.database_url)) as session:
        histories = study_histories(session, study_id=study["id"])
    assert all([row["epoch"] for row in histories[t.trial_key]] == [0, 1, 2] for t in trials)

    client = MlflowClient(running_service.mlflow_url)
    runs = client.search_runs([study["mlflow_experiment_id"]], max_results=100)
    parent = next(r for r in runs if r.data.tags.get("normlab.role") == "parent")
    assert "2 seed(s) per final/grid trial" in parent.data.tags["normlab.trial_plan"]
    children = {
        r.data.tags["normlab.trial_key"]: r for r in runs if r.data.tags.get("normlab.role") != "parent"
    }
    assert set(children) == {t.trial_key for t in trials}
    for t in trials:
        run = children[t.trial_key]
        assert run.info.status == "FINISHED" and run.data.tags["normlab.seed"] == str(t.seed)
        assert run.data.metrics["test_accuracy"] == pytest.approx(t.metric_value)
        assert t.mlflow_run_id == run.info.run_id

    with running_service.client() as http:
        table = http.get("/results/digits", params={"study": study["id"]}).json()
    assert sorted((row["method"], row["n"]) for row in table["rows"]) == [("dyt", 3), ("frozen_ln", 3)]
