"""/healthz, and /readyz: ready only when a study could run now (the database takes writes with disk to spare,
MLflow answers, Ray's job server takes jobs), else 503 naming each part that is not ready and why."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from service.api.app import create_app
from service.orchestration.ports import ClusterUnreachableError
from service.orchestration.readiness import check_disk
from service.settings import Settings
from studies.store import make_engine, session_scope, upgrade_database

NO_AGENT = "Request failed with status code 500: No available agent to submit job, please try again later."


class _Mlflow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def mlflow_url() -> Iterator[str]:
    """An HTTP server that answers /health as MLflow's tracking server does."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Mlflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class ProbedDispatcher:
    """A dispatcher whose job server answers readiness's probe as told (and counts the probes)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.probes = 0

    def probe(self) -> str:
        self.probes += 1
        if self.error is not None:
            raise self.error
        return "the Ray job server at http://ray.test takes jobs (its job agent answered)"


@pytest.fixture
def ready_client(settings, mlflow_url) -> Iterator[tuple[TestClient, ProbedDispatcher]]:
    """An app whose database, disk, MLflow and Ray job server all work."""
    dispatcher = ProbedDispatcher()
    app = create_app(
        settings=settings.model_copy(update={"mlflow_tracking_uri": mlflow_url}), dispatcher=dispatcher
    )
    with TestClient(app) as client:
        yield client, dispatcher


def test_healthz_answers_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_is_ready_when_every_part_a_study_needs_works(ready_client):
    client, _ = ready_client
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready" and body["not_ready"] == []
    assert body["database"]["ready"] and body["database"]["detail"] == "takes writes"
    assert body["disk"]["ready"] and body["disk"]["free_mb"] >= body["disk"]["min_free_mb"] == 200
    assert body["mlflow"]["ready"] and body["mlflow"]["reachable"]
    assert body["ray"]["ready"] and "takes jobs" in body["ray"]["detail"]


def test_readyz_is_503_naming_mlflow_and_ray_when_neither_answers(client):
    # The service tests' settings point MLflow and Ray at port 9, where nothing listens.
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503 and body["status"] == "not ready"
    assert body["database"]["ready"] and body["disk"]["ready"]
    assert [line.split(":")[0] for line in body["not_ready"]] == ["mlflow", "ray"]
    assert body["mlflow"] == {
        "ready": False,
        "detail": "no MLflow server answers at http://127.0.0.1:9/health",
        "url": "http://127.0.0.1:9/health",
        "reachable": False,
    }
    assert body["ray"]["reachable"] is False and "http://127.0.0.1:9" in body["ray"]["detail"]


def test_a_job_server_that_answers_but_takes_no_job_is_not_ready_in_rays_words(ready_client):
    # What a head whose dashboard agent could not bind its port answers every submission (its job listing
    # and version still answer).
    client, dispatcher = ready_client
    dispatcher.error = ClusterUnreachableError(
        f"the Ray job server at http://ray.test takes no job ({NO_AGENT})"
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["not_ready"] == [
        f"ray: the Ray job server at http://ray.test takes no job ({NO_AGENT})"
    ]


def test_the_ray_answer_is_reused_for_a_few_seconds(ready_client):
    client, dispatcher = ready_client
    for _ in range(3):
        assert client.get("/readyz").status_code == 200
    assert dispatcher.probes == 1
    client.app.state.readiness.ray.cache_s = 0  # type: ignore[attr-defined]
    client.get("/readyz")
    assert dispatcher.probes == 2


def test_readyz_is_503_when_the_database_is_unreachable(ready_client):
    client, _ = ready_client
    client.app.state.engine = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:9/none")
    response = client.get("/readyz")
    assert response.status_code == 503
    database = response.json()["database"]
    assert database["ready"] is False and database["reachable"] is False
    assert database["backend"] == "postgresql"
    assert database["detail"].startswith("does not answer: OperationalError")


def _read_only(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite:///file:{parsed.database}?mode=ro&uri=true"
    options = f"{parsed.query.get('options', '')} -c default_transaction_read_only=on".strip()
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


def test_a_database_that_answers_but_refuses_writes_is_not_ready(ready_client, database_url):
    client, _ = ready_client
    client.app.state.engine = make_engine(_read_only(database_url))
    try:
        response = client.get("/readyz")
    finally:
        client.app.state.engine.dispose()
    database = response.json()["database"]
    assert response.status_code == 503
    assert database["ready"] is False and database["reachable"] is True
    assert database["detail"].startswith("refuses a write")
    assert "read" in database["detail"].lower()  # SQLite: "readonly database"; PostgreSQL: "read-only"


def test_another_writer_holding_the_lock_neither_blocks_readiness_nor_makes_it_fail(ready_client, app_engine):
    client, _ = ready_client
    client.app.state.engine = app_engine
    with session_scope(app_engine) as writer:
        writer.execute(sa.text("UPDATE studies SET name = name WHERE 1 = 0"))  # SQLite: the write lock held
        started = time.monotonic()
        response = client.get("/readyz")
        took = time.monotonic() - started
    assert response.status_code == 200 and response.json()["database"]["ready"]
    assert took < 5


def test_a_data_dir_with_less_free_space_than_the_floor_is_not_ready(settings, mlflow_url):
    huge_floor = 1 << 40  # MB: more than any disk here has free
    app = create_app(
        settings=settings.model_copy(
            update={"mlflow_tracking_uri": mlflow_url, "min_free_disk_mb": huge_floor}
        ),
        dispatcher=ProbedDispatcher(),
    )
    with TestClient(app) as client:
        response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert [line.split(":")[0] for line in body["not_ready"]] == ["disk"]
    assert f"under NORMLAB_MIN_FREE_DISK_MB={huge_floor}" in body["disk"]["detail"]


def _mount(*args: str) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a test filesystem here (mount {' '.join(args)}): {result.stderr.strip()}")


@pytest.fixture
def tiny_filesystem(tmp_path) -> Iterator[Path]:
    """A 16 MiB tmpfs: a data dir that holds a database but is under the 200 MB floor."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = tmp_path / "tiny"
    path.mkdir()
    _mount("-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def test_a_data_dir_on_a_tiny_filesystem_is_not_ready(tiny_filesystem, mlflow_url):
    data_dir = tiny_filesystem / "data"
    url = f"sqlite:///{data_dir / 'normlab.db'}"
    data_dir.mkdir()
    upgrade_database(url)
    settings = Settings(
        _env_file=None,
        data_dir=data_dir,
        database_url=url,
        api_token="t",
        mlflow_tracking_uri=mlflow_url,
        allowed_hosts=["testserver"],
    )
    with TestClient(create_app(settings=settings, dispatcher=ProbedDispatcher())) as client:
        response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503 and len(body["not_ready"]) == 1
    assert body["not_ready"][0].startswith(f"disk: {data_dir} has 1")  # 15 or 16 MB, what the database left
    assert "MB free, under NORMLAB_MIN_FREE_DISK_MB=200" in body["not_ready"][0]
    assert body["database"]["ready"]  # a write rolled back never reaches the disk: only the floor finds it


def test_a_data_dir_on_a_read_only_filesystem_is_not_ready(tiny_filesystem):
    read_only = tiny_filesystem.parent / "read-only"
    read_only.mkdir()
    _mount("--bind", str(tiny_filesystem), str(read_only))
    try:
        _mount("-o", "remount,bind,ro", str(read_only))
        check = check_disk([read_only / "data"], min_free_mb=1)
    finally:
        subprocess.run(["umount", "-l", str(read_only)], capture_output=True, check=False)
    assert not check.ready and check.detail == f"{read_only} is on a read-only filesystem"
