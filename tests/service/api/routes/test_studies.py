"""HTTP /studies: submit (JSON and YAML), read, list, trials, cancel, and every 4xx path."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
import yaml

import service.orchestration.cancel as studies_service
from studies.store import engine as engine_module
from studies.store import (
    get_study,
    list_studies,
    session_scope,
    set_study_runtime,
    set_study_status,
)
from tests.factories import QUICK_SPEC_YAML, add_trial, start_study
from tests.service.conftest import API_TOKEN, AUTH

YAML = {"Content-Type": "application/yaml", **AUTH}
JSON = {"Content-Type": "application/json", **AUTH}
SPEC = yaml.safe_load(QUICK_SPEC_YAML)


def _submit(client, spec=None, headers=JSON):
    return client.post("/studies", content=json.dumps(spec or SPEC), headers=headers)


def _errors(response):
    return {tuple(e["loc"]): e["msg"] for e in response.json()["detail"]}


def _stored_count(app_engine):
    with session_scope(app_engine) as session:
        return len(list_studies(session))


def _start(app_engine, study_id, ray_job_id="raysubmit_abc"):
    start_study(app_engine, study_id, ray_job_id=ray_job_id)


def _record_trial(session, study_id, key, status="succeeded"):
    add_trial(session, study_id, f"{study_id}-{key}", phase="tune", status=status)


@pytest.fixture
def impatient_locks(monkeypatch):
    """SQLite gives up on a held lock after 0.3 s instead of 15 s (request it before `client`)."""
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 300)


@contextmanager
def _another_process_writing(app_engine):
    """A write transaction as a study driver or the background loop would open it; it gives up after
    0.3 s on a lock (SQLite: `impatient_locks`) rather than waiting on a request of this same thread."""
    with session_scope(app_engine) as session:
        if app_engine.dialect.name == "postgresql":
            session.execute(sa.text("SET LOCAL lock_timeout = '300ms'"))
        yield session


# ----------------------------------------------------------------------------------------- submit


def test_posting_a_yaml_spec_stores_a_queued_study_and_answers_201_with_location(client):
    response = client.post("/studies", content=QUICK_SPEC_YAML, headers=YAML)
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and len(body["id"]) == 32
    assert response.headers["location"].endswith(f"/studies/{body['id']}")
    assert body["progress"] == {
        "planned": 15,
        "done": 0,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 0,
        "lost": 0,
        "fraction": 0.0,
    }
    assert body["links"]["results"] == f"/results/digits?study={body['id']}"


def test_posting_the_same_spec_as_json_stores_the_same_normalised_spec(client):
    from_yaml = client.post("/studies", content=QUICK_SPEC_YAML, headers=YAML).json()
    from_json = _submit(client).json()
    assert from_json["spec"] == from_yaml["spec"]
    assert from_json["id"] != from_yaml["id"]


@pytest.mark.parametrize(
    "content_type", ["text/yaml", "application/x-yaml", "application/json; charset=utf-8"]
)
def test_yaml_and_json_content_type_variants_are_accepted(client, content_type):
    body = json.dumps(SPEC) if "json" in content_type else QUICK_SPEC_YAML
    response = client.post("/studies", content=body, headers={"Content-Type": content_type, **AUTH})
    assert response.status_code == 201, response.text


def test_the_api_does_no_work_on_submit_it_only_stores(client, dispatcher):
    assert _submit(client).status_code == 201
    assert dispatcher.submitted == []  # the background loop submits, not the request


def test_get_study_returns_the_stored_shape_with_progress(client):
    created = _submit(client).json()
    fetched = client.get(f"/studies/{created['id']}")
    assert fetched.status_code == 200
    assert fetched.json()["id"] == created["id"] and fetched.json()["progress"]["planned"] == 15


def test_list_studies_filters_by_status_and_dataset(client, app_engine):
    first = _submit(client).json()["id"]
    second = _submit(client, {**SPEC, "dataset": "mnist_5k"}).json()["id"]
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=first, status="running")
    assert [s["id"] for s in client.get("/studies").json()] == [second, first]
    assert [s["id"] for s in client.get("/studies", params={"status": "running"}).json()] == [first]
    assert [s["id"] for s in client.get("/studies", params={"dataset": "mnist_5k"}).json()] == [second]


def test_trials_of_a_study_are_listed_and_filterable_by_phase(client, app_engine):
    study_id = _submit(client).json()["id"]
    with session_scope(app_engine) as session:
        for key, phase in (("a", "tune"), ("b", "final")):
            add_trial(
                session,
                study_id,
                f"{study_id}-{key}",
                phase=phase,
                config={"lr": 0.001},
                metrics={"test_accuracy": 0.8},
                metric_value=0.8,
                mlflow_run_id="r",
            )
    all_trials = client.get(f"/studies/{study_id}/trials").json()
    finals = client.get(f"/studies/{study_id}/trials", params={"phase": "final"}).json()
    assert [t["phase"] for t in all_trials] == ["tune", "final"]
    assert [t["trial_key"] for t in finals] == [f"{study_id}-b"]
    assert finals[0]["config"] == {"lr": 0.001} and finals[0]["metric_value"] == 0.8


# ----------------------------------------------------------------------------------------- cancel


def test_cancelling_a_queued_study_cancels_it_without_the_cluster(client, dispatcher):
    study_id = _submit(client).json()["id"]
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert dispatcher.cancelled == []


def test_cancelling_a_running_study_stops_its_ray_job_first(client, dispatcher, app_engine):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert dispatcher.cancelled == ["raysubmit_abc"]


def test_cancelling_twice_is_idempotent(client):
    study_id = _submit(client).json()["id"]
    client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    again = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def test_cancelling_a_finished_study_is_a_409_conflict(client, app_engine):
    study_id = _submit(client).json()["id"]
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=study_id, status="running")
        set_study_status(session, study_id=study_id, status="succeeded")
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 409
    assert "succeeded" in response.json()["detail"]
    assert client.get(f"/studies/{study_id}").json()["status"] == "succeeded"


def test_when_ray_cannot_be_reached_cancel_answers_503_and_the_study_keeps_running(
    client, dispatcher, app_engine
):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id, "raysubmit_x")
    dispatcher.fail_cancel = True
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 503
    assert "raysubmit_x" in response.json()["detail"]
    assert client.get(f"/studies/{study_id}").json()["status"] == "running"


def test_cancelling_a_running_study_marks_its_running_trials_cancelled(client, app_engine):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)
    with session_scope(app_engine) as session:
        _record_trial(session, study_id, "a", status="running")
        _record_trial(session, study_id, "b", status="succeeded")
    cancelled = client.post(f"/studies/{study_id}/cancel", headers=AUTH).json()
    assert cancelled["progress"]["running"] == 0 and cancelled["progress"]["cancelled"] == 1
    trials = client.get(f"/studies/{study_id}/trials").json()
    assert {t["trial_key"].rsplit("-", 1)[1]: t["status"] for t in trials} == {
        "a": "cancelled",
        "b": "succeeded",
    }


def test_the_ray_call_of_a_cancel_holds_no_database_lock(impatient_locks, client, dispatcher, app_engine):
    # A slow Ray dashboard must not stop the drivers from recording trials (SQLite's write lock) or
    # the background loop from touching the study (PostgreSQL's row lock) while it answers.
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)

    def driver_records_a_trial_during_the_ray_call(ray_job_id):
        with _another_process_writing(app_engine) as session:
            _record_trial(session, study_id, "written-during-cancel")
        dispatcher.cancelled.append(ray_job_id)

    dispatcher.cancel = driver_records_a_trial_during_the_ray_call
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "cancelled" and dispatcher.cancelled == ["raysubmit_abc"]
    trials = client.get(f"/studies/{study_id}/trials").json()
    assert [(t["trial_key"], t["status"]) for t in trials] == [
        (f"{study_id}-written-during-cancel", "succeeded")
    ]


def test_a_study_that_finishes_while_its_job_is_being_stopped_is_a_409(
    impatient_locks, client, dispatcher, app_engine
):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)

    def driver_finishes_first(ray_job_id):
        with _another_process_writing(app_engine) as session:
            set_study_status(session, study_id=study_id, status="succeeded")
        dispatcher.cancelled.append(ray_job_id)

    dispatcher.cancel = driver_finishes_first
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 409 and "succeeded" in response.json()["detail"]
    assert client.get(f"/studies/{study_id}").json()["status"] == "succeeded"


def test_a_queued_study_that_starts_while_being_cancelled_has_its_new_job_stopped(
    impatient_locks, client, dispatcher, app_engine, monkeypatch
):
    study_id = _submit(client).json()["id"]
    reads = []

    def background_loop_starts_it_right_after_the_first_read(session, *, study_id, lock=False):
        study = get_study(session, study_id=study_id, lock=lock)
        reads.append(study.status)
        if len(reads) == 1:
            with _another_process_writing(app_engine) as writer:
                set_study_runtime(writer, study_id=study_id, ray_job_id="raysubmit_late")
                set_study_status(writer, study_id=study_id, status="running")
        return study

    monkeypatch.setattr(studies_service, "get_study", background_loop_starts_it_right_after_the_first_read)
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert reads[0] == "queued" and dispatcher.cancelled == ["raysubmit_late"]


def test_cancelling_a_running_study_without_a_dispatcher_is_a_503_and_it_keeps_running(
    client, app, app_engine
):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)
    app.state.dispatcher = None
    response = client.post(f"/studies/{study_id}/cancel", headers=AUTH)
    assert response.status_code == 503 and "no dispatcher" in response.json()["detail"]
    assert client.get(f"/studies/{study_id}").json()["status"] == "running"


# ------------------------------------------------------------------------------------------ polling


def test_polling_is_not_blocked_by_a_driver_holding_the_write_lock(impatient_locks, client, app_engine):
    study_id = _submit(client).json()["id"]
    _start(app_engine, study_id)
    with session_scope(app_engine) as driver:
        _record_trial(driver, study_id, "uncommitted", status="running")  # SQLite: write lock held
        assert client.get(f"/studies/{study_id}").json()["progress"]["running"] == 0
        assert [s["id"] for s in client.get("/studies").json()] == [study_id]
        assert client.get(f"/studies/{study_id}/trials").json() == []
        assert client.get("/results/digits").status_code == 404  # no final trials yet, not a 500
        assert client.get("/readyz").json()["database"]["reachable"] is True
    assert client.get(f"/studies/{study_id}").json()["progress"]["running"] == 1


# ------------------------------------------------------------------------------------------- 401


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {API_TOKEN}"},
        {"Authorization": f"Bearer {API_TOKEN}x"},
    ],
    ids=["missing", "wrong", "not-bearer", "longer"],
)
def test_mutating_endpoints_refuse_missing_or_wrong_tokens_with_401(client, app_engine, headers):
    study_id = _submit(client).json()["id"]
    submit = client.post(
        "/studies", content=QUICK_SPEC_YAML, headers={"Content-Type": "application/yaml", **headers}
    )
    cancel = client.post(f"/studies/{study_id}/cancel", headers=headers)
    for response in (submit, cancel):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert API_TOKEN not in response.text
    assert _stored_count(app_engine) == 1
    assert client.get(f"/studies/{study_id}").json()["status"] == "queued"


def test_a_bad_token_is_refused_before_the_body_is_read(client):
    response = client.post("/studies", content="not: [valid", headers={"Content-Type": "application/yaml"})
    assert response.status_code == 401


def test_reading_needs_no_token(client):
    study_id = _submit(client).json()["id"]
    assert client.get(f"/studies/{study_id}").status_code == 200
    assert client.get("/studies").status_code == 200


# ------------------------------------------------------------------------------------------- 404


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/studies/{id}"), ("GET", "/studies/{id}/trials"), ("POST", "/studies/{id}/cancel")],
)
def test_unknown_study_ids_are_404(client, method, path):
    response = client.request(method, path.format(id="0" * 32), headers=AUTH)
    assert response.status_code == 404
    assert "no study with id" in response.json()["detail"]


# ------------------------------------------------------------------------------------------- 422


@pytest.mark.parametrize(
    ("change", "loc", "fragment"),
    [
        ({"dataset": "imagenet"}, ("body", "dataset"), "unknown dataset 'imagenet'"),
        ({"methods": ["layernorm"]}, ("body", "methods"), "unknown method"),
        ({"methods": []}, ("body", "methods"), "at least 1"),
        ({"search": {"tau": 0.5}}, ("body", "search", "tau"), "does not apply to method 'frozen_ln'"),
        (
            {"method_search": {"dyt": {"t_freeze": 3}}},
            ("body", "method_search", "dyt", "t_freeze"),
            "does not apply to method 'dyt'",
        ),
        (
            {"search": {"lr": {"type": "uniform", "low": 0.0, "high": 2.0}}},
            ("body", "search", "lr"),
            "(0, 1]",
        ),
        ({"seeds": [1, 1]}, ("body", "seeds"), "unique"),
        ({"budget": {"epochs": 0}}, ("body", "budget", "epochs"), "greater than or equal to 1"),
        ({"budget": {"epochs": 51}}, ("body", "budget", "epochs"), "at most 50"),
        ({"seeds": [0, 1, 2, 3, 4, 5]}, ("body", "seeds"), "at most 5"),
        ({"num_samples": 40}, ("body", "num_samples"), "at most 100 per study"),
        ({"resources": {"gpu": 1.5}}, ("body", "resources", "gpu"), "fraction in [0, 1]"),
        ({"nmae": "typo"}, ("body", "nmae"), "Extra inputs are not permitted"),
    ],
)
def test_bad_specs_are_422_with_the_field_path_and_store_nothing(client, app_engine, change, loc, fragment):
    response = _submit(client, {**SPEC, **change})
    assert response.status_code == 422
    errors = _errors(response)
    assert loc in errors, errors
    assert fragment in errors[loc]
    assert _stored_count(app_engine) == 0


def test_every_problem_of_a_spec_is_reported_at_once(client):
    spec = {**SPEC, "search": {"tau": 0.5, "eps_h": 0.1}, "reference_method": "film"}
    errors = _errors(_submit(client, spec))
    assert {("body", "search", "tau"), ("body", "search", "eps_h"), ("body", "reference_method")} <= set(
        errors
    )


@pytest.mark.parametrize(
    ("body", "content_type", "fragment"),
    [
        ("name: [unclosed", "application/yaml", "not valid YAML"),
        ("{not json", "application/json", "not valid JSON"),
        ("- just\n- a list", "application/yaml", "mapping of fields"),
        ("name: a\nname: b\ndataset: digits\nmethods: [dyt]", "application/yaml", "duplicate key"),
        (
            '{"name": "a", "dataset": "digits", "methods": ["dyt"], "budget": {"epochs": 1, "epochs": 400}}',
            "application/json",
            "duplicate key 'epochs'",
        ),
    ],
)
def test_unreadable_bodies_are_422_and_store_nothing(client, app_engine, body, content_type, fragment):
    response = client.post("/studies", content=body, headers={"Content-Type": content_type, **AUTH})
    assert response.status_code == 422
    assert fragment in response.json()["detail"][0]["msg"]
    assert _stored_count(app_engine) == 0


def test_a_body_that_is_not_utf8_is_422(client):
    response = client.post("/studies", content=b"\xff\xfe\x00", headers=YAML)
    assert response.status_code == 422


def test_an_unsupported_content_type_is_415(client, app_engine):
    response = client.post(
        "/studies", content="<study/>", headers={"Content-Type": "application/xml", **AUTH}
    )
    assert response.status_code == 415
    assert "application/json or application/yaml" in response.json()["detail"]
    assert _stored_count(app_engine) == 0


def test_an_oversized_body_is_413(client, settings):
    body = QUICK_SPEC_YAML + "\n# " + "x" * settings.max_spec_bytes
    response = client.post("/studies", content=body, headers=YAML)
    assert response.status_code == 413


@pytest.mark.parametrize("params", [{"status": "paused"}, {"limit": 0}])
def test_bad_list_filters_are_422(client, params):
    assert client.get("/studies", params=params).status_code == 422


def test_a_bad_trial_phase_filter_is_422(client):
    study_id = _submit(client).json()["id"]
    assert client.get(f"/studies/{study_id}/trials", params={"phase": "warmup"}).status_code == 422


def test_rejected_requests_leave_stored_studies_untouched(client):
    kept = _submit(client).json()
    _submit(client, {**SPEC, "dataset": "nope"})
    client.post("/studies", content="x: [", headers=YAML)
    client.post(f"/studies/{kept['id']}/cancel", headers={"Authorization": "Bearer wrong"})
    now = client.get(f"/studies/{kept['id']}").json()
    assert now == kept
    assert [s["id"] for s in client.get("/studies").json()] == [kept["id"]]


def test_the_openapi_document_describes_the_spec_body_and_bearer_auth(client):
    document = client.get("/openapi.json").json()
    post = document["paths"]["/studies"]["post"]
    assert set(post["requestBody"]["content"]) == {"application/json", "application/yaml"}
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    schemas = document["components"]["schemas"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/StudySpec"
    }
    assert "Budget" in schemas and "methods" in schemas["StudySpec"]["properties"]
