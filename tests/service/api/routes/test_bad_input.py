"""Bad input found by fuzzing the API against its schema: each is a 4xx that names the problem (a 422 at
the field path where there is one), never a 500, and stores nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}
YAML = {"Content-Type": "application/yaml", **AUTH}


def _spec_json(**changes) -> str:
    return json.dumps({**yaml.safe_load(QUICK_SPEC_YAML), **changes}, allow_nan=True)


def _stored(client) -> int:
    return len(client.get("/studies").json())


def _rejected_at(client, body: str, headers: dict, loc: list) -> dict:
    before = _stored(client)
    response = client.post("/studies", content=body, headers=headers)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert loc in [error["loc"] for error in errors], errors
    assert _stored(client) == before
    return next(error for error in errors if error["loc"] == loc)


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        # Used to be stored as `null`: the study would have run with a different dropout than sent.
        (
            {"model": {"preset": "vit_lite_tiny", "overrides": {"dropout": float("nan")}}},
            ["model", "overrides", "dropout"],
        ),
        ({"paper_numbers": {"dyt": float("inf")}}, ["paper_numbers", "dyt"]),
        (
            {"search": {"lr": {"type": "loguniform", "low": float("nan"), "high": 1e-2}}},
            ["search", "lr", "low"],
        ),
        ({"method_search": {"autonorm_s": {"tau": float("-inf")}}}, ["method_search", "autonorm_s", "tau"]),
    ],
)
def test_a_non_finite_number_anywhere_in_a_spec_is_a_422_at_its_field(client, changes, loc):
    error = _rejected_at(client, _spec_json(**changes), JSON, ["body", *loc])
    assert error["type"] == "finite_number"


def test_an_overflowing_json_number_in_an_unknown_field_is_a_422_not_a_500(client):
    error = _rejected_at(client, '{"name": "x", "lr": 1e999}', JSON, ["body", "lr"])
    assert "finite" in error["msg"]


def test_yaml_nan_is_refused_like_json_nan(client):
    body = QUICK_SPEC_YAML.replace("tau: 0.5", "tau: .nan")
    _rejected_at(client, body, YAML, ["body", "method_search", "autonorm_s", "tau"])


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("name", "tiny\x00", "NUL"),  # PostgreSQL cannot store NUL in text or JSON
        ("description", "\ud800", "Unicode"),  # a lone surrogate cannot be encoded as UTF-8
    ],
)
def test_text_the_database_cannot_store_is_a_422_at_its_field(client, field, value, problem):
    error = _rejected_at(client, _spec_json(**{field: value}), JSON, ["body", field])
    assert problem in error["msg"]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ("paper_numbers: {dyt: 2020-01-01}\n", ["paper_numbers", "dyt"]),  # a YAML date
        ("description: !!binary aGVsbG8=\n", ["description"]),  # YAML bytes
    ],
)
def test_yaml_values_that_are_not_json_data_are_a_422_asking_to_quote_them(client, extra, loc):
    error = _rejected_at(client, QUICK_SPEC_YAML + extra, YAML, ["body", *loc])
    assert "quote it" in error["msg"]


def test_a_recursive_yaml_alias_is_a_422_at_the_value_that_contains_itself(client):
    error = _rejected_at(client, "a: &a [*a]\n", YAML, ["body", "a", 0])
    assert error["type"] == "recursive_value"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ("[" * 100_000 + "]" * 100_000, JSON),  # deeper than the JSON parser's recursion
        ("a: " + "[" * 5000 + "]" * 5000, YAML),  # deeper than the YAML composer's recursion
        ("a: " + "[" * 40 + "]" * 40, YAML),  # parseable, but deeper than any spec
        ("? [a]\n: 1\n", YAML),  # a list as a mapping key (unhashable)
        ('{"name": 1' + "0" * 5000 + "}", JSON),  # past Python's 4300-digit integer limit
    ],
    ids=["deep-json", "deep-yaml", "deeper-than-a-spec", "list-key", "5000-digit-int"],
)
def test_unparseable_or_absurdly_nested_bodies_are_a_422_on_the_body(client, body, headers):
    before = _stored(client)
    response = client.post("/studies", content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][0] == "body"
    assert _stored(client) == before


def test_a_boolean_where_the_schema_says_integer_is_a_422_not_silently_zero(client):
    _rejected_at(client, _spec_json(max_failures=False), JSON, ["body", "max_failures"])


def test_a_numeric_string_where_the_schema_says_integer_is_a_422(client):
    _rejected_at(client, _spec_json(seeds=["0", "1"]), JSON, ["body", "seeds", 0])


def test_a_chunked_body_over_the_size_limit_is_a_413(client, settings):
    def chunks():
        for _ in range(settings.max_spec_bytes // 1000 + 2):
            yield b" " * 1000

    response = client.post("/studies", content=chunks(), headers=JSON)
    assert response.status_code == 413
    assert str(settings.max_spec_bytes) in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "url", "loc"),
    [
        ("GET", "/studies/%00", ["path", "study_id"]),
        ("GET", "/studies/%00/trials", ["path", "study_id"]),
        ("POST", "/studies/%00/cancel", ["path", "study_id"]),
        ("GET", "/studies?dataset=%00", ["query", "dataset"]),
        ("GET", "/results/digits?study=a%00", ["query", "study", 0]),
    ],
)
def test_a_nul_character_in_an_id_or_filter_is_a_422_at_the_parameter(client, method, url, loc):
    # On PostgreSQL the query itself used to fail (NUL is not valid in text): a 500.
    response = client.request(method, url, headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc


def test_a_wrong_method_on_studies_names_every_allowed_method(client):
    # Starlette answered from the first route on the path, so `Allow` said POST alone.
    response = client.put("/studies")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
    assert response.json() == {"detail": "Method Not Allowed"}


def _nested_anchors(levels: int, width: int = 10) -> str:
    """The "billion laughs" body: each level lists the previous anchor `width` times (width**levels values)."""
    lines = ['l0: &l0 "lol"']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [5, 9])  # 10**5 and 10**9 values once expanded, from < 700 bytes
def test_yaml_aliases_that_expand_past_the_limit_are_a_short_422_on_the_body(client, levels):
    body = _nested_anchors(levels)
    assert len(body) < 700
    before = _stored(client)
    response = client.post("/studies", content=body, headers=YAML)
    assert response.status_code == 422, response.text[:500]
    [error] = response.json()["detail"]
    assert error["loc"] == ["body"] and "aliases expand" in error["msg"]
    assert len(response.text) < 1000  # the expanded input is never echoed
    assert _stored(client) == before


def test_a_spec_that_uses_a_few_aliases_is_still_accepted(client):
    text = QUICK_SPEC_YAML.replace("name: tiny", "name: &n tiny\ndescription: *n")
    response = client.post("/studies", content=text, headers=YAML)
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["description"] == "tiny"
