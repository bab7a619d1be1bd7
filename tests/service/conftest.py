"""Fixtures for the service tests: an app wired to the test's database (tests/database.py) with a fake
dispatcher."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.orchestration.ports import ClusterUnreachableError, JobState
from service.settings import Settings

API_TOKEN = "test-token-not-secret"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


class FakeDispatcher:
    """Records what the API asks of the cluster; `fail_cancel` makes cancel raise like an unreachable Ray
    (the service.orchestration.ports.Dispatcher contract: ClusterUnreachableError)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self.fail_cancel = False

    def submit(self, study_id: str, spec: dict | None = None, *, attempt: int = 1) -> str:
        self.submitted.append(study_id)
        return f"raysubmit_{study_id}"

    def state(self, job_id: str) -> JobState:
        return JobState.STOPPED if job_id in self.cancelled else JobState.RUNNING

    def end_reason(self, job_id: str, state: JobState) -> str:
        return f"Ray job {job_id} ended {state.value}"

    def logs_tail(self, job_id: str, max_chars: int = 4000) -> str:
        return ""

    def cancel(self, ray_job_id: str) -> None:
        if self.fail_cancel:
            raise ClusterUnreachableError("ray dashboard unreachable")
        self.cancelled.append(ray_job_id)


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        database_url=database_url,
        api_token=API_TOKEN,
        auto_migrate=False,  # the database is at head already (database_url): no Alembic run per app
        # The Hosts the tests' requests name: TestClient's default, and the CLI tests' NORMLAB_API_URL.
        allowed_hosts=["testserver", "normlab.test"],
        ray_address=None,
        # Nothing listens on these ports: readiness must report Ray and MLflow as unreachable.
        ray_dashboard_port=9,
        mlflow_tracking_uri="http://127.0.0.1:9",
        max_trials_per_study=100,
        max_seeds_per_study=5,
        max_epochs_per_trial=50,
    )


@pytest.fixture
def dispatcher() -> FakeDispatcher:
    return FakeDispatcher()


@pytest.fixture
def app(settings: Settings, dispatcher: FakeDispatcher):
    return create_app(settings=settings, dispatcher=dispatcher)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client


@pytest.fixture
def app_engine(app) -> sa.Engine:
    return app.state.engine
