"""MLflow with its basic-auth app, started by the compose image's own entrypoint (docker/mlflow_entrypoint.py):
a request without credentials is refused, and the project's tracking path (a trial's tracker, the service's
probe and run closing) signs in with MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD."""

from __future__ import annotations

import configparser
import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from service.orchestration.study_runs import StudyRuns
from service.stack.probe import Answer, mlflow_answer, mlflow_auth_headers
from service.stack.processes import free_port, http_ok, wait_until
from tests.process_groups import stop_process_group
from workers.tracking.spool import journal_paths
from workers.tracking.tracker import tracker_from_trial_config

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "mlflow_entrypoint.py"
ADMIN = "normlab-admin"
PASSWORD = "auth-test-" + uuid.uuid4().hex[:12]
SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"


def load_entrypoint() -> ModuleType:
    """docker/ is no package: the script is loaded from its file, as the image runs it."""
    spec = importlib.util.spec_from_file_location("mlflow_entrypoint", ENTRYPOINT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_entrypoint_writes_the_auth_config_from_the_environment_without_the_password(tmp_path):
    entrypoint = load_entrypoint()
    env = {
        "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN,
        "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "conf" / "basic_auth.ini"),
        "MLFLOW_AUTH_DATABASE_URI": f"sqlite:///{tmp_path / 'auth' / 'users.db'}",
    }
    path = entrypoint.write_auth_config(env)
    config = configparser.ConfigParser()
    config.read(path)
    assert dict(config["mlflow"]) == {
        "default_permission": "NO_PERMISSIONS",
        "database_uri": env["MLFLOW_AUTH_DATABASE_URI"],
        "admin_username": ADMIN,
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
    }
    assert PASSWORD not in path.read_text()  # MLflow reads it from MLFLOW_AUTH_ADMIN_PASSWORD itself
    assert (tmp_path / "auth").is_dir()  # SQLite makes the file, not its folder
    assert env["MLFLOW_FLASK_SERVER_SECRET_KEY"]  # the auth app refuses to start without one
    assert entrypoint.auth_server_argv(["--port=5000"]) == [
        "mlflow",
        "server",
        "--app-name",
        "basic-auth",
        "--port=5000",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MLFLOW_AUTH_ADMIN_USERNAME": ADMIN}, "set MLFLOW_AUTH_ADMIN_PASSWORD"),
        ({"MLFLOW_AUTH_ADMIN_USERNAME": ADMIN, "MLFLOW_AUTH_ADMIN_PASSWORD": "short"}, "at least 12"),
    ],
)
def test_the_entrypoint_refuses_to_start_without_a_usable_admin_password(tmp_path, env, message):
    entrypoint = load_entrypoint()
    env = {**env, "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini")}
    with pytest.raises(entrypoint.AuthConfigError, match=message):
        entrypoint.write_auth_config(env)


def test_the_probe_sends_the_credentials_mlflows_client_sends():
    basic = mlflow_auth_headers({"MLFLOW_TRACKING_USERNAME": "u", "MLFLOW_TRACKING_PASSWORD": "p"})
    assert basic == {"Authorization": "Basic dTpw"}
    assert mlflow_auth_headers({"MLFLOW_TRACKING_TOKEN": "t"}) == {"Authorization": "Bearer t"}
    assert mlflow_auth_headers({"MLFLOW_TRACKING_USERNAME": "u"}) == {}


@dataclass
class AuthMlflow:
    uri: str
    log_path: Path


@pytest.fixture(scope="module")
def auth_mlflow(tmp_path_factory) -> Iterator[AuthMlflow]:
    """`python docker/mlflow_entrypoint.py ARGS`, as the mlflow container starts it, on a loopback port."""
    if importlib.util.find_spec("flask_wtf") is None:
        pytest.fail("MLflow's basic-auth app needs mlflow[auth]: pip install 'Flask-WTF<2'")
    data = tmp_path_factory.mktemp("mlflow-auth")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the venv's `mlflow`
        MLFLOW_AUTH_ADMIN_USERNAME=ADMIN,
        MLFLOW_AUTH_ADMIN_PASSWORD=PASSWORD,
        MLFLOW_AUTH_CONFIG_PATH=str(data / "basic_auth.ini"),
        MLFLOW_AUTH_DATABASE_URI=f"sqlite:///{data / 'auth' / 'basic_auth.db'}",
    )
    log_path = data / "mlflow.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(ENTRYPOINT),
                f"--backend-store-uri=sqlite:///{data / 'mlflow.db'}",
                f"--artifacts-destination={data / 'artifacts'}",
                "--serve-artifacts",
                "--host=127.0.0.1",
                f"--port={port}",
                "--workers=1",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    uri = f"http://127.0.0.1:{port}"
    try:
        up = wait_until(lambda: process.poll() is not None or http_ok(f"{uri}/health"), timeout=120)
        assert up and process.poll() is None, log_path.read_text(errors="replace")[-3000:]
        yield AuthMlflow(uri=uri, log_path=log_path)
    finally:
        stop_process_group(process)


@pytest.mark.slow
def test_the_rest_api_refuses_requests_without_valid_credentials_and_health_stays_open(auth_mlflow):
    # Every password check is a full hash computation on the server: on a loaded 2-core machine one took
    # longer than httpx's 5 s default, so the requests wait as long as the server needs.
    with httpx.Client(base_url=auth_mlflow.uri, timeout=60.0) as http:
        assert http.get(SEARCH).status_code == 401
        assert http.get(SEARCH, auth=(ADMIN, "wrong-password")).status_code == 401
        assert http.get(SEARCH, auth=(ADMIN, PASSWORD)).status_code == 200
        assert http.get("/health").status_code == 200  # compose's healthcheck needs no login


@pytest.mark.slow
def test_without_credentials_the_mlflow_client_is_refused(auth_mlflow, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(MlflowException, match=r"401|not authenticated"):
        MlflowClient(auth_mlflow.uri).search_experiments(max_results=1)


@pytest.mark.slow
def test_a_trial_logs_its_run_and_the_service_probes_and_closes_runs_with_the_env_credentials(
    auth_mlflow, monkeypatch, tmp_path
):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    assert mlflow_answer(auth_mlflow.uri) is Answer.UP

    client = MlflowClient(auth_mlflow.uri)
    experiment_id = client.create_experiment(f"auth-{uuid.uuid4().hex[:8]}")
    study_id = "auth-study"
    # What the driver hands a trial (workers.driver), and what the trial does with it (workers.training).
    config = {
        "method": "frozen_ln",
        "dataset": "digits",
        "seed": 0,
        "study_id": study_id,
        "phase": "final",
        "trial_key": f"{study_id}/final/frozen_ln/seed0",
        "mlflow_tracking_uri": auth_mlflow.uri,
        "mlflow_experiment_id": experiment_id,
        "mlflow_spool_dir": str(tmp_path / "spool"),
    }
    tracker = tracker_from_trial_config(config)
    assert tracker is not None
    tracker.start()
    for epoch in range(3):
        tracker.log_metrics({"val_accuracy": 0.1 * epoch}, step=epoch)
    # The basic-auth server hashes the password on every request: seconds each on a loaded machine.
    assert tracker.close("FINISHED", timeout_s=60), auth_mlflow.log_path.read_text(errors="replace")[-3000:]
    (run,) = client.search_runs([experiment_id])
    assert run.info.run_id == tracker.run_id and run.info.status == "FINISHED"
    assert run.data.tags["normlab.trial_key"] == config["trial_key"]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")] == [0, 1, 2]
    assert journal_paths(tmp_path / "spool") == []  # delivered, nothing left to the spool

    # The service's own use of MLflow: closing the runs a failed study left RUNNING.
    left = client.create_run(experiment_id, tags={"normlab.study_id": study_id})
    closed = StudyRuns(auth_mlflow.uri).close(
        study_id=study_id, experiment_id=experiment_id, study_status="failed"
    )
    assert closed == {left.info.run_id: "FAILED"}
