"""The launcher's pieces: what a study driver is told, and supervised processes that always stop."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from service.launcher import driver_environment
from service.processes import ManagedProcess, ProcessStartError, free_port, http_ok
from service.settings import Settings


def test_a_local_sqlite_database_url_travels_to_the_driver(tmp_path):
    settings = Settings(data_dir=tmp_path)
    env = driver_environment(settings)
    assert env["DATABASE_URL"] == f"sqlite:///{tmp_path / 'normlab.db'}"
    assert env["NORMLAB_DATA_DIR"] == str(tmp_path)
    assert env["MLFLOW_TRACKING_URI"] == settings.mlflow_tracking_uri


def test_a_database_password_never_travels_in_the_jobs_runtime_env(tmp_path):
    settings = Settings(
        data_dir=tmp_path, database_url="postgresql+psycopg://normlab:s3cret@postgres/normlab"
    )
    env = driver_environment(settings)
    assert "DATABASE_URL" not in env
    assert all("s3cret" not in value for value in env.values())


def _http_server(tmp_path: Path, port: int, delay_s: float = 0.0) -> ManagedProcess:
    code = f"import time, http.server; time.sleep({delay_s}); http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')"
    return ManagedProcess(
        name="http",
        argv=[sys.executable, "-c", code],
        log_path=tmp_path / "http.log",
        health_url=f"http://127.0.0.1:{port}/",
    )


def test_a_managed_process_starts_healthy_and_stop_takes_it_down(tmp_path):
    port = free_port()
    server = _http_server(tmp_path, port)
    server.start(timeout=30)
    assert server.alive and http_ok(f"http://127.0.0.1:{port}/")
    server.stop()
    assert not server.alive and not http_ok(f"http://127.0.0.1:{port}/")


def test_a_process_that_never_gets_healthy_is_stopped_and_the_error_carries_its_log(tmp_path):
    port = free_port()
    server = _http_server(tmp_path, port, delay_s=60)
    started = time.monotonic()
    with pytest.raises(ProcessStartError, match="did not become healthy"):
        server.start(timeout=2)
    assert time.monotonic() - started < 30
    assert not server.alive


def test_a_process_that_dies_at_start_reports_its_output(tmp_path):
    dying = ManagedProcess(
        name="dying",
        argv=[sys.executable, "-c", "import sys; print('bad config'); sys.exit(3)"],
        log_path=tmp_path / "dying.log",
        health_url=f"http://127.0.0.1:{free_port()}/",
    )
    with pytest.raises(ProcessStartError, match="bad config"):
        dying.start(timeout=30)
