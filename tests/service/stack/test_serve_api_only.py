"""`normlab serve --api-only`: restart only the API on the MLflow server and Ray cluster already running;
when they do not answer it starts nothing and says how to fix it. (Attaching to running services is
tested against a real stack in test_local_stack.py.)"""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

import service.cli.commands as cli
from service.stack.processes import free_port, http_ok

runner = CliRunner()


@pytest.fixture
def nothing_running(monkeypatch, tmp_path) -> dict[str, str]:
    """Settings whose MLflow and Ray addresses are free loopback ports: nothing answers there."""
    addresses = {
        "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{free_port()}",
        "RAY_ADDRESS": f"http://127.0.0.1:{free_port()}",
    }
    monkeypatch.chdir(tmp_path)  # no .env from the working tree
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NORMLAB_API_PORT", str(free_port()))
    monkeypatch.setenv("NORMLAB_API_TOKEN", "api-only-test-token")
    for name, value in addresses.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli, "err_console", Console(width=300, stderr=True))
    return addresses


def test_api_only_without_mlflow_and_ray_fails_naming_each_address_and_its_fix(nothing_running):
    result = runner.invoke(cli.app, ["serve", "--api-only"])
    assert result.exit_code == 1
    assert f"no MLflow server answers at {nothing_running['MLFLOW_TRACKING_URI']}/health" in result.output
    assert f"no Ray head answers at {nothing_running['RAY_ADDRESS']}" in result.output
    assert "set MLFLOW_TRACKING_URI to a running MLflow server" in result.output
    assert "set RAY_ADDRESS to the cluster's job server" in result.output
    assert "Traceback" not in result.output


def test_api_only_starts_nothing_when_it_fails(nothing_running):
    runner.invoke(cli.app, ["serve", "--api-only"])
    assert not http_ok(f"{nothing_running['MLFLOW_TRACKING_URI']}/health")
    assert not http_ok(f"{nothing_running['RAY_ADDRESS']}/api/version")


def test_api_only_names_only_the_service_that_does_not_answer(nothing_running, monkeypatch):
    # A file store is no server to wait for: only Ray is missing.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:///tmp/normlab-mlruns")
    result = runner.invoke(cli.app, ["serve", "--api-only"])
    assert result.exit_code == 1
    assert "no MLflow server" not in result.output and "no Ray head answers" in result.output
