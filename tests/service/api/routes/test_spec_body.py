"""The spec body of POST /studies and POST /plans (service.api.routes.spec_body), on either database:
integer fields take a number with no fractional part, as the published schema (`integer`) allows, and
text or keys with a NUL character are a 422 at their field path that says NUL is not allowed, with nothing
stored (PostgreSQL cannot store NUL in text or JSON; SQLite would have kept it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.factories import QUICK_SPEC_YAML, quick_spec
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}
YAML = {"Content-Type": "application/yaml", **AUTH}
SPEC_ROUTES = {"/studies": 201, "/plans": 200}  # each route and its answer to a valid spec
NUL_REFUSED = "NUL characters are not allowed"


def _stored(client) -> int:
    return len(client.get("/studies").json())


def _post(client, route: str, spec: dict[str, Any]):
    return client.post(route, content=json.dumps(spec), headers=JSON)


def _refused_at(client, route: str, body: str, headers: dict[str, str], loc: list) -> dict[str, Any]:
    before = _stored(client)
    response = client.post(route, content=body, headers=headers)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert loc in [error["loc"] for error in errors], errors
    assert _stored(client) == before
    return next(error for error in errors if error["loc"] == loc)


# ------------------------------------------------------------------------------- integral floats


WHOLE_FLOATS = quick_spec(
    budget={"epochs": 4.0, "batch_size": 32.0},
    seeds=[0.0, 1.0, 2.0],
    num_samples=2.0,
    method_search={"autonorm_s": {"tau": 0.5, "t_freeze": {"type": "int", "low": 1.0, "high": 3.0}}},
)


@pytest.mark.parametrize("route", SPEC_ROUTES)
def test_integer_fields_take_json_numbers_with_no_fractional_part(client, route):
    response = _post(client, route, WHOLE_FLOATS)
    assert response.status_code == SPEC_ROUTES[route], response.text


def test_a_study_sent_with_whole_floats_is_stored_with_integers(client):
    response = _post(client, "/studies", WHOLE_FLOATS)
    assert response.status_code == 201, response.text
    spec = client.get(response.headers["Location"]).json()["spec"]
    assert spec["budget"]["epochs"] == 4 and isinstance(spec["budget"]["epochs"], int)
    assert spec["seeds"] == [0, 1, 2] and all(isinstance(seed, int) for seed in spec["seeds"])
    assert spec["num_samples"] == 2 and isinstance(spec["num_samples"], int)
    t_freeze = spec["method_search"]["autonorm_s"]["t_freeze"]
    assert t_freeze == {"type": "int", "low": 1, "high": 3, "step": 1, "log": False}
    assert isinstance(t_freeze["low"], int) and isinstance(t_freeze["high"], int)


def test_a_yaml_spec_takes_whole_floats_as_json_does(client):
    body = QUICK_SPEC_YAML.replace("epochs: 4", "epochs: 4.0").replace("num_samples: 2", "num_samples: 2.0")
    assert "epochs: 4.0" in body and "num_samples: 2.0" in body
    response = client.post("/studies", content=body, headers=YAML)
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["budget"]["epochs"] == 4


def test_a_retry_that_writes_4_as_4_0_replays_the_same_submission(client):
    key = {"Idempotency-Key": "whole-floats-1"}
    first = client.post("/studies", content=json.dumps(quick_spec()), headers={**JSON, **key})
    retry = client.post("/studies", content=json.dumps(WHOLE_FLOATS), headers={**JSON, **key})
    assert (first.status_code, retry.status_code) == (201, 200), retry.text
    assert retry.json()["id"] == first.json()["id"]


@pytest.mark.parametrize("route", SPEC_ROUTES)
@pytest.mark.parametrize("epochs", [3.5, True, "3"], ids=["fraction", "boolean", "numeric-string"])
def test_a_fraction_a_boolean_or_a_numeric_string_is_still_a_422_at_the_field(client, route, epochs):
    body = json.dumps(quick_spec(budget={"epochs": epochs, "batch_size": 32}))
    error = _refused_at(client, route, body, JSON, ["body", "budget", "epochs"])
    assert error["type"] == "int_type" and error["input"] == epochs


# ---------------------------------------------------------------------------------------- NUL


@pytest.mark.parametrize("route", SPEC_ROUTES)
@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"name": "tiny\x00"}, ["name"]),
        ({"description": "a\x00b"}, ["description"]),
        ({"methods": ["autonorm_s", "frozen_ln", "dyt\x00"]}, ["methods", 2]),
        ({"model": {"preset": "vit_lite_tiny\x00"}}, ["model", "preset"]),
        (
            {"search": {"augment": {"type": "choice", "values": ["none", "crop_flip\x00"]}}},
            ["search", "augment", "values", 1],
        ),
    ],
    ids=["name", "description", "method", "model-preset", "choice-value"],
)
def test_a_nul_character_in_text_is_a_422_at_its_field(client, route, changes, loc):
    error = _refused_at(client, route, json.dumps(quick_spec(**changes)), JSON, ["body", *loc])
    assert error["type"] == "text" and NUL_REFUSED in error["msg"]


@pytest.mark.parametrize("route", SPEC_ROUTES)
@pytest.mark.parametrize(
    ("changes", "loc", "key"),
    [
        ({"search": {"l\x00r": {"type": "loguniform", "low": 1e-4, "high": 1e-2}}}, ["search"], "l\\x00r"),
        ({"method_search": {"autonorm_s\x00": {"tau": 0.5}}}, ["method_search"], "autonorm_s\\x00"),
        ({"method_search": {"autonorm_s": {"ta\x00u": 0.5}}}, ["method_search", "autonorm_s"], "ta\\x00u"),
        (
            {"model": {"preset": "vit_lite_tiny", "overrides": {"de\x00pth": 2}}},
            ["model", "overrides"],
            "de\\x00pth",
        ),
        ({"na\x00me": "tiny"}, [], "na\\x00me"),
    ],
    ids=["search", "method_search", "knob", "override", "top-level"],
)
def test_a_nul_character_in_a_key_is_a_422_at_the_mapping_that_names_the_key(
    client, route, changes, loc, key
):
    error = _refused_at(client, route, json.dumps(quick_spec(**changes)), JSON, ["body", *loc])
    assert error["type"] == "key" and NUL_REFUSED in error["msg"] and key in error["msg"]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [('description: "a\\0b"\n', ["description"]), ('paper_numbers: {"dy\\0t": 0.5}\n', ["paper_numbers"])],
    ids=["value", "key"],
)
def test_a_yaml_nul_escape_is_refused_as_in_json(client, extra, loc):
    error = _refused_at(client, "/studies", QUICK_SPEC_YAML + extra, YAML, ["body", *loc])
    assert NUL_REFUSED in error["msg"]


def test_an_escaped_nul_deep_in_a_json_body_never_reaches_the_store(client):
    # The JSON text spells it `\u0000`, as a client's encoder writes it.
    body = json.dumps(quick_spec(description="x" * 100 + "\x00"))
    assert "\\u0000" in body
    _refused_at(client, "/studies", body, JSON, ["body", "description"])
    assert _post(client, "/studies", quick_spec()).status_code == 201  # the store still takes a valid spec
