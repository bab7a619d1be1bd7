"""The study's MLflow experiment opens in MLflow 3's model-training view, and when the study ends its parent
run holds the results table and the evidence figures (against the real tracking server)."""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from studies.store import make_engine, session_scope, upgrade_database
from tests.factories import add_epochs, add_study, add_trial, digits_spec
from workers.driver.parent_run import (
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    ensure_parent_run,
    experiment_name,
    log_results_artifacts,
)

SPEC = digits_spec(name="artifacts", methods=["autonorm", "frozen_ln"], epochs=2, batch_size=32)


@pytest.fixture
def client(mlflow_server) -> MlflowClient:
    return MlflowClient(mlflow_server)


@pytest.fixture
def finished_study(tmp_path):
    """A study whose final trials and per-epoch histories are in the database."""
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    with session_scope(engine) as session:
        study_id = add_study(session, SPEC).id
        for method in SPEC["methods"]:
            for seed in SPEC["seeds"]:
                key = f"{study_id}/final/{method}/seed{seed}"
                gates = {"gate_dyt_weight_0": 0.2, "gate_entropy_0": 0.3} if method == "autonorm" else {}
                add_trial(
                    session,
                    study_id,
                    key,
                    method=method,
                    config={"method": method, "seed": seed},
                    seed=seed,
                    metrics={"test_accuracy": 0.9 + seed / 100, **gates},
                    metric_value=0.9 + seed / 100,
                )
                first = {"objective": 0.1, "init_erank_jacobian": 0.5 + seed / 10, **gates}
                add_epochs(session, study_id, key, {0: first, 1: gates})
    yield engine, study_id
    engine.dispose()


def test_a_new_experiment_is_tagged_for_the_model_training_view(client):
    study_id = uuid.uuid4().hex
    parent = ensure_parent_run(client, study_id=study_id, study_name="kind", dataset="digits", spec={})
    experiment = client.get_experiment(parent.experiment_id)
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"


def test_an_experiment_created_before_the_tag_gets_it_when_the_driver_finds_it_again(client):
    study_id = uuid.uuid4().hex
    experiment_id = client.create_experiment(experiment_name("old", study_id))
    parent = ensure_parent_run(client, study_id=study_id, study_name="old", dataset="digits", spec={})
    assert parent.experiment_id == experiment_id
    assert client.get_experiment(experiment_id).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND


def test_the_parent_run_gets_the_results_table_and_every_evidence_figure(client, finished_study, tmp_path):
    engine, study_id = finished_study
    parent = ensure_parent_run(client, study_id=study_id, study_name="artifacts", dataset="digits", spec=SPEC)
    written = log_results_artifacts(client, parent.run_id, engine=engine, study_id=study_id)
    assert {
        "results/results.html",
        "results/results.md",
        "results/results.json",
        "results/evidence.json",
        "results/figures/forest_plot.svg",
        "results/figures/gate_dyt_weight_heatmap_autonorm.svg",
        "results/figures/final_metric_vs_init_rank.svg",
    } <= set(written)
    local = Path(client.download_artifacts(parent.run_id, "results", str(tmp_path)))
    table = json.loads((local / "results.json").read_text())
    assert {row["method"] for row in table["rows"]} == {"autonorm", "frozen_ln"}
    assert json.loads((local / "evidence.json").read_text())["gates"]["methods"][0]["label"] == "autonorm"
    assert "Mechanism evidence" in (local / "results.html").read_text()
    for figure in (local / "figures").glob("*.svg"):
        assert ET.parse(figure).getroot().tag == "{http://www.w3.org/2000/svg}svg"  # opens on its own


def test_a_study_without_final_trials_saves_nothing(client, tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    study_id = add_study(engine, SPEC).id
    parent = ensure_parent_run(client, study_id=study_id, study_name="empty", dataset="digits", spec=SPEC)
    assert log_results_artifacts(client, parent.run_id, engine=engine, study_id=study_id) == []
    assert client.list_artifacts(parent.run_id, "results") == []
    engine.dispose()


class _DownClient:
    """A tracking server that refuses every upload (unit test of this module's error handling)."""

    def log_dict(self, *args, **kwargs):
        raise ConnectionError("tracking server unreachable")

    log_text = log_dict


def test_a_tracking_outage_is_a_warning_not_a_failed_study(finished_study, caplog):
    engine, study_id = finished_study
    assert log_results_artifacts(_DownClient(), "run-1", engine=engine, study_id=study_id) == []
    assert "could not save the results" in caplog.text and "unreachable" in caplog.text


def test_the_parent_run_records_the_spec_and_the_software_that_ran_it(client):
    study_id = uuid.uuid4().hex
    parent = ensure_parent_run(client, study_id=study_id, study_name="prov", dataset="digits", spec=SPEC)
    run = client.get_run(parent.run_id)
    assert json.loads(run.data.params["spec_json"]) == SPEC
    assert run.data.tags["normlab.version.torch"].startswith("2.")
    assert run.data.tags["normlab.version.mlflow"] == mlflow.__version__
    assert run.data.tags["normlab.git_revision"]
    assert {"study_spec.json", "environment.json"} <= {a.path for a in client.list_artifacts(parent.run_id)}


TUNED_SPEC = {
    **SPEC,
    "name": "tuned",
    "methods": ["autonorm_s"],
    "num_samples": 6,
    "search": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
    "method_search": {"autonorm_s": {"eps_h": {"type": "uniform", "low": 0.05, "high": 0.2}, "t_freeze": 1}},
}


def test_a_tuned_study_saves_its_knob_importance_and_history_with_the_parent_run(client, tmp_path):
    url = f"sqlite:///{tmp_path / 'tuned.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    with session_scope(engine) as session:
        study_id = add_study(session, TUNED_SPEC).id
        trials = [
            ("tune", 2, i, {"lr": 10 ** (-4 + i / 3), "eps_h": 0.05 + i / 50, "t_freeze": 1})
            for i in range(6)
        ]
        trials += [("final", seed, seed, {"lr": 1e-3, "eps_h": 0.1, "t_freeze": 1}) for seed in (0, 1)]
        for phase, seed, i, knobs in trials:
            value = 0.9 - abs(knobs["lr"] - 1e-3) * 10
            add_trial(
                session,
                study_id,
                f"{study_id}/{phase}/{i}",
                phase=phase,
                method="autonorm_s",
                config={"method": "autonorm_s", "seed": seed, "knobs": knobs},
                seed=seed,
                metrics={"objective": value, "test_accuracy": value},
                metric_value=value,
            )
    parent = ensure_parent_run(
        client, study_id=study_id, study_name="tuned", dataset="digits", spec=TUNED_SPEC
    )
    written = log_results_artifacts(client, parent.run_id, engine=engine, study_id=study_id)
    assert {
        "results/tuning.json",
        "results/figures/knob_importance_autonorm_s.svg",
        "results/figures/optimisation_history_autonorm_s.svg",
    } <= set(written)
    local = Path(client.download_artifacts(parent.run_id, "results", str(tmp_path)))
    tuning = json.loads((local / "tuning.json").read_text())
    [method] = tuning["methods"]
    assert len(method["history"]["points"]) == 6 and {k for k in method["importance"]["knobs"]} == {
        "lr",
        "eps_h",
    }
    assert "Knob importance and optimisation history" in (local / "results.html").read_text()
    engine.dispose()
