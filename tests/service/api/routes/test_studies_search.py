"""GET /studies?q=&dataset=&method=&status=&tag=: each filter narrows the list, they combine, and a value
that could match nothing by its form (an unknown method, a tag no study can carry) is a 422 at its
parameter rather than an empty list that reads as "no studies"."""

from __future__ import annotations

import pytest

from studies.spec import METHODS
from studies.store import session_scope, set_study_status
from tests.factories import digits_spec, quick_spec, submit
from tests.service.conftest import AUTH


@pytest.fixture
def studies(client, app_engine) -> dict[str, str]:
    """name -> id of three studies: alpha (queued, tags paper and v1), beta (running, tag paper) and gamma
    (cancelled, on mnist_5k, no tags)."""
    ids = {
        "alpha": submit(client, quick_spec(name="Alpha sweep", description="AutoNorm against DyT")),
        "beta": submit(client, digits_spec(name="beta", methods=["frozen_ln", "dyt"])),
        "gamma": submit(client, digits_spec(name="gamma", methods=["frozen_ln"], dataset="mnist_5k")),
    }
    for name, tags in (("alpha", ["paper", "v1"]), ("beta", ["paper"])):
        assert client.put(f"/studies/{ids[name]}/tags", json={"tags": tags}, headers=AUTH).status_code == 200
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=ids["beta"], status="running")
        set_study_status(session, study_id=ids["gamma"], status="cancelled")
    return ids


def _listed(client, studies, params) -> list[str]:
    by_id = {study_id: name for name, study_id in studies.items()}
    response = client.get("/studies", params=params)
    assert response.status_code == 200, response.text
    return [by_id[s["id"]] for s in response.json()]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["gamma", "beta", "alpha"]),
        ({"q": "ALPHA"}, ["alpha"]),
        ({"q": "dyt"}, ["alpha"]),  # the description
        ({"q": "a"}, ["gamma", "beta", "alpha"]),
        ({"q": ""}, ["gamma", "beta", "alpha"]),
        ({"dataset": "mnist_5k"}, ["gamma"]),
        ({"method": "dyt"}, ["beta", "alpha"]),
        ({"method": "autonorm_s"}, ["alpha"]),
        ({"status": "running"}, ["beta"]),
        ({"tag": "paper"}, ["beta", "alpha"]),
        ({"tag": ["paper", "v1"]}, ["alpha"]),
        ({"tag": "unused"}, []),
    ],
    ids=lambda value: repr(value) if isinstance(value, dict) else None,
)
def test_each_filter_narrows_the_list(client, studies, params, expected):
    assert _listed(client, studies, params) == expected


def test_the_filters_combine(client, studies):
    assert _listed(client, studies, {"tag": "paper", "method": "dyt", "status": "queued"}) == ["alpha"]
    assert _listed(client, studies, {"q": "a", "method": "frozen_ln", "dataset": "digits"}) == [
        "beta",
        "alpha",
    ]
    assert _listed(client, studies, {"tag": "paper", "status": "cancelled"}) == []


def test_the_limit_applies_after_the_filters(client, studies):
    assert _listed(client, studies, {"tag": "paper", "limit": 1}) == ["beta"]


@pytest.mark.parametrize(
    ("params", "loc", "fragment"),
    [
        ({"method": "layernorm"}, ["query", "method"], f"choose one of {', '.join(METHODS)}"),
        ({"tag": "Paper"}, ["query", "tag", 0], "('paper' would do)"),
        ({"tag": ["paper", "a b"]}, ["query", "tag", 1], "only lowercase letters"),
        ({"q": "a\x00b"}, ["query", "q"], "NUL"),
    ],
)
def test_a_filter_that_could_match_nothing_by_its_form_is_a_422_at_its_parameter(
    client, params, loc, fragment
):
    response = client.get("/studies", params=params)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == loc and fragment in error["msg"]


def test_the_schema_lists_the_methods_and_the_tag_rules(app):
    parameters = {p["name"]: p for p in app.openapi()["paths"]["/studies"]["get"]["parameters"]}
    assert {"type": "string", "enum": list(METHODS)} in parameters["method"]["schema"]["anyOf"]
    [tags] = [s for s in parameters["tag"]["schema"]["anyOf"] if s.get("type") == "array"]
    assert tags["items"]["pattern"] == "^[a-z0-9._-]{1,40}$"
