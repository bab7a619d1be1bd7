"""Settings: environment names, loopback defaults, derived URLs and limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.settings import Settings
from studies.limits import StudyLimits


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("DATABASE_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    import os

    for name in list(os.environ):
        if name.startswith("NORMLAB_"):
            monkeypatch.delenv(name)


def test_defaults_bind_loopback_and_derive_everything_from_the_data_dir(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert settings.database_url == f"sqlite:///{tmp_path / 'normlab.db'}"
    assert settings.mlflow_tracking_uri == "http://127.0.0.1:5000"
    assert settings.mlflow_backend_store_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert settings.api_url == "http://127.0.0.1:8000"
    assert settings.ray_address is None and settings.ray_gcs_port == 6390  # Redis holds 6379
    assert settings.ray_dashboard_url == "http://127.0.0.1:8265"
    assert {settings.api_host, settings.mlflow_host, settings.ray_host, settings.ray_dashboard_host} == {
        "127.0.0.1"
    }
    assert settings.api_token is None


def test_the_data_dir_defaults_to_normlab_in_home():
    assert Settings(_env_file=None).data_dir == Path("~/.normlab").expanduser()


def test_environment_names_follow_the_tools_conventions(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@db:5432/normlab")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    monkeypatch.setenv("RAY_ADDRESS", "http://ray-head:8265")
    monkeypatch.setenv("NORMLAB_API_TOKEN", "s3cret")
    monkeypatch.setenv("NORMLAB_API_PORT", "9000")
    monkeypatch.setenv("NORMLAB_MAX_SEEDS", "7")
    settings = Settings(_env_file=None)
    assert settings.data_dir == tmp_path
    assert settings.database_url == "postgresql+psycopg://u@db:5432/normlab"
    assert settings.mlflow_tracking_uri == "http://mlflow:5000"
    assert settings.ray_dashboard_url == "http://ray-head:8265"
    assert settings.api_url == "http://127.0.0.1:9000"
    assert settings.api_token.get_secret_value() == "s3cret"
    assert settings.study_limits == StudyLimits(max_trials=500, max_seeds=7, max_epochs=500)


def test_secrets_do_not_appear_in_the_settings_repr(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, api_token="s3cret", ray_auth_token="r4y")
    assert "s3cret" not in repr(settings) and "r4y" not in repr(settings)


def test_an_inverted_worker_port_range_is_refused(tmp_path):
    with pytest.raises(ValueError, match="ray_min_worker_port"):
        Settings(_env_file=None, data_dir=tmp_path, ray_min_worker_port=20000, ray_max_worker_port=10000)


def test_driver_recovery_defaults_resume_interrupted_studies_with_three_attempts(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert (settings.max_study_attempts, settings.interrupted_studies) == (3, "resume")


def test_driver_recovery_is_set_from_the_environment_and_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_MAX_STUDY_ATTEMPTS", "1")
    monkeypatch.setenv("NORMLAB_INTERRUPTED_STUDIES", "cancel")
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert (settings.max_study_attempts, settings.interrupted_studies) == (1, "cancel")
    with pytest.raises(ValueError, match="max_study_attempts"):
        Settings(_env_file=None, data_dir=tmp_path, max_study_attempts=0)
    with pytest.raises(ValueError, match="interrupted_studies"):
        Settings(_env_file=None, data_dir=tmp_path, interrupted_studies="fail")
