"""`normlab report <study-id>`: the study's report from the API, printed or written to a file."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import service.cli.commands as cli
from studies.catalog import spec_path
from tests.factories import add_epochs, add_final_trials
from tests.service.conftest import AUTH

runner = CliRunner()


@pytest.fixture
def study_id(wired, client, app_engine) -> str:
    spec = yaml.safe_load(spec_path("cifar10_autonorm_s_beats_frozen_ln", "smoke").read_text())
    response = client.post(
        "/studies", content=json.dumps(spec), headers={"Content-Type": "application/json", **AUTH}
    )
    study = response.json()["id"]
    trials = add_final_trials(
        app_engine,
        study,
        {
            "autonorm_s": [0.98 + (seed % 3) / 200 for seed in range(5)],
            "frozen_ln": [
                0.955 + (seed % 3) / 200 + 0.002 * seed for seed in range(5)
            ],  # converged (>= 0.95)
        },
    )
    for trial in trials:  # every AutoNorm-S seed froze, so the claim is about AutoNorm-S
        if trial.method == "autonorm_s":
            add_epochs(app_engine, study, trial.trial_key, {2: {"gates_frozen": 1, "freeze_epoch": 1}})
    return study


def test_report_prints_the_markdown_report_with_its_verdict(study_id):
    result = runner.invoke(cli.app, ["report", study_id])
    assert result.exit_code == 0, result.output
    assert "Verdict: SUPPORTED" in result.output
    assert "cifar10_autonorm_s_beats_frozen_ln" in result.output


def test_report_writes_html_to_a_file(study_id, tmp_path):
    target = tmp_path / "reports" / "cifar10.html"
    result = runner.invoke(cli.app, ["report", study_id, "--format", "html", "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert f"wrote the html report of study {study_id}" in result.output
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_report_json_is_the_apis_json(study_id, tmp_path):
    target = tmp_path / "report.json"
    assert runner.invoke(cli.app, ["report", study_id, "-f", "json", "-o", str(target)]).exit_code == 0
    assert json.loads(target.read_text())["verdict"] == "supported"


def test_report_rejects_an_unknown_format_and_an_unknown_study(wired):
    bad_format = runner.invoke(cli.app, ["report", "abc", "--format", "pdf"])
    assert bad_format.exit_code == 1 and "choose one of md, html, json" in bad_format.output
    missing = runner.invoke(cli.app, ["report", "no-such-study"])
    assert missing.exit_code == 1 and "no-such-study" in missing.output
