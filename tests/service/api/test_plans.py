"""POST /plans: the body POST /studies takes, answered with what the study would take (trials, GPU-hours,
wall time, seeds for power); nothing is run or stored, a spec error is the same 422 at its field path, and
an earlier study of the same dataset and model in the store lends the plan its spread, by name."""

from __future__ import annotations

import json

import yaml

from studies.store import list_studies, session_scope
from tests.factories import QUICK_SPEC_YAML, add_study, run_to_the_end
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}
YAML = {"Content-Type": "application/yaml", **AUTH}
# The test server allows 5 seeds per study: looks at 3, 4 and 5 seeds.
DESIGN = {"first_seeds": 3, "seeds_per_look": 1, "max_seeds": 5, "effect": 0.02}
SEQUENTIAL = {
    **{key: value for key, value in yaml.safe_load(QUICK_SPEC_YAML).items() if key != "seeds"},
    "sequential": DESIGN,
}


def _stored(app_engine) -> int:
    with session_scope(app_engine, readonly=True) as session:
        return len(list_studies(session))


def test_a_yaml_spec_is_planned_and_nothing_is_stored(client, app_engine):
    response = client.post("/plans", content=QUICK_SPEC_YAML, headers=YAML)
    assert response.status_code == 200, response.text
    plan = response.json()
    assert (plan["name"], plan["dataset"], plan["design"], plan["reference"]) == (
        "tiny",
        "digits",
        "fixed",
        "frozen_ln",
    )
    tune, final = plan["phases"]
    assert tune["trials"] == {"autonorm_s": 2, "frozen_ln": 2, "dyt": 2}
    assert final["trials"] == {"autonorm_s": 3, "frozen_ln": 3, "dyt": 3}
    assert plan["planned"]["trials"] == 15  # what POST /studies would plan
    assert plan["gpu"]["provenance"] == "none" and plan["planned"]["gpu_hours"] is None
    assert plan["spread"]["source"] == "prior"
    assert _stored(app_engine) == 0


def test_a_sequential_design_is_planned_with_its_first_look_maximum_and_expected_cost(client, app_engine):
    response = client.post("/plans", content=json.dumps(SEQUENTIAL), headers=JSON)
    assert response.status_code == 200, response.text
    sequential = response.json()["sequential"]
    assert sequential["looks"] == [3, 4, 5]
    first, maximum = sequential["first"], sequential["maximum"]
    assert (first["seeds_per_method"], maximum["seeds_per_method"]) == (3, 5)
    effect, no_effect = sequential["scenarios"]
    assert (effect["name"], no_effect["name"]) == ("effect", "no_effect")
    for scenario in (effect, no_effect):
        assert first["trials"] <= scenario["expected"]["trials"] <= maximum["trials"]
    assert effect["rejected"] > no_effect["rejected"]
    assert sequential["simulations"] == 2000
    assert _stored(app_engine) == 0


def test_a_spec_error_is_a_422_at_its_field_path(client):
    bad = {
        **SEQUENTIAL,
        "dataset": "imagenet",
        "sequential": {**DESIGN, "effect": None, "test": "equivalence"},
    }
    response = client.post("/plans", content=json.dumps(bad), headers=JSON)
    assert response.status_code == 422, response.text
    paths = {tuple(error["loc"]) for error in response.json()["detail"]}
    assert ("body", "dataset") in paths and ("body", "sequential", "margin") in paths


def test_a_spec_over_the_servers_limits_is_refused_as_post_studies_refuses_it(client):
    response = client.post(
        "/plans", content=json.dumps({**SEQUENTIAL, "sequential": {**DESIGN, "max_seeds": 10}}), headers=JSON
    )
    assert response.status_code == 422, response.text
    assert [error["loc"] for error in response.json()["detail"]] == [["body", "sequential", "max_seeds"]]


def test_the_token_is_required_and_plain_text_is_refused(client):
    assert (
        client.post(
            "/plans", content=QUICK_SPEC_YAML, headers={"Content-Type": "application/yaml"}
        ).status_code
        == 401
    )
    plain = client.post("/plans", content=QUICK_SPEC_YAML, headers={"Content-Type": "text/plain", **AUTH})
    assert plain.status_code == 415


def test_the_plan_takes_the_spread_of_a_stored_study_of_the_same_dataset_and_model_and_names_it(
    client, app_engine
):
    study = add_study(app_engine)  # QUICK_SPEC_YAML: digits, vit_lite_tiny
    run_to_the_end(
        app_engine,
        study.id,
        {"frozen_ln": [0.90, 0.92, 0.91], "dyt": [0.88, 0.92, 0.90], "autonorm_s": [0.91, 0.93, 0.91]},
    )
    plan = client.post("/plans", content=QUICK_SPEC_YAML, headers=YAML).json()
    assert plan["spread"]["source"] == "study"
    assert plan["spread"]["study"] == f"tiny ({study.id})"
    assert plan["spread"]["comparisons"] == 2 and plan["spread"]["seeds"] == 3
    assert f"tiny ({study.id})" in plan["spread"]["basis"]
    assert plan["fixed"]["detectable_effect"] > 0


def test_the_openapi_document_describes_the_plan(client):
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/plans"]["post"]
    assert set(operation["responses"]) == {"200", "401", "403", "413", "415", "422", "503"}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/StudyPlan"
    )
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/StudySpec")
    plan = document["components"]["schemas"]["StudyPlan"]
    assert {"phases", "planned", "gpu", "wall", "spread", "fixed", "sequential"} <= set(plan["properties"])
