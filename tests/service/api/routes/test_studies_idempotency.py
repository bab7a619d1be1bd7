"""POST /studies with an Idempotency-Key: a retried submission never stores a second study."""

from __future__ import annotations

import json
import threading
import time

import yaml

from studies.store import create_study_once, list_studies, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

SPEC = yaml.safe_load(QUICK_SPEC_YAML)


def _post(client, spec=None, key: str | None = "retry-7f3c", content_type="application/json"):
    body = json.dumps(spec or SPEC) if content_type == "application/json" else QUICK_SPEC_YAML
    headers = {"Content-Type": content_type, **AUTH}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post("/studies", content=body, headers=headers)


def _stored(app_engine) -> list[str]:
    with session_scope(app_engine) as session:
        return [study.id for study in list_studies(session)]


def test_the_first_post_with_a_key_creates_the_study(client, app_engine):
    response = _post(client)
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response.headers
    assert _stored(app_engine) == [response.json()["id"]]


def test_a_retry_with_the_same_key_and_spec_answers_the_same_study_with_200_and_stores_nothing(
    client, app_engine
):
    first = _post(client)
    retry = _post(client)
    assert retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json()["id"] == first.json()["id"]
    assert retry.headers["Location"] == first.headers["Location"]
    assert _stored(app_engine) == [first.json()["id"]]


def test_the_same_spec_as_yaml_is_the_same_submission(client, app_engine):
    first = _post(client)
    retry = _post(client, content_type="application/yaml")
    assert (retry.status_code, retry.json()["id"]) == (200, first.json()["id"])


def test_the_same_key_with_another_spec_is_a_422_naming_the_header_and_the_study(client, app_engine):
    first = _post(client).json()["id"]
    other = _post(client, spec={**SPEC, "name": "another"})
    assert other.status_code == 422
    [error] = other.json()["detail"]
    assert error["loc"] == ["header", "Idempotency-Key"]
    assert "different spec" in error["msg"] and first in error["msg"] and "new key" in error["msg"]
    assert _stored(app_engine) == [first]


def test_different_keys_and_no_key_each_create_a_study(client, app_engine):
    assert _post(client, key="a").status_code == 201
    assert _post(client, key="b").status_code == 201
    assert _post(client, key=None).status_code == 201
    assert _post(client, key=None).status_code == 201
    assert len(_stored(app_engine)) == 4


def test_a_key_that_is_empty_too_long_or_not_visible_ascii_is_a_422_at_the_header(client, app_engine):
    # A NUL is no visible ASCII: refused here, it never reaches the key's lookup (PostgreSQL refuses NUL).
    for key in ("", "k" * 256, "has space", "nul\x00key"):
        response = _post(client, key=key)
        assert response.status_code == 422, key
        assert any(error["loc"] == ["header", "Idempotency-Key"] for error in response.json()["detail"])
    assert _stored(app_engine) == []


def test_a_submission_without_the_token_is_refused_before_the_key_is_looked_at(client, app_engine):
    _post(client)
    response = client.post(
        "/studies",
        content=json.dumps(SPEC),
        headers={"Content-Type": "application/json", "Idempotency-Key": "retry-7f3c"},
    )
    assert response.status_code == 401


def test_two_concurrent_submissions_with_one_key_store_one_study(engine):
    """The second transaction waits for the first (SQLite: its write lock; PostgreSQL: the unique index)
    and then answers the study the first stored."""
    outcome: dict[str, tuple[str, bool]] = {}

    def second_submission() -> None:
        with session_scope(engine) as session:
            study, created = create_study_once(session, spec=SPEC, idempotency_key="same")
            outcome["second"] = (study.id, created)

    with session_scope(engine) as session:
        study, created = create_study_once(session, spec=SPEC, idempotency_key="same")
        outcome["first"] = (study.id, created)
        racer = threading.Thread(target=second_submission)
        racer.start()
        time.sleep(1.0)  # the second is now blocked on the first, uncommitted, study
        assert "second" not in outcome
    racer.join(timeout=30)
    assert outcome["first"] == (outcome["first"][0], True)
    assert outcome["second"] == (outcome["first"][0], False)
    with session_scope(engine) as session:
        assert len(list_studies(session)) == 1


def test_the_header_and_the_replay_answer_are_in_the_openapi_document(app):
    post = app.openapi()["paths"]["/studies"]["post"]
    [header] = [parameter for parameter in post["parameters"] if parameter["in"] == "header"]
    assert header["name"] == "Idempotency-Key" and not header.get("required", False)
    assert "same spec" in header["description"]
    assert post["responses"]["200"]["headers"]["Idempotent-Replayed"]["schema"]["enum"] == ["true"]


def test_a_stored_study_wakes_the_reconcile_loop_once_and_a_replay_does_not(client, app, app_engine):
    woken: list[list[str]] = []
    # What the wake sees is what the reconcile loop would: the study must be committed by then.
    app.state.on_study_queued = lambda: woken.append(_stored(app_engine))

    first = _post(client)
    replay = _post(client)
    plain = _post(client, key=None)

    assert (first.status_code, replay.status_code, plain.status_code) == (201, 200, 201)
    assert len(woken) == 2  # the replay stored nothing new, so it wakes nothing
    assert woken[0] == [first.json()["id"]]
    assert set(woken[1]) == {first.json()["id"], plain.json()["id"]}
