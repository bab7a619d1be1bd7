"""GET /studies/{id} shows the driver's attempts and why each dead driver died; OpenAPI documents them."""

from __future__ import annotations

import json

import yaml

from studies.store import end_attempt, record_attempt, session_scope, set_study_status
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}


def _submitted(client) -> str:
    response = client.post("/studies", content=json.dumps(yaml.safe_load(QUICK_SPEC_YAML)), headers=JSON)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_queued_study_has_no_attempts_yet(client):
    study_id = _submitted(client)
    assert client.get(f"/studies/{study_id}").json()["attempts"] == []


def test_a_resubmitted_study_shows_each_attempt_and_the_first_drivers_death(client, app_engine):
    study_id = _submitted(client)
    with session_scope(app_engine) as session:
        record_attempt(session, study_id=study_id, ray_job_id="normlab-study-x")
        set_study_status(session, study_id=study_id, status="running")
        end_attempt(session, study_id=study_id, death_reason="Ray job normlab-study-x ended failed: exit -9")
        record_attempt(session, study_id=study_id, ray_job_id="normlab-study-x-attempt-2")
    body = client.get(f"/studies/{study_id}").json()
    first, second = body["attempts"]
    assert body["ray_job_id"] == "normlab-study-x-attempt-2"
    assert (first["number"], first["ray_job_id"], first["interrupted"]) == (1, "normlab-study-x", False)
    assert first["death_reason"] == "Ray job normlab-study-x ended failed: exit -9"
    assert first["ended_at"] is not None
    assert (second["number"], second["ended_at"], second["death_reason"]) == (2, None, None)
    assert [len(s["attempts"]) for s in client.get("/studies").json()] == [2]


def test_openapi_documents_the_attempts_of_a_study(app):
    schemas = app.openapi()["components"]["schemas"]
    attempts = schemas["StudyOut"]["properties"]["attempts"]
    assert attempts["items"]["$ref"] == "#/components/schemas/AttemptOut"
    assert {"number", "ray_job_id", "submitted_at", "ended_at", "death_reason", "interrupted"} <= set(
        schemas["AttemptOut"]["required"]
    )
