"""`normlab serve`'s MLflow asks for its user's password (service.stack.mlflow_auth): a local process without
it gets a 401, the stack's own processes sign in (the quick study's runs: tests/e2e/test_quick_study.py), and
the banner and the pages say whom to sign in as, never the password."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import MLFLOW_CREDENTIALS

pytestmark = pytest.mark.slow

SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"
USER = MLFLOW_CREDENTIALS["MLFLOW_TRACKING_USERNAME"]
PASSWORD = MLFLOW_CREDENTIALS["MLFLOW_TRACKING_PASSWORD"]


def test_the_stacks_mlflow_refuses_a_local_process_without_its_users_password(running_service):
    # The first check of a password is a full hash: seconds on a loaded 2-core machine.
    with httpx.Client(base_url=running_service.mlflow_url, timeout=60) as http:
        assert http.get(SEARCH).status_code == 401
        assert http.post("/api/2.0/mlflow/experiments/create", json={"name": "intruder"}).status_code == 401
        assert http.get("/").headers.get("www-authenticate", "").startswith("Basic")  # a browser asks
        assert http.get(SEARCH, auth=(USER, PASSWORD)).status_code == 200
    with running_service.client() as api:
        assert api.get("/readyz").json()["mlflow"]["ready"] is True


def test_the_banner_and_the_pages_say_whom_to_sign_in_as_and_never_the_password(running_service):
    banner = running_service.log_path.read_text()
    assert f"sign in as {USER}; password from MLFLOW_TRACKING_PASSWORD" in banner
    with running_service.client() as api:
        home = api.get("/", headers={"Accept": "text/html"}).text
    assert f"user <code>{USER}</code>" in home and "normlab token --mlflow" in home
    assert PASSWORD not in banner and PASSWORD not in home
