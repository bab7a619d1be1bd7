"""The API against its own OpenAPI schema (schemathesis, in-process over ASGI): for generated valid and
invalid requests, on every operation, no answer is a 5xx, every status and body is the documented one,
an operation that needs the token answers 401 without it and changes nothing, and after every request
each stored study still reads back as a valid spec.

Derandomized with a fixed seed and a small example budget per operation and phase (examples, coverage,
fuzzing), so a run is repeatable and bounded.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings
from schemathesis import Case

from service.api.app import create_app
from service.settings import Settings
from studies.spec import StudySpec
from studies.store import list_studies, record_trial, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import API_TOKEN, AUTH

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
    response = client.post(
        "/studies",
        content=json.dumps(yaml.safe_load(QUICK_SPEC_YAML)),
        headers={"Content-Type": "application/json", **AUTH},
    )
    assert response.status_code == 201, response.text
    study_id = response.json()["id"]
    with session_scope(app.state.engine) as session:
        for method in ("autonorm_s", "frozen_ln", "dyt"):
            for seed in (0, 1, 2):
                record_trial(
                    session,
                    study_id=study_id,
                    trial_key=f"{study_id}-final-{method}-{seed}",
                    phase="final",
                    method=method,
                    config={"method": method, "seed": seed},
                    seed=seed,
                    status="succeeded",
                    metrics={"test_accuracy": 0.9 + seed / 100},
                    metric_value=0.9 + seed / 100,
                    mlflow_run_id=None,
                )
    return app


def _openapi_document() -> dict:
    """The document the app serves; building the app touches no database (nothing migrates or connects)."""
    settings = Settings(
        _env_file=None, database_url="sqlite://", auto_migrate=False, api_token=API_TOKEN, ray_address=None
    )
    return create_app(settings=settings, dispatcher=None).openapi()


# Loaded once at import (schemathesis' fixture-based loader does not run on pytest 9); each case is sent
# to the test's own app, on a fresh database (SQLite, and PostgreSQL where that server runs).
schema = schemathesis.openapi.from_dict(_openapi_document(), config=CONFIG)


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

    case.call_and_validate(headers=AUTH)

    for study in _stored_studies(seeded_app):
        StudySpec.model_validate(study.spec)  # raises if a request stored something that no longer validates
