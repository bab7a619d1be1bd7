"""GET /studies/{id}/epochs and /studies/{id}/tuning: what the study page's interactive charts draw. The
epochs carry every trial's metrics per epoch and the tuning trials' searched knobs and objective; the tuning
carries the knob importance GET /results prints, number for number."""

from __future__ import annotations

import pytest

from tests.factories import add_epochs, add_trial, digits_spec, submit
from tests.service.api.routes.tuning_studies import tuned_study_of

_TRIAL_FIELDS = {
    "trial_key",
    "label",
    "phase",
    "method",
    "group",
    "seed",
    "status",
    "knobs",
    "objective",
    "epochs",
}


@pytest.fixture
def tuned_study(client, app_engine) -> str:
    """tuning_studies' tuned study (8 tune trials of autonorm_s over eps_h x t_freeze, trial 5 failed, and
    final trials), with epochs for its first tune trial and one final trial."""
    study_id = tuned_study_of(client, app_engine)
    add_epochs(
        app_engine,
        study_id,
        f"{study_id}/tune/0",
        {1: {"val_accuracy": 0.5, "train_loss": 1.2}, 2: {"val_accuracy": 0.61, "gate_entropy": 0.4}},
    )
    add_epochs(app_engine, study_id, f"{study_id}/final/frozen_ln/0", {1: {"test_accuracy": 0.88}})
    return study_id


def test_the_epochs_name_every_trial_with_its_metrics_epoch_by_epoch(client, tuned_study):
    response = client.get(f"/studies/{tuned_study}/epochs")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["study_id"] == tuned_study
    assert body["methods"] == ["autonorm_s", "frozen_ln"]
    assert body["metrics"] == ["gate_entropy", "test_accuracy", "train_loss", "val_accuracy"]
    assert body["default_metric"] == "val_accuracy"
    assert len(body["trials"]) == 8 + 4  # tune trials, then two seeds of each method's final
    assert all(set(trial) == _TRIAL_FIELDS for trial in body["trials"])
    first = body["trials"][0]
    assert {k: first[k] for k in ("label", "phase", "method", "seed", "status")} == {
        "label": "tune/0",
        "phase": "tune",
        "method": "autonorm_s",
        "seed": 2,
        "status": "succeeded",
    }
    assert first["knobs"] == {"eps_h": 0.05, "t_freeze": 1}
    assert first["epochs"] == [
        {"epoch": 1, "metrics": {"val_accuracy": 0.5, "train_loss": 1.2}},
        {"epoch": 2, "metrics": {"val_accuracy": 0.61, "gate_entropy": 0.4}},
    ]
    final = next(t for t in body["trials"] if t["label"] == "final/frozen_ln/0")
    assert (final["objective"], final["epochs"]) == (0.9, [{"epoch": 1, "metrics": {"test_accuracy": 0.88}}])


def test_the_epochs_carry_the_tuning_trials_as_parallel_coordinates(client, tuned_study):
    tuning = client.get(f"/studies/{tuned_study}/epochs").json()["tuning"]
    assert {k: tuning[k] for k in ("phase", "objective", "higher_is_better", "knobs")} == {
        "phase": "tune",
        "objective": "val_accuracy",
        "higher_is_better": True,
        "knobs": ["eps_h", "t_freeze"],
    }
    trials = tuning["trials"]
    assert [t["label"] for t in trials] == [f"tune/{i}" for i in range(8)]
    assert trials[2]["knobs"] == {"eps_h": pytest.approx(0.09), "t_freeze": 3}
    assert trials[2]["objective"] == pytest.approx(0.9 - 10 * (0.09 - 0.1) ** 2)
    assert (trials[5]["status"], trials[5]["objective"]) == ("failed", None)  # a line that stops short


def test_the_tuning_is_the_importance_the_results_print(client, tuned_study):
    response = client.get(f"/studies/{tuned_study}/tuning")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["study_id"] == tuned_study
    [method] = body["tuning"]["methods"]
    fanova = next(e for e in method["importance"]["evaluators"] if e["evaluator"] == "fanova")
    assert {k["knob"] for k in fanova["knobs"]} == {"eps_h", "t_freeze"}
    assert sum(k["importance"] for k in fanova["knobs"]) == pytest.approx(1)
    [printed] = client.get("/results/digits", params={"study": tuned_study}).json()["tuning"]
    assert body["tuning"] == printed


def test_a_study_that_searches_no_knob_has_no_coordinates_and_no_importance(client, app_engine):
    study_id = submit(client, digits_spec(name="fixed", search={"lr": 0.005}, epochs=2, batch_size=32))
    add_trial(app_engine, study_id, f"{study_id}/final/dyt/seed0", phase="final", method="dyt")
    assert client.get(f"/studies/{study_id}/epochs").json()["tuning"] is None
    assert client.get(f"/studies/{study_id}/tuning").json() == {"study_id": study_id, "tuning": None}


def test_a_grid_of_one_point_has_its_trials_but_no_knob_axis(client, app_engine):
    study_id = submit(
        client, digits_spec(name="grid", kind="grid", search={"lr": 0.005}, epochs=2, batch_size=32)
    )
    for seed in (0, 1):
        add_trial(
            app_engine,
            study_id,
            f"{study_id}/grid/dyt/seed{seed}",
            phase="grid",
            method="dyt",
            seed=seed,
            config={"knobs": {"lr": 0.005}},
            metric_value=0.7,
        )
    tuning = client.get(f"/studies/{study_id}/epochs").json()["tuning"]
    assert (tuning["phase"], tuning["objective"], tuning["knobs"]) == ("grid", "test_accuracy", [])
    assert [t["knobs"] for t in tuning["trials"]] == [{}, {}]


def test_a_study_without_trials_has_nothing_to_draw_yet(client):
    study_id = submit(client, digits_spec(name="empty", epochs=2, batch_size=32))
    body = client.get(f"/studies/{study_id}/epochs").json()
    assert (body["trials"], body["metrics"], body["default_metric"], body["tuning"]) == ([], [], None, None)


@pytest.mark.parametrize("what", ["epochs", "tuning"])
def test_an_unknown_study_is_404(client, what):
    response = client.get(f"/studies/{'0' * 32}/{what}")
    assert response.status_code == 404
    assert "no study" in response.json()["detail"]


@pytest.mark.parametrize("what", ["epochs", "tuning"])
def test_the_routes_document_their_statuses(app, what):
    operation = app.openapi()["paths"][f"/studies/{{study_id}}/{what}"]["get"]
    assert set(operation["responses"]) == {"200", "404", "422", "503"}
