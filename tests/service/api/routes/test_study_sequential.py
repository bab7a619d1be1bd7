"""GET /studies/{id} of a sequential study: its design, looks and outcomes as `sequential` (the store's
summary, described in the OpenAPI schema); null for a fixed-seed study."""

from __future__ import annotations

from studies.store import get_study, session_scope, study_sequential
from tests.factories import submit
from tests.studies.store.sequential_study import add_sequential_study


def test_a_sequential_study_shows_its_looks_and_outcomes(client, app_engine):
    study_id, monitor = add_sequential_study(app_engine, looks=2)
    body = client.get(f"/studies/{study_id}").json()
    with session_scope(app_engine, readonly=True) as session:
        expected = study_sequential(session, study=get_study(session, study_id=study_id))
    assert body["sequential"] == expected
    sequential = body["sequential"]
    assert [look["look"] for look in sequential["looks"]] == [1, 2]
    assert {o["method"]: o["decision"] for o in sequential["outcomes"]} == monitor.records[-1].decisions
    assert sequential["open_arms"] == ["frozen_ln", "autonorm"]  # DyT stopped at look 2
    assert sequential["seeds_per_arm"] == {"frozen_ln": 7, "dyt": 5, "autonorm": 7}


def test_a_fixed_seed_study_has_none(client):
    assert client.get(f"/studies/{submit(client)}").json()["sequential"] is None


def test_the_schema_describes_the_summary(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    field = schemas["StudyOut"]["properties"]["sequential"]
    assert {"$ref": "#/components/schemas/SequentialSummary"} in field["anyOf"]
    assert "GET /studies/{id}" in field["description"]
    outcome = schemas["SequentialOutcome"]["properties"]
    assert {"decision_text", "stopped_at_look", "interval", "interval_level", "p_value"} <= set(outcome)
    assert set(schemas["SequentialSummary"]["required"]) >= {"design", "looks", "outcomes", "trials"}
