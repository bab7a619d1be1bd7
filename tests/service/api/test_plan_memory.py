"""Bounded sizes through the API: an impossible or oversized model is a 422 at its field before anything is
stored, and the plan (POST /plans, `normlab plan`) shows the largest trial's memory against the limit."""

from __future__ import annotations

import json

import yaml

from service.cli.client import render_plan
from studies.store import list_studies, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}
SPEC = yaml.safe_load(QUICK_SPEC_YAML)


def _with_overrides(**overrides) -> str:
    return json.dumps({**SPEC, "model": {"preset": "vit_lite_tiny", "overrides": overrides}})


def _stored(app_engine) -> int:
    with session_scope(app_engine, readonly=True) as session:
        return len(list_studies(session))


def test_a_twelve_terabyte_model_is_a_422_naming_the_field_the_estimate_and_the_limit(client, app_engine):
    response = client.post("/studies", content=_with_overrides(dim=10**6, depth=1000), headers=JSON)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"][-3:] == ["model", "overrides", "dim"]
    assert "PiB per trial" in error["msg"] and "GiB (RAM per CPU trial" in error["msg"]
    assert _stored(app_engine) == 0


def test_zero_heads_is_a_422_at_the_heads(client, app_engine):
    response = client.post("/studies", content=_with_overrides(heads=0), headers=JSON)
    assert response.status_code == 422, response.text
    assert [e["loc"][-3:] for e in response.json()["detail"]] == [["model", "overrides", "heads"]]
    assert _stored(app_engine) == 0


def test_the_plan_shows_the_largest_trials_memory_against_the_servers_limit(client, settings):
    response = client.post("/plans", content=json.dumps(SPEC), headers=JSON)
    assert response.status_code == 200, response.text
    memory = response.json()["memory"]
    assert memory["limit_bytes"] == int(settings.trial_memory_gib * 2**30)
    assert 0 < memory["bytes"] < memory["limit_bytes"]
    line = next(line for line in render_plan(response.json()).splitlines() if line.startswith("Memory"))
    assert "Memory per trial:" in line and "on CPU" in line
    text = render_plan(response.json())
    assert "% used" in text and "NORMLAB_TRIAL_MEMORY_GIB" in text
