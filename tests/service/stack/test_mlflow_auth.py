"""The local MLflow's sign-in (service.stack.mlflow_auth): the basic-auth app's config written into the data
dir without the password, a start that fails early and names the fix, and the check that the server takes
the stack's credentials. The real server with it: tests/service/stack/test_local_stack.py."""

from __future__ import annotations

import configparser
import stat

import pytest

import service.stack.mlflow_auth as mlflow_auth
from service.auth import MlflowCredentials
from service.stack.local_stack import mlflow_server
from service.stack.mlflow_auth import AUTH_CACHE_TTL_S, auth_server_env, check_sign_in
from service.stack.probe import StackUnavailableError

CREDENTIALS = MlflowCredentials("normlab", "a-generated-password-0123")


def test_the_auth_config_lies_in_the_data_dir_owner_only_without_the_password(tmp_path):
    env = auth_server_env(CREDENTIALS, tmp_path)
    path = tmp_path / "mlflow_auth.ini"
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert CREDENTIALS.password not in path.read_text()  # MLflow reads it from the environment
    assert env["MLFLOW_AUTH_ADMIN_PASSWORD"] == CREDENTIALS.password
    assert env["MLFLOW_FLASK_SERVER_SECRET_KEY"]  # the auth app refuses to start without one
    config = configparser.ConfigParser()
    config.read(path)
    assert dict(config["mlflow"]) == {
        "default_permission": "NO_PERMISSIONS",
        "database_uri": f"sqlite:///{tmp_path / 'mlflow_auth.db'}",
        "admin_username": "normlab",
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
        # Without it every request hashes the password: ~170 ms each on a 2-core machine.
        "auth_cache_ttl_seconds": str(AUTH_CACHE_TTL_S),
    }


def test_the_server_runs_the_auth_app_only_when_given_its_environment(tmp_path):
    env = auth_server_env(CREDENTIALS, tmp_path)
    signed = mlflow_server(data_dir=tmp_path, host="127.0.0.1", port=5999, auth_env=env)
    assert signed.argv[3:6] == ["server", "--app-name", "basic-auth"]
    assert signed.env["MLFLOW_AUTH_CONFIG_PATH"] == env["MLFLOW_AUTH_CONFIG_PATH"]
    assert signed.env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"  # still lean
    open_server = mlflow_server(data_dir=tmp_path, host="127.0.0.1", port=5999)
    assert "--app-name" not in open_server.argv and "MLFLOW_AUTH_CONFIG_PATH" not in open_server.env


def test_a_password_mlflow_would_refuse_fails_the_start_naming_the_fix(tmp_path):
    with pytest.raises(StackUnavailableError, match="at least 12"):
        auth_server_env(MlflowCredentials("normlab", "short"), tmp_path)
    assert not (tmp_path / "mlflow_auth.ini").exists()


def test_without_mlflows_auth_extra_the_start_fails_naming_both_fixes(tmp_path, monkeypatch):
    monkeypatch.setattr(mlflow_auth.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(StackUnavailableError, match=r"mlflow\[auth\].*NORMLAB_MLFLOW_AUTH=false"):
        auth_server_env(CREDENTIALS, tmp_path)


def _answers(monkeypatch, *, signed_in: int | None, anonymous: int | None) -> list[dict]:
    asked: list[dict] = []

    def http_status(url, timeout=2.0, headers=None):
        asked.append(dict(headers or {}))
        return signed_in if headers else anonymous

    monkeypatch.setattr(mlflow_auth, "http_status", http_status)
    return asked


def test_a_server_that_refuses_the_stacks_credentials_fails_the_start_without_showing_them(monkeypatch):
    _answers(monkeypatch, signed_in=401, anonymous=401)
    with pytest.raises(StackUnavailableError, match="refuses user 'normlab'") as refused:
        check_sign_in("http://127.0.0.1:5000", CREDENTIALS, "/data/mlflow_password")
    assert "/data/mlflow_password" in str(refused.value) and "mlflow_auth.db" in str(refused.value)
    assert CREDENTIALS.password not in str(refused.value)


def test_the_check_says_whether_the_server_asks_anyone_for_credentials(monkeypatch):
    asked = _answers(monkeypatch, signed_in=200, anonymous=401)
    assert check_sign_in("http://127.0.0.1:5000", CREDENTIALS, "file") is True
    assert asked[0]["Authorization"].startswith("Basic ") and asked[1] == {}
    _answers(monkeypatch, signed_in=200, anonymous=200)
    assert check_sign_in("http://127.0.0.1:5000", CREDENTIALS, "file") is False
