"""The API against its own OpenAPI schema (schemathesis, in-process over ASGI): for generated valid and
invalid requests, on every operation, no answer is a 5xx, every status and body is the documented one,
an operation that needs the token answers 401 without it and changes nothing, and after every request
each stored study still reads back as a valid spec.

Derandomized with a fixed seed and a small example budget per operation and phase (examples, coverage,
fuzzing), so a run is repeatable and bounded.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error

from studies.spec import StudySpec
from studies.store import list_studies, session_scope
from tests.service.api.schema_cases import openapi_document, seed_study
from tests.service.conftest import AUTH

MAX_EXAMPLES = 25  # per operation and phase

# POST /studies validates more than JSON Schema can say (cross-field rules such as low < high, the
# server's study limits), so a schema-valid spec may rightly be a 422; the check keeps its defaults
# otherwise (2xx, 401, 403, 404, 409, ...).
_POSITIVE_STATUSES_FOR_SPECS = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]

CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20240601,
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": True},
        # Stateful links are not declared; the per-request state check below covers what it would.
        "phases": {"stateful": {"enabled": False}},
        "operations": [
            {
                "include-path": "/studies",
                "include-method": "POST",
                "checks": {"positive_data_acceptance": {"expected-statuses": _POSITIVE_STATUSES_FOR_SPECS}},
            }
        ],
    }
)


@pytest.fixture
def seeded_app(app, client):
    """The app with one study and its final-phase trials, so reads and the results table have data."""
    seed_study(app, client)
    return app


# Loaded once at import (schemathesis' fixture-based loader does not run on pytest 9); each case is sent
# to the test's own app, on a fresh database (SQLite, and PostgreSQL where that server runs).
schema = schemathesis.openapi.from_dict(openapi_document(), config=CONFIG)


def _stored_studies(app) -> list:
    with session_scope(app.state.engine, readonly=True) as session:
        return list_studies(session, limit=10_000)


def _needs_token(case: Case) -> bool:
    # Cases that try an undocumented method on the path (expected: 405) are not the operation itself.
    same_method = case.method.upper() == case.operation.method.upper()
    return same_method and bool(case.operation.definition.raw.get("security"))


@pytest.mark.slow  # ~20 s per database on 2 cores
@schema.parametrize()
# One app per operation on purpose: studies that earlier examples stored stay, and must stay valid.
@settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_answers_as_documented_and_keeps_stored_studies_valid(case: Case, seeded_app):
    # Every case, and every request a check re-sends, goes to this test's app and database.
    case.operation.app = case.operation.schema.app = seeded_app
    if _needs_token(case):
        before = len(_stored_studies(seeded_app))
        anonymous = case.call(headers={"Authorization": ""})
        assert anonymous.status_code == 401, anonymous.text
        assert "detail" in anonymous.json()
        assert len(_stored_studies(seeded_app)) == before

    # /readyz answers its documented 503 under these settings (they point at no Ray or MLflow): that is
    # the readiness check working, not a server error; its body is still checked against the schema.
    not_ready_is_an_answer = case.operation.path == "/readyz"
    case.call_and_validate(
        headers=AUTH, excluded_checks=[not_a_server_error] if not_ready_is_an_answer else None
    )

    for study in _stored_studies(seeded_app):
        StudySpec.model_validate(study.spec)  # raises if a request stored something that no longer validates
