"""`normlab plan spec.yaml`: asks the API for the plan and prints it in 80 columns (`--json`: as the API
sent it); a spec error is reported with its field paths before anything is sent, and an API that does not
answer gets the message that says how to start it."""

from __future__ import annotations

import json

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

import service.cli.client as api_client
import service.cli.commands as cli
from tests.factories import QUICK_SPEC_YAML

runner = CliRunner()
# The test server allows 5 seeds per study: looks at 3, 4 and 5 seeds (the API tests plan the same design).
SEQUENTIAL = {
    **{key: value for key, value in yaml.safe_load(QUICK_SPEC_YAML).items() if key != "seeds"},
    "sequential": {"first_seeds": 3, "seeds_per_look": 1, "max_seeds": 5, "effect": 0.02},
}


@pytest.fixture
def sequential_file(tmp_path):
    path = tmp_path / "sequential.yaml"
    path.write_text(yaml.safe_dump(SEQUENTIAL, sort_keys=False))
    return path


def test_the_plan_is_printed_in_80_columns_with_its_trials_costs_and_design(wired, sequential_file, client):
    result = runner.invoke(cli.app, ["plan", str(sequential_file)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("Plan for tiny: digits, vit_lite_tiny")
    text = " ".join(line.strip() for line in lines)  # fragments may be wrapped
    for fragment in (
        "tune   2 per method, 6 in all",
        "final  5 per method, 15 in all",
        "as written (maximum)",
        "first look",
        "expected, effect",
        "expected, no effect",
        "Sequential design: superiority, effect 0.02, alpha 0.05, power 0.8; looks at 3, 4, 5",
        "Spread of paired differences: sd 0.01; prior, not a measurement",
        "GPU-hours on an NVIDIA H200: no GPU step time has been measured for vit_lite_tiny on digits",
    ):
        assert fragment in text, fragment
    assert client.get("/studies").json() == []  # planning stores nothing


def test_json_prints_the_apis_plan(wired, sequential_file):
    result = runner.invoke(cli.app, ["plan", str(sequential_file), "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["design"] == "sequential" and [s["name"] for s in plan["sequential"]["scenarios"]] == [
        "effect",
        "no_effect",
    ]


def test_a_spec_error_is_reported_with_its_field_path_before_anything_is_sent(wired, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SEQUENTIAL, "sequential": {"test": "equivalence"}}))
    result = runner.invoke(cli.app, ["plan", str(bad)])
    assert result.exit_code == 1
    assert "the study spec is invalid" in result.output and "sequential.margin" in result.output
    assert "nothing was sent" in result.output


def test_an_unreachable_api_names_the_fix(monkeypatch, tmp_path, sequential_file):
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NORMLAB_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NORMLAB_API_TOKEN", "t")
    monkeypatch.setattr(cli, "err_console", Console(width=200, stderr=True))
    monkeypatch.setattr(api_client, "err_console", Console(width=200, stderr=True))
    result = runner.invoke(cli.app, ["plan", str(sequential_file)])
    assert result.exit_code == 1
    assert "cannot reach the API at http://127.0.0.1:9" in result.output
    assert "start it with `make run` (or `normlab serve`)" in result.output


def test_without_a_token_it_says_where_to_get_one(monkeypatch, tmp_path, sequential_file):
    monkeypatch.delenv("NORMLAB_API_TOKEN", raising=False)
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(cli, "err_console", Console(width=200, stderr=True))
    result = runner.invoke(cli.app, ["plan", str(sequential_file)])
    assert result.exit_code == 1 and "no API token" in result.output
