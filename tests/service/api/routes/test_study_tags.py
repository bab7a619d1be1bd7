"""PUT /studies/{id}/tags: a study's tags replaced behind the token, shown in its JSON (one study and the
listing), and a bad tag refused with a 422 at its field path, storing nothing."""

from __future__ import annotations

import pytest

from tests.factories import submit
from tests.service.conftest import API_TOKEN, AUTH


def _put(client, study_id: str, tags, headers=AUTH):
    return client.put(f"/studies/{study_id}/tags", json={"tags": tags}, headers=headers)


def test_tags_round_trip_through_the_study_json(client):
    study_id = submit(client)
    assert client.get(f"/studies/{study_id}").json()["tags"] == []
    response = _put(client, study_id, ["paper", "ablation"])
    assert response.status_code == 200 and response.json()["tags"] == ["ablation", "paper"]
    assert client.get(f"/studies/{study_id}").json()["tags"] == ["ablation", "paper"]
    assert [s["tags"] for s in client.get("/studies").json()] == [["ablation", "paper"]]


def test_putting_tags_replaces_them_and_an_empty_list_removes_them_all(client):
    study_id = submit(client)
    _put(client, study_id, ["paper", "v1"])
    assert _put(client, study_id, ["v2"]).json()["tags"] == ["v2"]
    assert _put(client, study_id, []).json()["tags"] == []


@pytest.mark.parametrize(
    ("tags", "loc", "fragment"),
    [
        (["ok", "Bad"], ["body", "tags", 1], "('bad' would do)"),
        (["two words"], ["body", "tags", 0], "only lowercase letters, digits"),
        ([""], ["body", "tags", 0], "not empty"),
        (["a" * 41], ["body", "tags", 0], "longer than 40 characters"),
        ([f"t{i}" for i in range(21)], ["body", "tags"], "at most 20"),
        (["a", "b", "a"], ["body", "tags"], "repeated: a"),
        ("paper", ["body", "tags"], "valid list"),
    ],
    ids=["upper-case", "space", "empty", "too-long", "21-tags", "repeated", "not-a-list"],
)
def test_a_bad_tag_is_a_422_naming_its_field_path_and_stores_nothing(client, tags, loc, fragment):
    study_id = submit(client)
    _put(client, study_id, ["kept"])
    response = _put(client, study_id, tags)
    assert response.status_code == 422
    errors = {tuple(e["loc"]): e["msg"] for e in response.json()["detail"]}
    assert tuple(loc) in errors, errors
    assert fragment in errors[tuple(loc)]
    assert client.get(f"/studies/{study_id}").json()["tags"] == ["kept"]


def test_a_body_with_another_field_is_refused(client):
    study_id = submit(client)
    response = client.put(f"/studies/{study_id}/tags", json={"tags": [], "tag": "x"}, headers=AUTH)
    assert response.status_code == 422
    assert ["body", "tag"] in [e["loc"] for e in response.json()["detail"]]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {API_TOKEN}"}]
)
def test_tagging_needs_the_write_token(client, headers):
    study_id = submit(client)
    response = _put(client, study_id, ["paper"], headers=headers)
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert client.get(f"/studies/{study_id}").json()["tags"] == []


def test_a_bad_token_is_refused_before_the_body_is_looked_at(client):
    study_id = submit(client)
    assert _put(client, study_id, ["Not A Tag"], headers={}).status_code == 401


def test_tagging_an_unknown_study_is_a_404(client):
    response = _put(client, "0" * 32, ["paper"])
    assert response.status_code == 404 and "no study with id" in response.json()["detail"]


def test_the_schema_states_the_tag_rules(app):
    body = app.openapi()["components"]["schemas"]["TagsIn"]["properties"]["tags"]
    assert body["maxItems"] == 20 and body["uniqueItems"] is True
    assert body["items"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 40,
        "pattern": "^[a-z0-9._-]{1,40}$",
    }
