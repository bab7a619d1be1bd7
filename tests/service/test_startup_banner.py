"""The banner `normlab serve` prints: where everything is, how each service was come by, and where the API
token is kept (never the token itself: the banner lands in terminals, CI logs and `make run` transcripts)."""

from __future__ import annotations

import pytest
from rich.console import Console

from service.launcher import Origin, startup_banner
from service.settings import Settings


def _banner_text(settings: Settings, *, mlflow: Origin = Origin.STARTED, ray: Origin = Origin.STARTED) -> str:
    console = Console(record=True, width=250)
    console.print(startup_banner(settings, mlflow=mlflow, ray=ray))
    return console.export_text()


def test_a_token_from_the_environment_is_not_shown_only_where_it_comes_from(tmp_path):
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, api_token="env-secret-42"))
    assert "env-secret-42" not in text
    assert "NORMLAB_API_TOKEN" in text and "token` prints it" in text


def test_a_stored_token_is_not_shown_only_the_file_it_is_stored_in(tmp_path):
    (tmp_path / "api_token").write_text("file-secret-42\n")
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, api_token=None))
    assert "file-secret-42" not in text
    assert str(tmp_path / "api_token") in text and "token` prints it" in text


def test_the_curl_example_fetches_the_token_with_normlab_token(tmp_path):
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, api_token="env-secret-42"))
    assert "Authorization: Bearer $(" in text and ' token)"' in text


def test_a_database_password_is_masked(tmp_path):
    settings = Settings(
        _env_file=None, data_dir=tmp_path, database_url="postgresql+psycopg://normlab:s3cret@db/normlab"
    )
    text = _banner_text(settings)
    assert "s3cret" not in text and "normlab:***@db/normlab" in text


@pytest.mark.parametrize(
    ("mlflow", "ray", "shown"),
    [
        (Origin.STARTED, Origin.STARTED, ["started here", "started here"]),
        (Origin.ATTACHED, Origin.STARTED, ["attached: it was already running", "started here"]),
        (Origin.CONFIGURED, Origin.ATTACHED, ["configured elsewhere", "attached: it was already running"]),
    ],
)
def test_each_service_line_says_whether_it_was_started_or_attached_to(tmp_path, mlflow, ray, shown):
    lines = _banner_text(Settings(_env_file=None, data_dir=tmp_path), mlflow=mlflow, ray=ray).splitlines()
    mlflow_line = next(line for line in lines if "MLflow UI" in line)
    ray_line = next(line for line in lines if "Ray " in line)
    assert shown[0] in mlflow_line and shown[1] in ray_line
