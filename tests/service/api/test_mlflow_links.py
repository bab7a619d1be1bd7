"""Every MLflow link NormLab prints or serves opens MLflow 3's training view (runs, metric charts) of the
study's experiment or run, never the GenAI view the UI picks by default: the `normlab serve` banner,
`normlab status`, the study's JSON, the report and the results page."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from typer.testing import CliRunner

import service.cli.commands as cli
from service.api.app import create_app
from service.api.mlflow_links import TRAINING_VIEW_QUERY, mlflow_ui_url
from service.settings import Settings
from service.stack.launcher import Origin, startup_banner
from tests.factories import QUICK_SPEC_YAML, add_trial, finish_study, start_study, submit
from tests.service.conftest import AUTH

runner = CliRunner()
EXPERIMENT = "7"
RUNS = {
    (method, seed): f"run{method.replace('_', '')}{seed}"
    for method in ("autonorm_s", "frozen_ln", "dyt")
    for seed in (0, 1, 2)
}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({}, "http://mlflow.test:5000/#/experiments?workflowType=machine_learning"),
        ({"experiment_id": "12"}, "http://mlflow.test:5000/#/experiments/12?workflowType=machine_learning"),
        (
            {"experiment_id": "12", "run_id": "abc"},
            "http://mlflow.test:5000/#/experiments/12/runs/abc?workflowType=machine_learning",
        ),
    ],
)
def test_the_ui_routes_of_the_experiment_list_an_experiment_and_a_run(where, expected):
    assert mlflow_ui_url("http://mlflow.test:5000/", **where) == expected


def test_a_tracking_uri_that_is_no_server_has_no_ui_link():
    assert mlflow_ui_url("file:///tmp/mlruns", experiment_id="1") is None
    assert mlflow_ui_url("sqlite:///tmp/mlflow.db") is None


def test_a_run_link_needs_its_experiment():
    with pytest.raises(ValueError, match="experiment_id"):
        mlflow_ui_url("http://mlflow.test", run_id="abc")


def _mlflow_urls(text: str, tracking_uri: str) -> list[str]:
    """Every URL into the MLflow server at `tracking_uri` that `text` holds (HTML-escaped ones too)."""
    text = text.replace("&amp;", "&")
    return [url for url in re.findall(r"https?://[^\s\"'<>()\[\]]+", text) if url.startswith(tracking_uri)]


def _assert_training_view(urls: list[str], tracking_uri: str, *, pages: set[str]) -> None:
    """Each URL opens the training view of one of `pages` (routes under /#/, e.g. experiments/7)."""
    assert urls, "no MLflow link found"
    for url in urls:
        assert url.endswith(f"?{TRAINING_VIEW_QUERY}"), url
        route = url.removeprefix(f"{tracking_uri}/#/").removesuffix(f"?{TRAINING_VIEW_QUERY}")
        assert route in pages, url


def test_the_banner_links_the_experiment_list_in_the_training_view(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://127.0.0.1:5000")
    console = Console(record=True, width=250)
    console.print(startup_banner(settings, mlflow=Origin.STARTED, ray=Origin.STARTED))
    urls = _mlflow_urls(console.export_text(), "http://127.0.0.1:5000")
    _assert_training_view(urls, "http://127.0.0.1:5000", pages={"experiments"})


def _finished_study(client: TestClient, engine) -> str:
    """A submitted study, finished with a run per final trial in experiment EXPERIMENT."""
    study_id = submit(client)
    start_study(engine, study_id, ray_job_id=None, mlflow_experiment_id=EXPERIMENT, mlflow_parent_run_id="p")
    for (method, seed), run_id in RUNS.items():
        value = 0.9 + seed / 100
        add_trial(
            engine,
            study_id,
            f"{study_id}-{method}-{seed}",
            method=method,
            seed=seed,
            metrics={"test_accuracy": value},
            metric_value=value,
            mlflow_run_id=run_id,
        )
    finish_study(engine, study_id)
    return study_id


def _status_output(monkeypatch, app, settings: Settings, study_id: str) -> str:
    """What `normlab status` prints, the CLI's HTTP going to the test app."""
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("NORMLAB_API_URL", "http://normlab.test")
    monkeypatch.setattr(cli, "console", Console(width=250))
    monkeypatch.setattr(
        "service.cli.client.make_http_client", lambda url, token: TestClient(app, base_url=url)
    )
    result = runner.invoke(cli.app, ["status", study_id])
    assert result.exit_code == 0, result.output
    return result.output


def test_every_link_the_api_and_cli_give_opens_the_studys_experiment_or_runs_in_the_training_view(
    monkeypatch, app, client, app_engine, settings
):
    tracking_uri = str(settings.mlflow_tracking_uri)
    study_id = _finished_study(client, app_engine)
    experiment = {f"experiments/{EXPERIMENT}"}
    runs = {f"experiments/{EXPERIMENT}/runs/{run_id}" for run_id in RUNS.values()}

    study = client.get(f"/studies/{study_id}")
    listed = client.get("/studies")
    assert study.json()["links"]["mlflow"] == mlflow_ui_url(tracking_uri, experiment_id=EXPERIMENT)
    for text in (study.text, listed.text, _status_output(monkeypatch, app, settings, study_id)):
        _assert_training_view(_mlflow_urls(text, tracking_uri), tracking_uri, pages=experiment)
    for fmt in ("html", "md", "json"):
        report = client.get(f"/studies/{study_id}/report", params={"format": fmt})
        assert report.status_code == 200, report.text
        _assert_training_view(_mlflow_urls(report.text, tracking_uri), tracking_uri, pages=experiment)
    results = client.get("/results/digits", params={"format": "html", "study": study_id})
    assert results.status_code == 200, results.text
    urls = _mlflow_urls(results.text, tracking_uri)
    _assert_training_view(urls, tracking_uri, pages=runs)
    assert {url.split("/runs/")[1].split("?")[0] for url in urls} == set(RUNS.values())


def test_a_study_without_an_experiment_yet_links_no_mlflow_page(client):
    created = client.post(
        "/studies", content=QUICK_SPEC_YAML, headers={**AUTH, "Content-Type": "application/yaml"}
    ).json()
    assert created["links"]["mlflow"] is None


def test_links_open_where_a_browser_reaches_mlflow_when_the_services_reach_it_by_another_name(
    settings, dispatcher
):
    """Compose: the API reaches MLflow at http://mlflow:5000, a browser on the host at localhost:5000.
    Every link (JSON, report, results, the HTML pages) starts with NORMLAB_MLFLOW_UI_URL, none with the
    tracking URI."""
    ui = "http://localhost:5999"
    app = create_app(settings=settings.model_copy(update={"mlflow_ui_url": ui}), dispatcher=dispatcher)
    with TestClient(app) as client:
        study_id = _finished_study(client, app.state.engine)
        html = {"Accept": "text/html"}
        texts = [
            client.get(f"/studies/{study_id}").text,
            client.get(f"/studies/{study_id}", headers=html).text,
            client.get("/", headers=html).text,
            client.get(f"/studies/{study_id}/report", params={"format": "html"}).text,
            client.get("/results/digits", params={"format": "html", "study": study_id}).text,
        ]
    experiment = {f"experiments/{EXPERIMENT}"}
    runs = {f"experiments/{EXPERIMENT}/runs/{run_id}" for run_id in RUNS.values()}
    for text in texts:
        assert _mlflow_urls(text, str(settings.mlflow_tracking_uri)) == []
        _assert_training_view(_mlflow_urls(text, ui), ui, pages=experiment | runs)


def test_the_ui_url_defaults_to_the_tracking_uri(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, mlflow_tracking_uri="http://mlflow.test:5000/")
    assert settings.mlflow_ui_url == "http://mlflow.test:5000"
