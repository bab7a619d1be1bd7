"""The OpenAPI document and the API's validators agree: every request that document calls valid
(schemathesis' positive cases, for every operation) is accepted, never refused as invalid.

"Accepted" means a 2xx, or a documented 4xx that is no validation error of the request's shape (404 for
an id that is not stored, 409 for a state, 401 never: the token is sent). A 422 is a disagreement: the
document allowed what the validator refused (an empty `?claim=`, a YAML body that is no mapping). The
422s that remain possible for a schema-valid request depend on what is stored or on rules JSON Schema
cannot state, and the test names them: a name looked up in the stored data and not found (a metric, a
claim, a reference row: like a 404, but at its query parameter), an Idempotency-Key sent again with
another spec, and a spec that breaks a rule about its content (cross-field rules such as low < high, the
server's study limits), always at a field inside the spec.

The last test checks one case by hand, with a JSON Schema validator: `integer` counts 3.0 as an integer
(a number with no fractional part), so the API takes 3.0 in an integer field and refuses 3.5, `true` and
"3", as the schema does.

Path ids point at a stored study and trial, so a request gets past its 404 to the checks of its query
and body (the fuzz test, tests/service/api/test_api_fuzz.py, sends unknown ids). SQLite only: the schema
is the same on either database. Derandomized, a fixed budget per operation.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from jsonschema import Draft202012Validator
from schemathesis import Case

from tests.factories import quick_spec
from tests.service.api.schema_cases import SEEDED_METHODS, openapi_document, seed_study, seeded_trial_key
from tests.service.conftest import AUTH

MAX_EXAMPLES = 40  # per operation and phase

CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20240607,
        "generation": {"mode": "positive", "max-examples": MAX_EXAMPLES, "deterministic": True},
        "phases": {"stateful": {"enabled": False}},
    }
)
DOCUMENT = openapi_document()
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)

# The operations that read a StudySpec body (service.api.routes.spec_body.read_spec).
_SPEC_OPERATIONS = {("POST", "/studies"), ("POST", "/plans")}
_SEEDED_DATASET = "digits"  # tests.factories.QUICK_SPEC_YAML's
# 422s that answer from the stored data, which no schema knows (service.api.errors, service.api.results).
_STATE_REFUSALS = frozenset(
    {
        "unknown_metric",
        "claim_not_served",
        "unknown_reference",
        "ambiguous_reference",
        "idempotency_key_reused",
    }
)


@pytest.fixture
def database_url(migrated_sqlite_url: str) -> str:
    return migrated_sqlite_url


@pytest.fixture
def seeded(app, client) -> tuple[object, str]:
    return app, seed_study(app, client)


def _refusal_of_a_valid_request(case: Case, body: object) -> str | None:
    """Why a 422 to a schema-valid request is a disagreement, or None when it is one of the two the
    module's docstring allows."""
    errors = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(errors, list):
        return f"a 422 without a list of field errors: {body!r}"
    spec_operation = (case.operation.method.upper(), case.operation.path) in _SPEC_OPERATIONS
    for error in errors:
        loc = list(error.get("loc", []))
        # An empty value names nothing: refusing it is the validator's, and the schema must say so.
        if error.get("type") in _STATE_REFUSALS and error.get("input") not in ("", None):
            continue
        # A rule about the spec's content names a field inside it: ["body", "budget", "epochs"].
        if spec_operation and len(loc) >= 2 and loc[0] == "body" and error.get("type") != "spec_format":
            continue
        return f"refused at {loc}: {error.get('type')}: {error.get('msg')}"
    return None


@pytest.mark.slow  # ~40 s on 2 cores: every operation, MAX_EXAMPLES cases each
@schema.parametrize()
@settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_schema_valid_request_is_accepted(case: Case, seeded):
    app, study_id = seeded
    case.operation.app = case.operation.schema.app = app
    path = case.path_parameters or {}
    if "study_id" in path:
        path["study_id"] = study_id
    if "trial_key" in path:
        path["trial_key"] = seeded_trial_key(study_id, SEEDED_METHODS[0], 0)
    if "dataset" in path:
        path["dataset"] = _SEEDED_DATASET

    response = case.call(headers=AUTH)

    # A documented 503 (not ready: the test's settings point at no Ray or MLflow) is an answer; a 500 is
    # not. Whether each status and body is the documented one is the fuzz test's part.
    documented = set(case.operation.definition.raw.get("responses", {}))
    ok = response.status_code < 500 or (
        response.status_code != 500 and str(response.status_code) in documented
    )
    assert ok, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
    assert response.status_code != 401, "the token was sent"
    if response.status_code == 422:
        problem = _refusal_of_a_valid_request(case, response.json())
        assert problem is None, (
            f"{case.method} {case.formatted_path} query={case.query} body={case.body!r:.300}: {problem}"
        )


# The request body's schema as a JSON Schema validator reads it (OpenAPI 3.1 schemas are draft 2020-12).
SPEC_SCHEMA = Draft202012Validator(
    {"$ref": "#/components/schemas/StudySpec", "components": DOCUMENT["components"]}
)


def _knobs(t_freeze: dict) -> dict:
    return {"method_search": {"autonorm_s": {"tau": {"type": "fixed", "value": 0.5}, "t_freeze": t_freeze}}}


# The quick spec without the shorthands the schema does not describe (`model: name`, `knob: value`).
_FULL_FORM = {"model": {"preset": "vit_lite_tiny"}, **_knobs({"type": "int", "low": 1, "high": 3})}


@pytest.mark.parametrize(
    ("changes", "refused_at"),
    [
        # JSON Schema's `integer` is any number with no fractional part: 3.0 is one, and is accepted.
        ({"max_failures": 3.0}, None),
        ({"budget": {"epochs": 4.0, "batch_size": 32.0}, "seeds": [0.0, 1.0, 2.0], "num_samples": 2.0}, None),
        (_knobs({"type": "int", "low": 1.0, "high": 3.0}), None),
        ({"max_failures": 3.5}, ["body", "max_failures"]),
        ({"max_failures": True}, ["body", "max_failures"]),
        ({"max_failures": "3"}, ["body", "max_failures"]),
    ],
    ids=["3.0", "whole-floats", "int-range", "3.5", "true", "numeric-string"],
)
def test_the_schema_and_the_validator_agree_on_what_an_integer_is(client, changes, refused_at):
    spec = quick_spec(**{**_FULL_FORM, **changes})
    schema_errors = [error.message for error in SPEC_SCHEMA.iter_errors(spec)]

    response = client.post(
        "/studies", content=json.dumps(spec), headers={"Content-Type": "application/json", **AUTH}
    )

    assert (not schema_errors) is (refused_at is None), schema_errors
    if refused_at is None:
        assert response.status_code == 201, response.text
    else:
        assert response.status_code == 422, response.text
        assert refused_at in [error["loc"] for error in response.json()["detail"]]
