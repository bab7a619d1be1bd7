"""The dispatcher against the real Ray job server that `normlab serve` started (token auth on)."""

from __future__ import annotations

import uuid

import pytest

from service.orchestration.dispatcher import DispatchError, JobState, RayJobDispatcher, submission_id_for
from service.stack.processes import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def dispatcher(running_service) -> RayJobDispatcher:
    token = (running_service.data_dir / "ray_auth_token").read_text().strip()
    return RayJobDispatcher(
        dashboard_url=running_service.ray_dashboard_url,
        auth_token=token,
        driver_env={
            "DATABASE_URL": running_service.database_url,
            "MLFLOW_TRACKING_URI": running_service.mlflow_url,
        },
    )


def test_submitting_the_same_study_twice_creates_one_job(dispatcher):
    study_id = "missing-" + uuid.uuid4().hex[:8]
    first = dispatcher.submit(study_id, {})
    second = dispatcher.submit(study_id, {})
    assert first == second == submission_id_for(study_id)


def test_a_driver_for_an_unknown_study_fails_and_its_logs_say_why(dispatcher):
    study_id = "missing-" + uuid.uuid4().hex[:8]
    job = dispatcher.submit(study_id, {})
    assert wait_until(lambda: dispatcher.state(job).terminal, timeout=180, interval=1)
    assert dispatcher.state(job) is JobState.FAILED
    assert study_id in dispatcher.logs_tail(job)


def test_a_job_the_cluster_never_saw_reads_as_missing(dispatcher):
    assert dispatcher.state("normlab-study-never-submitted") is JobState.MISSING


def test_the_job_server_refuses_a_wrong_ray_token(running_service):
    wrong = RayJobDispatcher(dashboard_url=running_service.ray_dashboard_url, auth_token="not-the-token")
    with pytest.raises(DispatchError):
        wrong.submit("any-study", {})
