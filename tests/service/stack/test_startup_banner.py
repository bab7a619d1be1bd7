"""The banner `normlab serve` prints: where everything is, how each service was come by, and where the API
token is kept (never the token itself: the banner lands in terminals, CI logs and `make run` transcripts)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator

import pytest
from rich.console import Console

import service.stack.launcher as launcher
from service.orchestration.readiness import Check, Readiness
from service.settings import Settings
from service.stack.launcher import Origin, startup_banner
from service.stack.stop_signals import StopSignals
from tests.service.conftest import FakeDispatcher


def _banner_text(
    settings: Settings,
    *,
    mlflow: Origin = Origin.STARTED,
    ray: Origin = Origin.STARTED,
    readiness: Readiness | None = None,
) -> str:
    console = Console(record=True, width=250)
    console.print(startup_banner(settings, mlflow=mlflow, ray=ray, readiness=readiness))
    return console.export_text()


def _readiness(ray: Check | None = None, disk: Check | None = None) -> Readiness:
    fine = Check(True, "fine")
    return Readiness(database=fine, disk=disk or fine, mlflow=fine, ray=ray or fine)


def test_a_stack_that_can_run_a_study_says_it_is_ready(tmp_path):
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path), readiness=_readiness())
    assert "Ready      yes: a study can run now" in text and "NOT READY" not in text


def test_a_stack_that_cannot_run_a_study_says_what_is_not_ready_and_why(tmp_path):
    no_agent = "the Ray job server at http://127.0.0.1:8265 takes no job (HTTP 500: No available agent [x])"
    readiness = _readiness(ray=Check(False, no_agent), disk=Check(False, "/data has 12 MB free"))
    lines = _banner_text(Settings(_env_file=None, data_dir=tmp_path), readiness=readiness).splitlines()
    start = next(i for i, line in enumerate(lines) if "NOT READY" in line)
    assert "studies queue until this is fixed" in lines[start]
    assert "- disk: /data has 12 MB free" in lines[start + 1]
    assert f"- ray: {no_agent}" in lines[start + 2]  # Ray's words as they are, brackets included


def test_the_banner_says_whom_mlflows_sign_in_asks_for_and_where_the_password_is_never_the_password(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    settings = Settings(_env_file=None, data_dir=tmp_path)
    console = Console(record=True, width=250)
    console.print(startup_banner(settings, mlflow=Origin.STARTED, ray=Origin.STARTED, mlflow_user="normlab"))
    text = console.export_text()
    assert "sign in as normlab" in text and str(settings.mlflow_password_path) in text
    assert "token --mlflow` prints it" in text
    assert "sign in as" not in _banner_text(settings)  # an MLflow without sign-in: nothing to say


def test_a_token_from_the_environment_is_not_shown_only_where_it_comes_from(tmp_path):
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, api_token="env-secret-42"))
    assert "env-secret-42" not in text
    assert "NORMLAB_API_TOKEN" in text and "token` prints it" in text


def test_a_stored_token_is_not_shown_only_the_file_it_is_stored_in(tmp_path):
    (tmp_path / "api_token").write_text("file-secret-42\n")
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, api_token=None))
    assert "file-secret-42" not in text
    assert str(tmp_path / "api_token") in text and "token` prints it" in text


def test_the_rays_dashboard_token_is_named_by_where_it_is_kept_and_the_command_that_prints_it(tmp_path):
    (tmp_path / "ray_auth_token").write_text("ray-secret-42\n")
    text = _banner_text(Settings(_env_file=None, data_dir=tmp_path, ray_auth_token=None))
    assert "ray-secret-42" not in text
    assert str(tmp_path / "ray_auth_token") in text and "token --ray` prints it" in text


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


class _IdleReconciler:
    """Stands in for the reconcile loop: the start path only starts, wakes and stops it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def start(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def stop(self, wait_s: float) -> None:
        pass


def _start_output(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> str:
    """What `normlab serve` writes, its logging (as basicConfig sets it up) and the console in one stream,
    from the start up to the banner: on a fresh database, both migrations (the launcher's and the app's)
    run for real; MLflow, Ray and the API do not start (a stop is asked for before the API would)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root, alembic = logging.getLogger(), logging.getLogger("alembic")
    levels = (root.level, alembic.level)
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # basicConfig(level=INFO) sets none here: pytest's handlers are on root

    @contextlib.contextmanager
    def stack(settings: Settings, **kwargs: object) -> Iterator[launcher.LocalStack]:
        yield launcher.LocalStack(settings, "ray-token", FakeDispatcher(), [], Origin.STARTED, Origin.STARTED)

    monkeypatch.setattr(launcher, "local_stack", stack)
    monkeypatch.setattr(launcher, "StudyReconciler", _IdleReconciler)
    monkeypatch.setattr(launcher, "console", Console(file=stream, width=250))
    signals = StopSignals()
    signals.requested.set()
    try:
        launcher._serve(settings, signals, demo=False, api_only=False)
    finally:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        alembic.setLevel(levels[1])
    return stream.getvalue()


def test_the_first_lines_of_a_start_are_the_banner_not_alembics_migration_log(monkeypatch, tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, api_token="t", log_level="info", trial_hosts=False)
    output = _start_output(monkeypatch, settings)
    before_banner, banner, after = output.partition("NormLab is running")
    assert banner, output
    assert "alembic" not in before_banner.lower(), before_banner
    assert "Ready      yes" in after or "NOT READY" in after  # the readiness /readyz gives, checked at start
    assert (tmp_path / "normlab.db").exists()  # the migrations did run


def test_a_failed_migration_still_says_why(monkeypatch, tmp_path):
    (tmp_path / "normlab.db").write_text("not a database")
    settings = Settings(_env_file=None, data_dir=tmp_path, api_token="t", trial_hosts=False)
    with pytest.raises(Exception, match="file is not a database"):
        _start_output(monkeypatch, settings)


def test_serve_turns_off_the_genai_view_run_links_its_mlflow_client_would_print(monkeypatch, tmp_path):
    # MLflow's client prints "View run ... at: <url>" (in the GenAI view) for every run it ends.
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "false")  # restored after the test
    _start_output(monkeypatch, Settings(_env_file=None, data_dir=tmp_path, api_token="t", trial_hosts=False))
    assert os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true"
