"""Cancelling a running study stops its Ray job and its trials; the study ends `cancelled`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from service.orchestration.dispatcher import JobState, RayJobDispatcher
from service.stack.processes import wait_until

pytestmark = pytest.mark.slow

QUICK = Path(__file__).resolve().parents[2] / "studies" / "examples" / "quick.yaml"


def test_cancel_stops_a_running_study_and_its_ray_job(running_service):
    spec = yaml.safe_load(QUICK.read_text())
    spec["name"] = "to-be-cancelled"
    spec["budget"]["epochs"] = 50  # long enough to still be running when cancelled
    with running_service.client() as client:
        created = client.post("/studies", json=spec, headers=running_service.auth())
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        assert wait_until(
            lambda: client.get(f"/studies/{study_id}").json()["status"] == "running", timeout=300, interval=1
        ), running_service.log_tail()
        job_id = client.get(f"/studies/{study_id}").json()["ray_job_id"]
        response = client.post(f"/studies/{study_id}/cancel", headers=running_service.auth())
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "cancelled"
        time.sleep(3)
        assert client.get(f"/studies/{study_id}").json()["status"] == "cancelled"
    token = (running_service.data_dir / "ray_auth_token").read_text().strip()
    ray_jobs = RayJobDispatcher(dashboard_url=running_service.ray_dashboard_url, auth_token=token)
    assert wait_until(lambda: ray_jobs.state(job_id) is JobState.STOPPED, timeout=120, interval=1)
