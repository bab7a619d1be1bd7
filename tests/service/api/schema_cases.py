"""What the schema-driven API tests share: the OpenAPI document the app serves, and a stored study with
final-phase trials, so reads, reports and the results table have data to answer from."""

from __future__ import annotations

import json

import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from studies.store import record_trial, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import API_TOKEN, AUTH

SEEDED_METHODS = ("autonorm_s", "frozen_ln", "dyt")
SEEDED_SEEDS = (0, 1, 2)


def openapi_document() -> dict:
    """The document the app serves; building the app touches no database (nothing migrates or connects)."""
    settings = Settings(
        _env_file=None, database_url="sqlite://", auto_migrate=False, api_token=API_TOKEN, ray_address=None
    )
    return create_app(settings=settings, dispatcher=None).openapi()


def seed_study(app: FastAPI, client: TestClient) -> str:
    """Submit the quick spec and store its final trials (every method on every seed); its id."""
    response = client.post(
        "/studies",
        content=json.dumps(yaml.safe_load(QUICK_SPEC_YAML)),
        headers={"Content-Type": "application/json", **AUTH},
    )
    assert response.status_code == 201, response.text
    study_id = response.json()["id"]
    with session_scope(app.state.engine) as session:
        for method in SEEDED_METHODS:
            for seed in SEEDED_SEEDS:
                record_trial(
                    session,
                    study_id=study_id,
                    trial_key=seeded_trial_key(study_id, method, seed),
                    phase="final",
                    method=method,
                    config={"method": method, "seed": seed},
                    seed=seed,
                    status="succeeded",
                    metrics={"test_accuracy": 0.9 + seed / 100},
                    metric_value=0.9 + seed / 100,
                    mlflow_run_id=None,
                )
    return study_id


def seeded_trial_key(study_id: str, method: str, seed: int) -> str:
    return f"{study_id}-final-{method}-{seed}"
