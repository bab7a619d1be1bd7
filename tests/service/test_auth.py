"""Tokens and the local MLflow's password: taken from settings, else generated once into the data dir with
owner-only permissions."""

from __future__ import annotations

import stat

from service.auth import (
    ensure_api_token,
    ensure_mlflow_credentials,
    ensure_ray_auth_token,
    mlflow_password_source,
    read_api_token,
    read_mlflow_password,
    token_matches,
)
from service.settings import Settings


def _settings(tmp_path, **values) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **values)


def test_the_configured_token_wins_and_nothing_is_written(tmp_path):
    settings = _settings(tmp_path, api_token="from-env")
    assert ensure_api_token(settings) == "from-env"
    assert not settings.api_token_path.exists()


def test_without_a_configured_token_one_is_generated_once_and_stored_owner_only(tmp_path):
    settings = _settings(tmp_path)
    first = ensure_api_token(settings)
    assert len(first) >= 40
    assert ensure_api_token(settings) == first  # stable across restarts
    assert read_api_token(settings) == first
    mode = stat.S_IMODE(settings.api_token_path.stat().st_mode)
    assert mode == 0o600


def test_an_empty_token_file_is_replaced(tmp_path):
    settings = _settings(tmp_path)
    settings.data_dir.mkdir(parents=True)
    settings.api_token_path.write_text("")
    assert ensure_api_token(settings)


def test_read_api_token_never_creates_one(tmp_path):
    settings = _settings(tmp_path)
    assert read_api_token(settings) is None
    assert not settings.api_token_path.exists()


def test_the_ray_token_is_separate_from_the_api_token(tmp_path):
    settings = _settings(tmp_path)
    assert ensure_ray_auth_token(settings) != ensure_api_token(settings)
    assert ensure_ray_auth_token(_settings(tmp_path, ray_auth_token="ray-secret")) == "ray-secret"


def test_token_matching_is_exact():
    assert token_matches("abc", "abc")
    assert not token_matches("abd", "abc")
    assert not token_matches("ab", "abc")
    assert not token_matches("", "abc")
    assert not token_matches(None, "abc")


def test_the_mlflow_password_is_generated_once_owner_only_and_the_user_defaults_to_normlab(
    tmp_path, monkeypatch
):
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    settings = _settings(tmp_path)
    assert read_mlflow_password(settings) is None  # reading never creates one
    first = ensure_mlflow_credentials(settings)
    assert first.username == "normlab" and len(first.password) >= 12  # MLflow refuses shorter ones
    assert ensure_mlflow_credentials(settings) == first  # stable across restarts: MLflow keeps its admin
    assert read_mlflow_password(settings) == first.password
    assert stat.S_IMODE(settings.mlflow_password_path.stat().st_mode) == 0o600
    assert first.password not in repr(first)
    assert first.env() == {"MLFLOW_TRACKING_USERNAME": "normlab", "MLFLOW_TRACKING_PASSWORD": first.password}
    assert first.password not in {ensure_api_token(settings), ensure_ray_auth_token(settings)}


def test_mlflows_own_variables_name_the_user_and_password_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "from-the-environment")
    settings = _settings(tmp_path)
    assert ensure_mlflow_credentials(settings).env() == {
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": "from-the-environment",
    }
    assert mlflow_password_source(settings).startswith("MLFLOW_TRACKING_PASSWORD")
    assert not settings.mlflow_password_path.exists()


def test_an_empty_mlflow_user_variable_means_the_default_user(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "")
    assert _settings(tmp_path).mlflow_username == "normlab"
