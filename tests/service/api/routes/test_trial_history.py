"""HTTP GET /studies/{id}/trials/{trial_key}/history: a trial's per-epoch metrics, 404 for what does not exist."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.factories import add_epochs, add_trial, digits_spec, submit

SPEC = digits_spec(name="history", epochs=2, batch_size=32)


@pytest.fixture
def study_id(client) -> str:
    return submit(client, SPEC)


def _trial(app_engine, study_id: str, key: str) -> None:
    add_trial(app_engine, study_id, key, method="autonorm_s", status="running")


def test_the_history_lists_every_epoch_with_its_metrics_in_order(client, app_engine, study_id):
    key = f"{study_id}/final/autonorm_s/seed0"  # the driver's keys hold slashes
    _trial(app_engine, study_id, key)
    add_epochs(
        app_engine,
        study_id,
        key,
        {1: {"objective": 0.6, "gate_dyt_weight_0": 0.4}, 0: {"objective": 0.1, "init_erank_jacobian": 0.8}},
    )
    response = client.get(f"/studies/{study_id}/trials/{key}/history")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "study_id": study_id,
        "trial_key": key,
        "epochs": [
            {"epoch": 0, "metrics": {"objective": 0.1, "init_erank_jacobian": 0.8}},
            {"epoch": 1, "metrics": {"objective": 0.6, "gate_dyt_weight_0": 0.4}},
        ],
    }


def test_a_percent_encoded_trial_key_reads_the_same(client, app_engine, study_id):
    key = f"{study_id}/final/autonorm_s/seed0"
    add_epochs(app_engine, study_id, key, {0: {"objective": 0.1}})
    response = client.get(f"/studies/{study_id}/trials/{quote(key, safe='')}/history")
    assert response.status_code == 200
    assert [e["epoch"] for e in response.json()["epochs"]] == [0]


def test_a_trial_that_has_not_reported_yet_has_an_empty_history(client, app_engine, study_id):
    _trial(app_engine, study_id, "started")
    response = client.get(f"/studies/{study_id}/trials/started/history")
    assert response.status_code == 200
    assert response.json()["epochs"] == []


def test_an_unknown_trial_is_404_naming_the_key_and_where_the_keys_are_listed(client, study_id):
    response = client.get(f"/studies/{study_id}/trials/no-such-trial/history")
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert "no-such-trial" in detail and f"/studies/{study_id}/trials" in detail


def test_an_unknown_study_is_404(client):
    response = client.get(f"/studies/{'0' * 32}/trials/k/history")
    assert response.status_code == 404
    assert "no study" in response.json()["detail"]


def test_the_route_documents_its_statuses(app):
    document = app.openapi()
    operation = document["paths"]["/studies/{study_id}/trials/{trial_key}/history"]["get"]
    assert set(operation["responses"]) == {
        "200",
        "404",
        "422",
        "503",
    }  # 503: the database busy past its queue timeout
