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

Path ids point at a stored study and trial, so a request gets past its 404 to the checks of its query
and body (the fuzz test, tests/service/api/test_api_fuzz.py, sends unknown ids). SQLite only: the schema
is the same on either database. Derandomized, a fixed budget per operation.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case

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
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)

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
