"""`normlab submit` checks a spec locally, as the API would, and sends nothing when it is invalid."""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

import service.cli.client as api_client
import service.cli.commands as cli
from tests.factories import QUICK_SPEC_YAML

runner = CliRunner()


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """A CLI with a token whose every attempt to reach the API fails the test."""
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NORMLAB_API_URL", "http://normlab.test")
    monkeypatch.setenv("NORMLAB_API_TOKEN", "t")
    monkeypatch.setattr(cli, "err_console", Console(width=1000, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=1000, stderr=True))

    def no_network(api_url, token):
        raise AssertionError("an invalid spec must not be sent")

    monkeypatch.setattr(cli, "make_http_client", no_network)
    monkeypatch.setattr(api_client, "make_http_client", no_network)


def _submit(tmp_path, text: str, name: str = "spec.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return runner.invoke(cli.app, ["submit", str(path)])


def test_an_autonorm_s_that_could_never_freeze_is_refused_before_sending(offline, tmp_path):
    never = QUICK_SPEC_YAML.replace("budget: {epochs: 4", "budget: {epochs: 3")  # t_freeze up to 3
    result = _submit(tmp_path, never)
    assert result.exit_code == 1
    assert "the study spec is invalid" in result.output
    assert "method_search.autonorm_s.t_freeze: t_freeze can be 3 but budget.epochs is 3" in result.output
    assert "keep t_freeze below 3" in result.output and "nothing was sent" in result.output


def test_the_default_t_freeze_is_refused_naming_the_field_to_set(offline, tmp_path):
    text = QUICK_SPEC_YAML.replace(", t_freeze: {type: int, low: 1, high: 3}", "")
    result = _submit(tmp_path, text)
    assert result.exit_code == 1
    assert "budget.epochs:" in result.output
    assert "set method_search.autonorm_s.t_freeze below 4" in result.output


def test_types_are_as_strict_as_the_apis(offline, tmp_path):
    # Lax validation would read "4" as 4; the API's strict JSON mode refuses it, and so does the CLI.
    result = _submit(tmp_path, QUICK_SPEC_YAML.replace("epochs: 4", 'epochs: "4"'))
    assert result.exit_code == 1 and "budget.epochs: Input should be a valid integer" in result.output


def test_values_the_store_cannot_keep_are_refused_as_the_api_refuses_them(offline, tmp_path):
    result = _submit(tmp_path, QUICK_SPEC_YAML + "description: 2024-01-01\n")
    assert result.exit_code == 1 and "description: a YAML date value is not JSON data" in result.output


def test_unreadable_files_are_refused_before_sending(offline, tmp_path):
    result = _submit(tmp_path, "{", name="spec.json")
    assert result.exit_code == 1 and "not valid JSON" in result.output and "nothing was sent" in result.output


def test_a_valid_spec_passes_the_local_check():
    cli.check_spec_text(QUICK_SPEC_YAML)
