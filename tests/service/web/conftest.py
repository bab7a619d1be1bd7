"""A live API for the browser tests: the real app (create_app) served by uvicorn on a free loopback port,
in a thread of the test process, over a real SQLite store the test writes to as the study driver would.

Cheaper than the whole stack (tests/e2e): no Ray, no MLflow, no trials trained; the test moves a study
along in the store (store_rows) and watches the page follow it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import API_TOKEN, AUTH, FakeDispatcher
from tests.service.web.store_rows import SPEC


@dataclass(frozen=True)
class LiveApi:
    url: str  # http://127.0.0.1:<port>
    app: FastAPI
    engine: sa.Engine  # the app's: what the test writes, the pages read

    def submit(self, **changes: object) -> str:
        """POST a study (store_rows.SPEC with `changes`) as a client would; its id."""
        response = httpx.post(f"{self.url}/studies", json={**SPEC, **changes}, headers=AUTH, timeout=30)
        assert response.status_code == 201, response.text
        return response.json()["id"]


@pytest.fixture
def live_api(tmp_path: Path, migrated_sqlite_url: str) -> Iterator[LiveApi]:
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        database_url=migrated_sqlite_url,
        api_token=API_TOKEN,
        auto_migrate=False,
        ray_address=None,
        ray_dashboard_port=9,  # nothing listens there: the Ray and MLflow links are external, never followed
        mlflow_tracking_uri="http://127.0.0.1:9",
    )
    app = create_app(settings=settings, dispatcher=FakeDispatcher())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield LiveApi(f"http://127.0.0.1:{port}", app, app.state.engine)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()
